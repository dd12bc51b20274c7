//! Directories a step is done with are set aside, not removed, until the
//! run ends.
//!
//! Why: on ext4 without a journal (this bench's machines), allocating an
//! inode skips those freed in the last minutes (`recently_deleted`, up to
//! six minutes while their inode table block is dirty), reading inode
//! table blocks as it searches. Removing a composed tree (50,000 files)
//! made the next step's install slower by up to half, so whichever side
//! ran after a removal paid for it. Setting a directory aside is a rename;
//! everything set aside goes with the scratch directory at the end, or
//! earlier when the filesystem runs short of space (said on stderr: the
//! next step's figure may then carry the cost).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use anyhow::{Context, Result};

static ASIDE: OnceLock<PathBuf> = OnceLock::new();
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Below this much free space, what was set aside is removed at once.
const KEEP_FREE: u64 = 20 << 30;

/// Where [`set_aside`] puts directories: under the run's scratch directory.
pub fn init(scratch: &Path) -> Result<()> {
    let dir = scratch.join("set-aside");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _ = ASIDE.set(dir);
    Ok(())
}

/// Moves `path` out of the way, to be removed when the run ends.
pub fn set_aside(path: &Path) -> Result<()> {
    let Some(aside) = ASIDE.get() else {
        return remove(path);
    };
    let to = aside.join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    if std::fs::rename(path, &to).is_err() {
        // Another filesystem: nothing to gain by keeping it.
        return remove(path);
    }
    let free = rustix::fs::statvfs(aside)
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .unwrap_or(u64::MAX);
    if free < KEEP_FREE {
        eprintln!(
            "bench: {} GiB free: removing what was set aside now (the next step may be slower on ext4 without a journal)",
            free >> 30
        );
        for entry in std::fs::read_dir(aside)? {
            remove(&entry?.path())?;
        }
    }
    Ok(())
}

fn remove(path: &Path) -> Result<()> {
    std::fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))
}
