//! Runs programs inside the tree being composed: the initramfs generator
//! and the manifest's postprocess scripts.
//!
//! bubblewrap makes the tree the root, with fresh /dev, /proc and /tmp and
//! no network, so scripts see the OS they are building and nothing of the
//! host. Nothing here decides what to run.

use std::path::Path;

use anyhow::{Context, Result};
use strata_process::sandbox::Sandbox;

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

/// The sandbox of a program in the tree.
fn sandbox(root: &Path, source_date_epoch: u64, layout: &Layout) -> Sandbox {
    let s = Sandbox::new(root, source_date_epoch);
    if layout.etc_in_usr_etc {
        s.bind(&root.join("usr/etc"), "/etc")
    } else {
        s
    }
}

/// Runs `argv` with the tree, laid out as `layout` says, as its root, with
/// `env` in its environment.
pub fn run_in_tree(
    root: &Path,
    layout: &Layout,
    source_date_epoch: u64,
    env: &[(&str, &str)],
    argv: &[String],
) -> Result<()> {
    strata_process::require("bwrap")?;
    let mut s = sandbox(root, source_date_epoch, layout);
    for (k, v) in env {
        s = s.setenv(k, v);
    }
    let mut cmd = s.command(argv);
    strata_process::run(&mut cmd)?;
    Ok(())
}

/// Runs a postprocess script with the tree's `/bin/sh`. `index` names it in
/// errors (`postprocess[1]`).
pub fn run_script(root: &Path, source_date_epoch: u64, index: usize, script: &str) -> Result<()> {
    strata_process::require("bwrap")?;
    let argv = ["/bin/sh", "-c", script].map(String::from);
    let mut cmd = sandbox(root, source_date_epoch, &Layout::default()).command(&argv);
    strata_process::run(&mut cmd).with_context(|| format!("postprocess[{index}] failed"))?;
    Ok(())
}
