//! The fixture's GRUB: Debian's GRUB 2.14, the first Debian GRUB with
//! `blscfg` (as RHEL's GRUB has), from Debian unstable, cached by
//! `ci/install-deps` (`STRATA_GRUB_CACHE`, `/var/cache/strata/grub`).
//!
//! RHEL ships a prebuilt `grubx64.efi` with every module built in and the
//! prefix `/EFI/redhat` (CentOS: `/EFI/centos`), so that it reads
//! `EFI/redhat/grub.cfg` on the ESP
//! it was loaded from (a stub the disk stage writes, which finds the boot
//! partition). The fixture builds its own the same way with GRUB 2.14's
//! `grub-mkimage`, which needs unstable's glibc: it runs with unstable's
//! loader and libraries from the unpacked cache, never installed. BIOS GRUB
//! is 2.14's i386-pc directory as it is (grub2-pc-modules); the disk stage
//! assembles its core.img.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::debian::{self, DebCache};
use crate::spec::FileSpec;

/// Where `ci/install-deps` puts GRUB 2.14 and what its tools run with.
pub const DEFAULT_GRUB_CACHE: &str = "/var/cache/strata/grub";

/// The packages of the GRUB cache: the tools, both platforms' modules, and
/// the libraries unstable's grub-mkimage needs beyond Debian 12's.
const DEBS: &[&str] = &[
    "grub2-common",
    "grub-efi-amd64-bin",
    "grub-pc-bin",
    "libc6",
    "libdevmapper1.02.1",
];

/// Partition tables, filesystems (iso9660: RHEL's image boots its install
/// and live media too), the kernel loader, search by label, and what
/// generated configs use.
const MODULES: &[&str] = &[
    "part_gpt",
    "part_msdos",
    "ext2",
    "fat",
    "iso9660",
    "linux",
    "normal",
    "configfile",
    "search",
    "search_label",
    "search_fs_uuid",
    "echo",
    "test",
    "gzio",
    "cat",
    "ls",
    "loadenv",
    "serial",
    "terminal",
    "halt",
    "reboot",
    "blocklist",
    "minicmd",
    "true",
    "sleep",
    "regexp",
    "blsuki",
];

/// The fixture's GRUB, made from the cache.
pub struct GrubImages {
    /// `grubx64.efi`.
    pub efi: Vec<u8>,
    /// Debian's grub-pc-bin, at RHEL's paths (the i386-pc directory).
    pub pc_files: Vec<FileSpec>,
    /// Debian package -> version of the cache, part of the fixture's cache
    /// key and recorded in fixture.json.
    pub versions: BTreeMap<String, String>,
}

impl GrubImages {
    /// `vendor`: the EFI vendor directory, which is grubx64.efi's prefix.
    pub fn build(cache: &Path, vendor: &str) -> Result<Self> {
        let debs = DebCache::find_named(cache, DEBS)?;
        let dir = tempfile::tempdir().context("temporary directory for GRUB")?;
        let root = dir.path().join("root");
        debs.unpack_into(&[], &root)?;
        let prefix = format!("/EFI/{vendor}");
        let efi = mkimage(dir.path(), &root, "x86_64-efi", &prefix, &["efi_gop"])?;
        let pc = DebCache {
            debs: debs
                .debs
                .iter()
                .filter(|(name, _)| *name == "grub-pc-bin")
                .map(|(n, p)| (n.clone(), p.clone()))
                .collect(),
        };
        let pc_files = debian::Debian::unpack(&pc)?.take(&["grub-pc-bin"]);
        Ok(Self {
            efi,
            pc_files,
            versions: debs.versions(),
        })
    }
}

/// `grub-mkimage` of the unpacked cache at `root`, run with its own loader
/// and libraries (the rest, e.g. libselinux, the machine's).
fn mkimage(dir: &Path, root: &Path, format: &str, prefix: &str, extra: &[&str]) -> Result<Vec<u8>> {
    let libs: PathBuf = root.join("usr/lib/x86_64-linux-gnu");
    let loader = libs.join("ld-linux-x86-64.so.2");
    let moddir = root.join("usr/lib/grub").join(format);
    let out = dir.join(format!("{format}.img"));
    strata_process::run(
        Command::new(&loader)
            .arg("--library-path")
            .arg(&libs)
            .arg(root.join("usr/bin/grub-mkimage"))
            .arg("-O")
            .arg(format)
            .arg("-d")
            .arg(&moddir)
            .arg("-p")
            .arg(prefix)
            .arg("-o")
            .arg(&out)
            .args(MODULES)
            .args(extra),
    )
    .context("running GRUB 2.14's grub-mkimage from the GRUB cache")?;
    std::fs::read(&out).with_context(|| format!("reading {}", out.display()))
}
