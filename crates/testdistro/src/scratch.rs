//! Directories tests work in, and what keeps them from piling up run after
//! run.
//!
//! A result shared by the tests of one process lives in a `static`, which is
//! never dropped: a temporary directory held there outlives the run. A
//! [`SharedDir`] is a fixed directory under the test's target directory
//! instead, emptied when the process first takes it, so each run replaces
//! the last one's. `ostree admin deploy` marks each deployment directory
//! immutable; [`remove_tree`] lifts that before deleting.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory shared by the tests of one process (see the module doc).
pub struct SharedDir(PathBuf);

impl SharedDir {
    /// `dir`, emptied. Call it once per process (from a `OnceLock`), with a
    /// path no other test binary uses: `CARGO_TARGET_TMPDIR` joined with a
    /// name of the binary's own.
    pub fn new(dir: PathBuf) -> SharedDir {
        remove_tree(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        SharedDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// Deletes `path` and everything under it, deployments included (their
/// immutable flag is lifted first). Panics if it cannot.
pub fn remove_tree(path: &Path) {
    if std::fs::symlink_metadata(path).is_err() {
        return;
    }
    if std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    thaw(path);
    std::fs::remove_dir_all(path).unwrap_or_else(|e| panic!("removing {}: {e}", path.display()));
}

/// Lifts the immutable flag from every directory under `path` (ostree sets
/// it on directories only).
fn thaw(path: &Path) {
    // find and chattr (e2fsprogs) are on every machine install-deps
    // prepares; a failure here shows as the removal's own error.
    let _ = Command::new("find")
        .arg(path)
        .args(["-type", "d", "-exec", "chattr", "-i", "{}", "+"])
        .stderr(std::process::Stdio::null())
        .status();
}

/// Removes the sysroot it names when dropped: declare it after the
/// temporary directory holding the sysroot, so that it drops first and the
/// directory's own removal then succeeds.
pub struct DropSysroot(pub PathBuf);

impl Drop for DropSysroot {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.0).is_ok() {
            thaw(&self.0);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
