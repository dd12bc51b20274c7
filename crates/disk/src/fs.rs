//! Filesystems written into a disk file at an offset, without loop devices,
//! mounts or root: FAT with `mkfs.vfat --offset` and mtools, what an ext4
//! filesystem is ([`Ext4`]; the `ext4` module writes it), and the tree
//! walks they need (clamped times, sizes, copies).
//!
//! An ext4 filesystem gets its owners from the source tree as the writer
//! sees them: it runs in the build's user namespace ([`crate::userns`]),
//! where the user running strata is root and the image's system users are
//! themselves.
//! Nothing here decides where partitions are; [`crate::layout`] does.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// Gives `path` (not following a symlink) the access and modification
/// times `meta` has: what a change inside a directory moved, put back.
pub fn set_times(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let times = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: meta.atime(),
            tv_nsec: meta.atime_nsec(),
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: meta.mtime(),
            tv_nsec: meta.mtime_nsec(),
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .with_context(|| format!("setting the times of {}", path.display()))
}

/// The access and modification times a file of `meta` has once clamped
/// to `epoch`: both the older of `epoch` and its mtime when either is
/// newer than `epoch`, else its own.
pub(crate) fn clamped(meta: &std::fs::Metadata, epoch: i64) -> (i64, i64) {
    if meta.mtime() > epoch || meta.atime() > epoch {
        let t = epoch.min(meta.mtime());
        (t, t)
    } else {
        (meta.atime(), meta.mtime())
    }
}

/// Sets every mtime/atime newer than `epoch` under `root` (root included,
/// symlinks themselves) to `epoch` ([`clamped`]).
pub fn clamp_times(root: &Path, epoch: i64) -> Result<()> {
    walk(root, &mut |path, meta| {
        let (atime, mtime) = clamped(meta, epoch);
        if (atime, mtime) != (meta.atime(), meta.mtime()) {
            let t = rustix::fs::Timespec {
                tv_sec: mtime,
                tv_nsec: 0,
            };
            let times = rustix::fs::Timestamps {
                last_access: t,
                last_modification: t,
            };
            rustix::fs::utimensat(
                rustix::fs::CWD,
                path,
                &times,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .with_context(|| format!("setting the times of {}", path.display()))?;
        }
        Ok(())
    })
}

/// Bytes the regular files under `root` occupy, hard links counted once.
pub fn content_size(root: &Path) -> Result<u64> {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    walk(root, &mut |_, meta| {
        if meta.is_file() && (meta.nlink() == 1 || seen.insert((meta.dev(), meta.ino()))) {
            // Rounded to 4 KiB blocks, as ext4 stores them.
            total += meta.len().div_ceil(4096) * 4096;
        } else if meta.is_dir() {
            total += 4096;
        }
        Ok(())
    })?;
    Ok(total)
}

/// Opens `rel` below `root` as the image's own tree resolves it: every
/// symlink on the way, absolute ones too, resolves inside `root`, so an
/// image cannot make strata read the build host's files.
pub fn open_in_root(root: &Path, rel: &str) -> Result<std::fs::File> {
    use strata_process::in_root::{OFlags, Root};
    Root::open(root)
        .with_context(|| format!("opening {}", root.display()))?
        .open_file(rel, OFlags::RDONLY)
        .with_context(|| format!("opening /{rel} of {}", root.display()))
}

/// The content of `rel` below `root`, resolved as [`open_in_root`] does.
pub fn read_in_root(root: &Path, rel: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    open_in_root(root, rel)?
        .read_to_end(&mut buf)
        .with_context(|| format!("reading /{rel} of {}", root.display()))?;
    Ok(buf)
}

/// Copies the tree `rel` of the image rooted at `root` to `to`, the path
/// resolved inside `root` ([`open_in_root`]); below it, symlinks are
/// copied as links, never followed.
pub fn copy_tree_in_root(root: &Path, rel: &str, to: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let dir = open_in_root(root, rel)?;
    // Where the kernel found it, inside `root`.
    let fd = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let from = std::fs::read_link(&fd).with_context(|| format!("resolving /{rel}"))?;
    copy_tree(&from, to)
}

/// Copies the tree `from` to `to` (files, directories, symlinks; modes kept).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let meta =
        std::fs::symlink_metadata(from).with_context(|| format!("reading {}", from.display()))?;
    if meta.file_type().is_symlink() {
        let target =
            std::fs::read_link(from).with_context(|| format!("reading {}", from.display()))?;
        std::os::unix::fs::symlink(&target, to)
            .with_context(|| format!("creating {}", to.display()))?;
    } else if meta.is_dir() {
        std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
        for entry in
            std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))?
        {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::set_permissions(to, meta.permissions())?;
    } else {
        std::fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

/// Makes every directory under `root` writable by its owner, so that a
/// deployment (which has read-only directories) can be removed without root.
pub fn make_removable(root: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    walk(root, &mut |path, meta| {
        if meta.is_dir() && meta.mode() & 0o700 != 0o700 {
            std::fs::set_permissions(
                path,
                std::fs::Permissions::from_mode((meta.mode() | 0o700) & 0o7777),
            )
            .with_context(|| format!("chmod {}", path.display()))?;
        }
        Ok(())
    })
}

/// Visits `root` and everything below it, parents before children.
fn walk(root: &Path, f: &mut dyn FnMut(&Path, &std::fs::Metadata) -> Result<()>) -> Result<()> {
    let meta =
        std::fs::symlink_metadata(root).with_context(|| format!("reading {}", root.display()))?;
    f(root, &meta)?;
    if meta.is_dir() {
        // Read after the visit: the callback may have made it readable.
        let mut entries: Vec<_> = std::fs::read_dir(root)
            .with_context(|| format!("reading {}", root.display()))?
            .collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            walk(&entry.path(), f)?;
        }
    }
    Ok(())
}

