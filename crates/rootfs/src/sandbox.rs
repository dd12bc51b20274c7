//! Runs programs inside the tree being composed: the initramfs generator
//! and the manifest's postprocess scripts.
//!
//! bubblewrap makes the tree the root, with fresh /dev, /proc and /tmp and
//! no network, so scripts see the OS they are building and nothing of the
//! host. Nothing here decides what to run.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

/// Environment every program in the tree gets.
fn base_command(root: &Path, source_date_epoch: u64) -> Command {
    let mut cmd = Command::new("bwrap");
    cmd.arg("--bind")
        .arg(root)
        .arg("/")
        .args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
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

/// Runs `argv` with the tree as its root.
pub fn run_in_tree(root: &Path, source_date_epoch: u64, argv: &[String]) -> Result<()> {
    strata_process::require("bwrap")?;
    let mut cmd = base_command(root, source_date_epoch);
    cmd.args(argv);
    strata_process::run(&mut cmd)?;
    Ok(())
}

/// Runs a postprocess script with the tree's `/bin/sh`. `index` names it in
/// errors (`postprocess[1]`).
pub fn run_script(root: &Path, source_date_epoch: u64, index: usize, script: &str) -> Result<()> {
    strata_process::require("bwrap")?;
    let mut cmd = base_command(root, source_date_epoch);
    cmd.args(["/bin/sh", "-c", script]);
    strata_process::run(&mut cmd).with_context(|| format!("postprocess[{index}] failed"))?;
    Ok(())
}
