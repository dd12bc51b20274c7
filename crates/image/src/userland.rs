//! The image's Debian 12 userland, made by mmdebstrap.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::apt::Mirrors;

/// What strata runs: install-deps' "run and test" and "live media"
/// packages, less the tests' registry; gcc and libc6-dev for the fixture's
/// one C program; qemu-utils for qcow2. No qemu-system-x86, seabios or
/// OVMF: `strata demo` boots nothing.
const PACKAGES: &[&str] = &[
    "ostree",
    "rpm",
    "createrepo-c",
    "dnf",
    "skopeo",
    "umoci",
    "busybox-static",
    "grub-common",
    "grub-efi-amd64-bin",
    "grub-pc-bin",
    "dosfstools",
    "mtools",
    "fdisk",
    "cpio",
    "xz-utils",
    "zstd",
    "kmod",
    "bubblewrap",
    "strace",
    "uidmap",
    "util-linux",
    "mount",
    "gnupg",
    "xorriso",
    "squashfs-tools",
    "db5.3-util",
    "sqlite3",
    "gcc",
    "libc6-dev",
];
/// Taken from bookworm-backports, as install-deps takes them.
const BACKPORTS: &[&str] = &["e2fsprogs", "fuse2fs", "qemu-utils"];

/// Fails naming the Debian package when `tool` is not installed.
pub fn require_tool(tool: &str) -> Result<()> {
    strata_process::require(tool)?;
    Ok(())
}

/// Runs `cmd`, failing with its output's tail.
pub fn run(cmd: &mut Command) -> Result<()> {
    strata_process::run(cmd)?;
    Ok(())
}

/// Runs `cmd` and returns its stdout, trimmed.
pub fn output(cmd: &mut Command) -> Result<String> {
    Ok(strata_process::stdout(cmd)?.trim().to_owned())
}

/// Makes the userland in `rootfs` (anew) and marks it done with `done`.
pub fn build(
    rootfs: &Path,
    done: &Path,
    strata: &Path,
    mirrors: &Mirrors,
    epoch: u64,
) -> Result<()> {
    for old in [rootfs, done] {
        match std::fs::symlink_metadata(old) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(old),
            Ok(_) => std::fs::remove_file(old),
            Err(_) => Ok(()),
        }
        .with_context(|| format!("removing {}", old.display()))?;
    }
    std::fs::create_dir_all(rootfs).with_context(|| format!("creating {}", rootfs.display()))?;
    let mut include: Vec<String> = PACKAGES.iter().map(|p| p.to_string()).collect();
    include.extend(BACKPORTS.iter().map(|p| format!("{p}/bookworm-backports")));
    include.extend(library_packages(strata)?);
    let mut cmd = Command::new("mmdebstrap");
    cmd.args(["--mode=root", "--variant=essential", "--format=directory"])
        // Manuals, translations and documentation stay out, copyright files in.
        .args([
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/info/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        ])
        .arg(format!("--include={}", include.join(",")))
        // The host's resolver and name are not the image's ($1 is the root
        // being built).
        .arg(r#"--customize-hook=rm -f "$1/etc/resolv.conf" "$1/etc/hostname""#)
        .arg("bookworm")
        .arg(rootfs)
        .args(mirrors.sources())
        .env("SOURCE_DATE_EPOCH", epoch.to_string());
    // Its progress is the user's to see: minutes of downloads and unpacking.
    let status = cmd
        .status()
        .with_context(|| format!("running {}", strata_process::display(&cmd)))?;
    if !status.success() {
        bail!("{} failed ({status})", strata_process::display(&cmd));
    }
    // A runtime provides /dev; the device nodes mmdebstrap made stay out.
    let dev = rootfs.join("dev");
    for entry in std::fs::read_dir(&dev).with_context(|| format!("reading {}", dev.display()))? {
        let path = entry?.path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        }
        .with_context(|| format!("removing {}", path.display()))?;
    }
    std::fs::write(done, b"").with_context(|| format!("writing {}", done.display()))
}

/// The Debian packages of the libraries `strata` links (dpkg knows a
/// library by the path its package ships, under /lib or /usr/lib), each
/// from the suite the host has it from.
fn library_packages(strata: &Path) -> Result<Vec<String>> {
    let ldd = output(Command::new("ldd").arg(strata))?;
    let mut out = Vec::new();
    for lib in ldd.lines().filter_map(|l| l.split_whitespace().nth(2)) {
        if !lib.starts_with('/') {
            continue;
        }
        let short = lib.strip_prefix("/usr").unwrap_or(lib);
        let owner = [short.to_owned(), format!("/usr{short}")]
            .iter()
            .find_map(|p| output(Command::new("dpkg").args(["-S", p])).ok())
            .with_context(|| {
                format!(
                    "no Debian package ships {lib}, which {} links",
                    strata.display()
                )
            })?;
        let package = owner.split(':').next().unwrap_or(&owner).to_owned();
        // A library the host has from backports (libext2fs2 with the
        // e2fsprogs install-deps takes) comes from there in the image too:
        // the binary was built against that version.
        let version = output(Command::new("dpkg-query").args(["-W", "-f=${Version}", &package]))?;
        let package = if version.contains("~bpo") {
            format!("{package}/bookworm-backports")
        } else {
            package
        };
        if !out.contains(&package) {
            out.push(package);
        }
    }
    Ok(out)
}
