//! Runs programs inside the tree being composed: the initramfs generator
//! and the manifest's postprocess scripts.
//!
//! bubblewrap makes the tree the root, with fresh /dev, /proc and /tmp and
//! no network, so scripts see the OS they are building and nothing of the
//! host. Nothing here decides what to run.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

/// How the tree is laid out for the program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// The tree already follows the ostree conventions (`/etc` in
    /// `/usr/etc`, an empty directory at `/etc`): its `usr/etc` is mounted
    /// at `/etc`, so the program sees the tree as it was before the
    /// conventions moved it (what compose's programs see).
    pub etc_in_usr_etc: bool,
}

/// Environment every program in the tree gets.
fn base_command(root: &Path, source_date_epoch: u64, layout: &Layout) -> Command {
    let mut cmd = Command::new("bwrap");
    cmd.arg("--bind").arg(root).arg("/");
    if layout.etc_in_usr_etc {
        cmd.arg("--bind").arg(root.join("usr/etc")).arg("/etc");
    }
    cmd.args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
        .args([
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
        ])
        .args([
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/sbin:/usr/bin:/sbin:/bin",
        ])
        .args(["--setenv", "LC_ALL", "C", "--setenv", "HOME", "/"])
        .args(["--setenv", "SOURCE_DATE_EPOCH"])
        .arg(source_date_epoch.to_string())
        .arg("--");
    cmd
}

/// Runs `argv` with the tree, laid out as `layout` says, as its root.
pub fn run_in_tree(
    root: &Path,
    layout: &Layout,
    source_date_epoch: u64,
    argv: &[String],
) -> Result<()> {
    strata_process::require("bwrap")?;
    let mut cmd = base_command(root, source_date_epoch, layout);
    cmd.args(argv);
    strata_process::run(&mut cmd)?;
    Ok(())
}

/// Runs a postprocess script with the tree's `/bin/sh`. `index` names it in
/// errors (`postprocess[1]`).
pub fn run_script(root: &Path, source_date_epoch: u64, index: usize, script: &str) -> Result<()> {
    strata_process::require("bwrap")?;
    let mut cmd = base_command(root, source_date_epoch, &Layout::default());
    cmd.args(["/bin/sh", "-c", script]);
    strata_process::run(&mut cmd).with_context(|| format!("postprocess[{index}] failed"))?;
    Ok(())
}
