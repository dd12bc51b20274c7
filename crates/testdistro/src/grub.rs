//! The GRUB EFI image of the fixture's grub2-efi-x64 package.
//!
//! RHEL ships a prebuilt `grubx64.efi` with every module built in and the
//! prefix `/EFI/redhat`, so that it reads `EFI/redhat/grub.cfg` on the ESP
//! it was loaded from (a stub the disk stage writes, which finds the boot
//! partition). The fixture builds its own the same way with Debian's
//! `grub-mkimage`. BIOS GRUB is Debian's i386-pc directory as it is
//! (grub2-pc-modules); the disk stage assembles its core.img.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

/// The prefix RHEL builds grubx64.efi with.
const PREFIX: &str = "/EFI/redhat";

/// Partition tables, filesystems, the kernel loader, search by label, and
/// what generated configs use.
const MODULES: &[&str] = &[
    "part_gpt",
    "part_msdos",
    "ext2",
    "fat",
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
];

/// The EFI image (`BOOTX64.EFI`).
pub struct GrubImages {
    pub efi: Vec<u8>,
    /// `grub-mkimage --version`, part of the fixture's cache key.
    pub version: String,
}

impl GrubImages {
    pub fn build() -> Result<Self> {
        let dir = tempfile::tempdir().context("temporary directory for GRUB")?;
        let efi = mkimage(dir.path(), "x86_64-efi", &["efi_gop", "efi_uga"])?;
        let version = strata_process::stdout(Command::new("grub-mkimage").arg("--version"))?
            .trim()
            .to_string();
        Ok(Self { efi, version })
    }
}

fn mkimage(dir: &Path, format: &str, extra: &[&str]) -> Result<Vec<u8>> {
    let moddir = Path::new("/usr/lib/grub").join(format);
    if !moddir.is_dir() {
        anyhow::bail!(
            "{} missing: install the Debian package grub-efi-amd64-bin",
            moddir.display()
        );
    }
    let out = dir.join(format!("{format}.img"));
    strata_process::run(
        Command::new("grub-mkimage")
            .arg("-O")
            .arg(format)
            .arg("-d")
            .arg(&moddir)
            .arg("-p")
            .arg(PREFIX)
            .arg("-o")
            .arg(&out)
            .args(MODULES)
            .args(extra),
    )?;
    std::fs::read(&out).with_context(|| format!("reading {}", out.display()))
}
