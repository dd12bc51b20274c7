//! GRUB images for the fixture's grub2-efi-x64 and grub2-pc packages.
//!
//! RHEL ships prebuilt GRUB binaries in its packages; the fixture builds its
//! own with Debian's `grub-mkimage`, with every module the boot needs built
//! in and an embedded configuration that finds the partition labelled `boot`
//! and reads `/grub2/grub.cfg` there (CoreOS keeps its GRUB configuration on
//! the boot partition). The disk stage installs these images; it never needs
//! GRUB tools of its own.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

/// The configuration embedded in both images.
pub const EARLY_CONFIG: &str = "\
search --no-floppy --label boot --set root
set prefix=($root)/grub2
configfile ($root)/grub2/grub.cfg
";

/// Modules common to both platforms: partition tables, filesystems, the
/// kernel loader, search by label, and what generated configs use.
const COMMON_MODULES: &[&str] = &[
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

/// The EFI (`BOOTX64.EFI`) and BIOS (`boot.img`, `core.img`) images.
pub struct GrubImages {
    pub efi: Vec<u8>,
    pub boot_img: Vec<u8>,
    pub core_img: Vec<u8>,
    /// `grub-mkimage --version`, part of the fixture's cache key.
    pub version: String,
}

impl GrubImages {
    pub fn build() -> Result<Self> {
        let dir = tempfile::tempdir().context("temporary directory for GRUB")?;
        let config = dir.path().join("early.cfg");
        std::fs::write(&config, EARLY_CONFIG)?;
        let efi = mkimage(dir.path(), &config, "x86_64-efi", &["efi_gop", "efi_uga"])?;
        let core_img = mkimage(dir.path(), &config, "i386-pc", &["biosdisk"])?;
        let boot_img = std::fs::read("/usr/lib/grub/i386-pc/boot.img").context(
            "reading /usr/lib/grub/i386-pc/boot.img: install the Debian package grub-pc-bin",
        )?;
        let version = strata_process::stdout(Command::new("grub-mkimage").arg("--version"))?
            .trim()
            .to_string();
        Ok(Self {
            efi,
            boot_img,
            core_img,
            version,
        })
    }
}

fn mkimage(dir: &Path, config: &Path, format: &str, extra: &[&str]) -> Result<Vec<u8>> {
    let moddir = Path::new("/usr/lib/grub").join(format);
    if !moddir.is_dir() {
        let package = if format == "i386-pc" {
            "grub-pc-bin"
        } else {
            "grub-efi-amd64-bin"
        };
        anyhow::bail!(
            "{} missing: install the Debian package {package}",
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
            .arg("-c")
            .arg(config)
            .arg("-p")
            .arg("/grub2")
            .arg("-o")
            .arg(&out)
            .args(COMMON_MODULES)
            .args(extra),
    )?;
    std::fs::read(&out).with_context(|| format!("reading {}", out.display()))
}
