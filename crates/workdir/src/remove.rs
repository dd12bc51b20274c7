//! Removing a staging tree, many files at once.
//!
//! A file whose blocks are freed costs more than its directory entry: on a
//! filesystem mounted with `discard` (this project's build machines are),
//! ext4 without a journal sends the device a discard for every freed
//! extent and waits for it, one file after the other. A compose after
//! a z-stream frees a whole installed tree (its files were already objects
//! of the repository, so none became one): about 50,000 discards, 6 s one
//! at a time, under 3 s from eight threads. Directories are removed last,
//! deepest first, on the calling thread.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rustix::fs::{openat2, AtFlags, Mode, OFlags, ResolveFlags};

/// Threads unlinking at once: most of their time is the device's.
const THREADS: usize = 8;

/// Removes `path` and everything below it (symlinks are removed, never
/// followed), unlinking files from several threads. Each entry is removed
/// relative to its directory, opened from `path` without following any
/// link, so a directory replaced by a link meanwhile is not gone through.
/// A missing `path` is not an error.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(at(path, e)),
        Ok(m) if !m.is_dir() => return std::fs::remove_file(path).map_err(|e| at(path, e)),
        Ok(_) => {}
    }
    let root = open_top(path)?;
    // Directories relative to `path` in preorder (every one after its
    // parent), and each file as its directory's index and its name.
    let mut dirs = vec![PathBuf::new()];
    let mut files = Vec::new();
    let mut i = 0;
    while i < dirs.len() {
        let rel = dirs[i].clone();
        let dir = path.join(&rel);
        for entry in std::fs::read_dir(&dir).map_err(|e| at(&dir, e))? {
            let entry = entry.map_err(|e| at(&dir, e))?;
            if entry
                .file_type()
                .map_err(|e| at(&entry.path(), e))?
                .is_dir()
            {
                dirs.push(rel.join(entry.file_name()));
            } else {
                files.push((i, entry.file_name()));
            }
        }
        i += 1;
    }
    unlink_all(path, &root, &dirs, &files)?;
    for rel in dirs.iter().skip(1).rev() {
        let parent = open_dir(path, &root, rel.parent().unwrap_or(Path::new("")))?;
        let name = rel.file_name().unwrap_or_default();
        rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR)
            .map_err(|e| at(&path.join(rel), e.into()))?;
    }
    std::fs::remove_dir(path).map_err(|e| at(path, e))
}

/// `top` itself, not followed if it is a link.
fn open_top(top: &Path) -> io::Result<OwnedFd> {
    rustix::fs::open(top, DIR_FLAGS, Mode::empty()).map_err(|e| at(top, e.into()))
}

/// The directory `rel` below `root` (`root` itself when empty), no link
/// followed on the way. `top` is `root`'s path, for errors.
fn open_dir(top: &Path, root: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    openat2(
        root,
        rel,
        DIR_FLAGS,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH,
    )
    .map_err(|e| at(&top.join(rel), e.into()))
}

const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn unlink_all(
    top: &Path,
    root: &OwnedFd,
    dirs: &[PathBuf],
    files: &[(usize, OsString)],
) -> io::Result<()> {
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<io::Error>> = Mutex::new(None);
    // `open`: a worker's last directory other than the top, kept open
    // (a directory's files are consecutive in `files`).
    let unlink = |open: &mut Option<(usize, OwnedFd)>, dir: usize, name: &OsString| {
        if dir != 0 && open.as_ref().map(|(d, _)| *d) != Some(dir) {
            *open = Some((dir, open_dir(top, root, &dirs[dir])?));
        }
        let parent = match open {
            Some((d, fd)) if *d == dir => &*fd,
            _ => root,
        };
        rustix::fs::unlinkat(parent, name, AtFlags::empty())
            .map_err(|e| at(&top.join(&dirs[dir]).join(name), e.into()))
    };
    std::thread::scope(|s| {
        for _ in 0..THREADS.min(files.len()) {
            s.spawn(|| {
                let mut open = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((dir, name)) = files.get(i) else {
                        break;
                    };
                    if let Err(e) = unlink(&mut open, *dir, name) {
                        failed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                        // The others stop at their next file.
                        next.store(files.len(), Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("removing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn removes_a_tree_and_never_follows_its_links() {
        let d = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("kept"), "x").unwrap();
        let t = d.path().join("tree");
        for i in 0..40 {
            let sub = t.join(format!("d{i}/e"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("f"), "data").unwrap();
            std::fs::write(t.join(format!("d{i}/g")), "").unwrap();
        }
        std::fs::create_dir(t.join("empty")).unwrap();
        symlink(&outside, t.join("link-to-dir")).unwrap();
        symlink(outside.join("kept"), t.join("d0/link-to-file")).unwrap();
        symlink("nowhere", t.join("dangling")).unwrap();
        remove_tree(&t).unwrap();
        assert!(!t.exists());
        assert!(outside.join("kept").exists());
        // Gone already: nothing to do.
        remove_tree(&t).unwrap();
    }

    #[test]
    fn a_directory_swapped_for_a_link_after_the_walk_is_not_gone_through() {
        let d = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir_all(outside.join("e")).unwrap();
        std::fs::write(outside.join("e/f"), "kept").unwrap();
        let t = d.path().join("tree");
        std::fs::create_dir_all(t.join("d0/e")).unwrap();
        std::fs::write(t.join("d0/e/f"), "x").unwrap();
        // What the walk found; then d0 becomes a link to outside.
        let dirs = [PathBuf::new(), PathBuf::from("d0"), PathBuf::from("d0/e")];
        let files = [(2, OsString::from("f"))];
        std::fs::rename(t.join("d0"), d.path().join("moved")).unwrap();
        symlink(&outside, t.join("d0")).unwrap();
        let root = open_top(&t).unwrap();
        let e = unlink_all(&t, &root, &dirs, &files).unwrap_err();
        assert!(e.to_string().contains("d0/e"), "{e}");
        assert_eq!(std::fs::read(outside.join("e/f")).unwrap(), b"kept");
    }

    #[test]
    fn a_file_is_removed_and_a_failure_names_its_path() {
        let d = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        remove_tree(&f).unwrap();
        assert!(!f.exists());

        // An entry that cannot be removed fails the removal, naming it:
        // an immutable file as root (permissions do not stop root), a
        // read-only directory's entry otherwise.
        let t = d.path().join("stuck");
        std::fs::create_dir_all(t.join("sub")).unwrap();
        let stuck = t.join("sub/f");
        std::fs::write(&stuck, "x").unwrap();
        let root = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap();
        let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode;
        let chattr = |flag: &str| {
            let ok = std::process::Command::new("chattr")
                .arg(flag)
                .arg(&stuck)
                .status()
                .expect("running chattr (Debian package e2fsprogs)")
                .success();
            assert!(ok, "chattr {flag} {}", stuck.display());
        };
        if root {
            chattr("+i");
        } else {
            std::fs::set_permissions(t.join("sub"), mode(0o555)).unwrap();
        }
        let e = remove_tree(&t).unwrap_err();
        assert!(e.to_string().contains("sub/f"), "{e}");
        if root {
            chattr("-i");
        } else {
            std::fs::set_permissions(t.join("sub"), mode(0o755)).unwrap();
        }
    }
}