/// Where and how to write one ext4 filesystem.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ext4 {
    pub disk: PathBuf,
    pub offset: u64,
    pub size: u64,
    pub label: String,
    pub uuid: String,
    pub source: PathBuf,
    pub epoch: i64,
}

/// The ESP: FAT32 at `offset`, then `source`'s content copied in with mtools.
pub fn mkfs_esp(
    disk: &Path,
    offset: u64,
    size: u64,
    sector_size: u64,
    volid: &str,
    source: &Path,
    epoch: i64,
) -> Result<()> {
    mkfs_fat(&Fat {
        disk,
        offset,
        size,
        sector_size,
        // FAT32 needs 65525 clusters: 512-byte clusters on 512-byte
        // sectors; FAT16 on 4K sectors (127 MiB is too small for FAT32).
        bits: if sector_size == 512 { 32 } else { 16 },
        volid,
        source,
        epoch,
    })
    .context("creating the EFI system partition")
}

/// A FAT filesystem filling a file of its own, labelled EFI-SYSTEM, with
/// `source`'s content: the EFI boot image of a CD. FAT16 (at least 2 MiB)
/// up to 32 MiB, FAT32 above.
pub fn fat_image(path: &Path, size: u64, volid: &str, source: &Path, epoch: i64) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    file.set_len(size)?;
    drop(file);
    mkfs_fat(&Fat {
        disk: path,
        offset: 0,
        size,
        sector_size: 512,
        bits: if size <= 32 << 20 { 16 } else { 32 },
        volid,
        source,
        epoch,
    })
    .with_context(|| format!("creating the FAT image {}", path.display()))
}

struct Fat<'a> {
    disk: &'a Path,
    offset: u64,
    size: u64,
    sector_size: u64,
    bits: u8,
    volid: &'a str,
    source: &'a Path,
    epoch: i64,
}

fn mkfs_fat(fat: &Fat) -> Result<()> {
    strata_process::require("mkfs.vfat")?;
    strata_process::require("mcopy")?;
    let (disk, offset, sector_size) = (fat.disk, fat.offset, fat.sector_size);
    strata_process::run(
        Command::new("mkfs.vfat")
            .args(["-F", &fat.bits.to_string()])
            .args(["-s", "1", "-n", "EFI-SYSTEM"])
            // --invariant first: it would override the volume id.
            .args(["--invariant", "-i", fat.volid])
            .arg("-S")
            .arg(sector_size.to_string())
            .arg(format!("--offset={}", offset / sector_size))
            .arg("-h")
            .arg((offset / sector_size).to_string())
            .arg(disk)
            .arg((fat.size / 1024).to_string())
            .env("SOURCE_DATE_EPOCH", fat.epoch.to_string()),
    )?;
    let mut entries: Vec<_> = std::fs::read_dir(fat.source)
        .with_context(|| format!("reading {}", fat.source.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        strata_process::run(
            Command::new("mcopy")
                .args(["-s", "-p", "-m", "-Q", "-i"])
                .arg(format!("{}@@{offset}", disk.display()))
                .arg(entry.path())
                .arg("::/")
                .env("SOURCE_DATE_EPOCH", fat.epoch.to_string())
                .env("MTOOLS_SKIP_CHECK", "1"),
        )
        .context("copying files in")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_and_size() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::fs::write(t.path().join("d/f"), vec![1u8; 5000]).unwrap();
        std::fs::hard_link(t.path().join("d/f"), t.path().join("g")).unwrap();
        std::os::unix::fs::symlink("d/f", t.path().join("l")).unwrap();
        clamp_times(t.path(), 1000).unwrap();
        for p in ["", "d", "d/f", "g"] {
            assert_eq!(
                std::fs::metadata(t.path().join(p)).unwrap().mtime(),
                1000,
                "{p}"
            );
        }
        assert_eq!(
            std::fs::symlink_metadata(t.path().join("l"))
                .unwrap()
                .mtime(),
            1000
        );
        // two directories + one 5000-byte file (linked twice) in 4 KiB blocks
        assert_eq!(content_size(t.path()).unwrap(), 2 * 4096 + 8192);
    }

    /// os-release and the bootloader files were read through the build
    /// host's view of the image's symlinks: an absolute or `../` link
    /// reached the host's files. Now they resolve inside the image.
    #[test]
    fn symlinks_of_the_image_resolve_inside_it() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/passwd"), "inside\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("usr/lib/abs")).unwrap();
        std::os::unix::fs::symlink("../../../../../../etc/passwd", root.join("usr/lib/up"))
            .unwrap();
        for rel in ["usr/lib/abs", "usr/lib/up"] {
            assert_eq!(read_in_root(&root, rel).unwrap(), b"inside\n", "{rel}");
        }
        std::fs::create_dir_all(root.join("boot/efi/EFI/BOOT")).unwrap();
        std::fs::write(root.join("boot/efi/EFI/BOOT/x.efi"), "efi").unwrap();
        std::os::unix::fs::symlink("/boot/efi/EFI", root.join("usr/lib/efi")).unwrap();
        let out = t.path().join("out/EFI");
        copy_tree_in_root(&root, "usr/lib/efi", &out).unwrap();
        assert_eq!(std::fs::read(out.join("BOOT/x.efi")).unwrap(), b"efi");
        assert!(read_in_root(&root, "usr/lib/missing").is_err());
    }
}
