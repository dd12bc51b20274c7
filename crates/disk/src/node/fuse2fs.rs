//! A filesystem of a node's disk, opened by fuse2fs in the worker's
//! namespace, and taken off with a bounded wait for fuse2fs to write
//! what it holds.
//!
//! What it must not do: leave a fuse2fs behind (it dies with the worker),
//! or wait on one without a limit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use strata_process::own_root;

/// How long fuse2fs may take to write what it holds and end once its
/// filesystem is unmounted.
const FUSE2FS_END: Duration = Duration::from_secs(60);

/// A filesystem of the disk, opened by a fuse2fs process of this
/// namespace (on a directory of the tmpfs, never of the disk).
pub(super) struct Fuse2fs {
    child: Child,
    mountpoint: PathBuf,
}

impl Fuse2fs {
    pub(super) fn mount(
        disk: &Path,
        offset: u64,
        mountpoint: &Path,
        read_only: bool,
    ) -> Result<Fuse2fs> {
        let ro = if read_only { ",ro" } else { "" };
        // Killed with this worker (the worker dies with strata): a fuse2fs
        // left behind would keep the namespace, its mount and the disk.
        let mut child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--", "fuse2fs"])
            .arg(disk)
            .arg(mountpoint)
            .arg("-o")
            .arg(format!("offset={offset}{ro}"))
            // In the foreground: this process waits for it to end, which
            // is when everything is written.
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .context("starting fuse2fs")?;
        let started = Instant::now();
        while !is_mount(mountpoint)? {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "fuse2fs could not open the filesystem at offset {offset} of {} ({status})",
                    disk.display()
                );
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "fuse2fs did not open the filesystem at offset {offset} of {} within 30 s",
                    disk.display()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(Fuse2fs {
            child,
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    /// Takes the filesystems off (in the order given: a mount before the
    /// one it is bound into), then waits for each fuse2fs to write what it
    /// holds and end, at most [`FUSE2FS_END`]; one that does not is
    /// killed.
    pub(super) fn end_all<const N: usize>(mounts: [Fuse2fs; N], disk: &Path) -> Result<()> {
        let mut result = Ok(());
        for m in &mounts {
            if let Err(e) = own_root::detach(&m.mountpoint) {
                result = result.and(Err(anyhow::anyhow!(
                    "unmounting {}: {e}",
                    m.mountpoint.display()
                )));
            }
        }
        let deadline = Instant::now() + FUSE2FS_END;
        for mut m in mounts {
            let status = loop {
                match m.child.try_wait() {
                    Ok(Some(status)) => break Ok(status),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Ok(None) => {
                        let _ = m.child.kill();
                        let _ = m.child.wait();
                        break Err(anyhow::anyhow!(
                            "fuse2fs did not finish writing {} within {} s and was stopped",
                            disk.display(),
                            FUSE2FS_END.as_secs()
                        ));
                    }
                    Err(e) => break Err(anyhow::anyhow!("waiting for fuse2fs: {e}")),
                }
            };
            result = result.and(status.and_then(|s| {
                ensure!(s.success(), "fuse2fs ended with {s} on {}", disk.display());
                Ok(())
            }));
        }
        result
    }
}

/// Whether a filesystem other than its parent's is mounted on `dir`.
fn is_mount(dir: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let stat = |p: &Path| std::fs::metadata(p).with_context(|| format!("{}", p.display()));
    Ok(stat(dir)?.dev() != stat(parent)?.dev())
}
