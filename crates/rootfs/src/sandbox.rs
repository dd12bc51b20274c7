//! Runs programs inside the tree being composed: the initramfs generator
//! and the manifest's postprocess scripts.
//!
//! bubblewrap makes the tree the root, with fresh /dev, /proc and /tmp and
//! no network, so scripts see the OS they are building and nothing of the
//! host. Nothing here decides what to run.

use std::fs;
use std::path::{Component, Path, PathBuf};

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
    /// A file the program sees at `/usr/lib/os-release` instead of the
    /// tree's (read only).
    pub os_release: Option<PathBuf>,
}

impl Layout {
    /// Where the file the program sees at `path` (absolute, as inside the
    /// sandbox) is on the host: below `root` (the tree) or a file mounted
    /// in. `None` for what the sandbox makes itself (`/dev`, `/proc`,
    /// `/tmp`) and for paths that are not plain absolute ones.
    pub fn host_path(&self, root: &Path, path: &str) -> Option<PathBuf> {
        let rel = path.strip_prefix('/')?;
        let plain = Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !plain || rel.is_empty() {
            return None;
        }
        let top = rel.split('/').next().unwrap_or_default();
        if matches!(top, "dev" | "proc" | "tmp") {
            return None;
        }
        if rel == "usr/lib/os-release" {
            if let Some(file) = &self.os_release {
                return Some(file.clone());
            }
        }
        if self.etc_in_usr_etc && top == "etc" {
            return Some(root.join("usr").join(rel));
        }
        Some(root.join(rel))
    }
}

/// `host`, a path under `root`, opened read-only as a program with `root`
/// as `/` would find it: links resolved inside the tree; a FIFO does not
/// block.
pub(crate) fn open_input(root: &Path, host: &Path) -> std::io::Result<fs::File> {
    use strata_process::in_root::{OFlags, Root};
    let Ok(rel) = host.strip_prefix(root) else {
        return fs::File::open(host);
    };
    Root::open(root)?.open_file(rel, OFlags::RDONLY | OFlags::NONBLOCK)
}

/// The sandbox of a program in the tree, with `env` in its environment.
pub(crate) fn sandbox(
    root: &Path,
    source_date_epoch: u64,
    layout: &Layout,
    env: &[(&str, &str)],
) -> Sandbox {
    let mut s = Sandbox::new(root, source_date_epoch);
    for (k, v) in env {
        s = s.setenv(k, v);
    }
    if layout.etc_in_usr_etc {
        s = s.bind(&root.join("usr/etc"), "/etc");
    }
    if let Some(file) = &layout.os_release {
        s = s.ro_bind(file, "/usr/lib/os-release");
    }
    s
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
    let mut cmd = sandbox(root, source_date_epoch, layout, env).command(argv);
    strata_process::run(&mut cmd)?;
    Ok(())
}

/// Runs a postprocess script with the tree's `/bin/sh`. `index` names it in
/// errors (`postprocess[1]`).
pub fn run_script(root: &Path, source_date_epoch: u64, index: usize, script: &str) -> Result<()> {
    strata_process::require("bwrap")?;
    let argv = ["/bin/sh", "-c", script].map(String::from);
    let mut cmd = sandbox(root, source_date_epoch, &Layout::default(), &[]).command(&argv);
    strata_process::run(&mut cmd).with_context(|| format!("postprocess[{index}] failed"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_in_the_sandbox_map_to_the_host() {
        let root = Path::new("/w/root");
        let mut layout = Layout::default();
        let table = [
            ("/usr/lib64/libc.so.6", Some("/w/root/usr/lib64/libc.so.6")),
            ("/etc/passwd", Some("/w/root/etc/passwd")),
            ("/usr/lib/os-release", Some("/w/root/usr/lib/os-release")),
            ("/proc/self/mountinfo", None),
            ("/dev/null", None),
            ("/tmp/x", None),
            ("/usr/../etc/shadow", None),
            ("relative", None),
            ("/", None),
        ];
        for (path, want) in table {
            assert_eq!(
                layout.host_path(root, path),
                want.map(PathBuf::from),
                "{path}"
            );
        }
        layout.etc_in_usr_etc = true;
        layout.os_release = Some(PathBuf::from("/w/os-release"));
        assert_eq!(
            layout.host_path(root, "/etc/passwd"),
            Some(PathBuf::from("/w/root/usr/etc/passwd"))
        );
        assert_eq!(
            layout.host_path(root, "/usr/lib/os-release"),
            Some(PathBuf::from("/w/os-release"))
        );
    }
}
