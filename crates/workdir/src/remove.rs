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

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Threads unlinking at once: most of their time is the device's.
const THREADS: usize = 8;

/// Removes `path` and everything below it, like `std::fs::remove_dir_all`
/// (symlinks are removed, never followed), unlinking files from several
/// threads. A missing `path` is not an error.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return std::fs::remove_file(path),
        Ok(_) => {}
    }
    walk(path, &mut files, &mut dirs)?;
    unlink_all(&files)?;
    // Preorder: every directory comes after its parent.
    for dir in dirs.iter().rev() {
        std::fs::remove_dir(dir).map_err(|e| at(dir, e))?;
    }
    Ok(())
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, dirs: &mut Vec<PathBuf>) -> io::Result<()> {
    dirs.push(dir.to_path_buf());
    for entry in std::fs::read_dir(dir).map_err(|e| at(dir, e))? {
        let entry = entry.map_err(|e| at(dir, e))?;
        let path = entry.path();
        if entry.file_type().map_err(|e| at(&path, e))?.is_dir() {
            walk(&path, files, dirs)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

fn unlink_all(files: &[PathBuf]) -> io::Result<()> {
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<io::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..THREADS.min(files.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(file) = files.get(i) else { break };
                if let Err(e) = std::fs::remove_file(file) {
                    failed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(at(file, e));
                    // The others stop at their next file.
                    next.store(files.len(), Ordering::Relaxed);
                    break;
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
        let d = tempfile::tempdir().unwrap();
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
    fn a_file_is_removed_and_a_failure_names_its_path() {
        let d = tempfile::tempdir().unwrap();
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
