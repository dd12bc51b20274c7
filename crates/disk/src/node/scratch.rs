//! The scratch directory a rollback keeps beside its disk (the worker's
//! job files, its mountpoint), and the removal of those killed runs left.
//!
//! What it must not do: remove a directory a live run holds, or follow a
//! link of the scratch name.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// The prefix of the scratch directories [`super::rollback`] makes beside the
/// disk.
const SCRATCH_PREFIX: &str = ".strata-node-";

/// How many times a scratch directory is made when other runs' cleaning
/// keeps taking it.
const SCRATCH_ATTEMPTS: usize = 20;

/// A scratch directory beside a disk (the worker's job files, its
/// mountpoint), locked (`flock`) for as long as this run holds it: one
/// left by a killed run is unlocked, and the next run beside the same
/// disk removes it.
pub(super) struct Scratch {
    dir: tempfile::TempDir,
    _lock: std::fs::File,
}

impl Scratch {
    pub(super) fn beside(disk: &Path) -> Result<Scratch> {
        let parent = disk.parent().unwrap_or(Path::new("."));
        remove_stale_scratch(parent);
        // A run removing stale ones could take this one between its
        // creation and its lock (it holds the lock while it removes the
        // directory, then the directory is gone): then it is made again.
        for _ in 0..SCRATCH_ATTEMPTS {
            let dir = tempfile::Builder::new()
                .prefix(SCRATCH_PREFIX)
                .tempdir_in(parent)
                .with_context(|| format!("creating a scratch directory in {}", parent.display()))?;
            let lock = match std::fs::File::open(dir.path()) {
                Ok(lock) => lock,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("opening {}", dir.path().display()))
                }
            };
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("locking {}", dir.path().display()))
                }
            }
            if dir.path().is_dir() {
                return Ok(Scratch { dir, _lock: lock });
            }
        }
        bail!(
            "could not keep a scratch directory in {}: another run removed it",
            parent.display()
        )
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the scratch directories killed runs left in `dir`: those no
/// run holds locked. A symlink of that name is left alone.
fn remove_stale_scratch(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_scratch = name.to_str().is_some_and(|n| n.starts_with(SCRATCH_PREFIX));
        if !is_scratch || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let Ok(fd) = rustix::fs::open(
            &path,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            continue;
        };
        if rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            tracing::debug!("removing {}, left by a run that was killed", path.display());
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::warn!("removing {}: {e}", path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Another run removing stale scratch directories may lock a new one
    /// for a moment between its creation and its lock, or remove it:
    /// the run making it makes another, and does not fail.
    #[test]
    fn a_scratch_made_while_other_runs_clean_stale_ones_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("disk.raw");
        std::fs::write(&disk, b"").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let cleaners: Vec<_> = (0..3)
            .map(|_| {
                let (stop, dir) = (stop.clone(), dir.path().to_path_buf());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        remove_stale_scratch(&dir);
                    }
                })
            })
            .collect();
        for _ in 0..500 {
            let scratch = Scratch::beside(&disk).unwrap();
            assert!(scratch.path().is_dir());
            // Held, it outlives the cleaners' passes.
            std::thread::yield_now();
            assert!(scratch.path().is_dir());
        }
        stop.store(true, Ordering::Relaxed);
        for c in cleaners {
            c.join().unwrap();
        }
    }
}
