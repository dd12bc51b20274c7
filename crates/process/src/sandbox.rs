//! A program run with a tree as its root: bubblewrap makes the tree `/`,
//! with fresh /dev, /proc and /tmp, no network, and a fixed environment
//! (`SOURCE_DATE_EPOCH` among it), so the program sees the OS it runs in
//! and nothing of the host. The callers decide what runs and what else is
//! mounted.

use std::path::Path;
use std::process::Command;

/// A bubblewrap command line being built: the tree, then further mounts
/// in order, then [`Sandbox::command`].
#[derive(Debug)]
pub struct Sandbox {
    mounts: Vec<std::ffi::OsString>,
    env: Vec<(String, String)>,
    source_date_epoch: u64,
}

impl Sandbox {
    /// `root` as `/`, read-write.
    pub fn new(root: &Path, source_date_epoch: u64) -> Self {
        let mut s = Self {
            mounts: Vec::new(),
            env: Vec::new(),
            source_date_epoch,
        };
        s.push(&["--bind"]);
        s.mounts.push(root.into());
        s.push(&["/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]);
        s
    }

    /// `from` (a host path) at `to` (in the tree), read-write.
    pub fn bind(mut self, from: &Path, to: &str) -> Self {
        self.push(&["--bind"]);
        self.mounts.push(from.into());
        self.push(&[to]);
        self
    }

    /// `from` at `to`, read-only.
    pub fn ro_bind(mut self, from: &Path, to: &str) -> Self {
        self.push(&["--ro-bind"]);
        self.mounts.push(from.into());
        self.push(&[to]);
        self
    }

    /// An empty tmpfs at `at`, hiding what the tree has there.
    pub fn tmpfs(mut self, at: &str) -> Self {
        self.push(&["--tmpfs", at]);
        self
    }

    /// One more variable in the program's environment.
    pub fn setenv(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// bubblewrap writes what it knows of the sandbox (JSON, with
    /// `child-pid`, the process whose root is the tree) to the inherited
    /// descriptor `fd`, then closes it.
    pub fn info_fd(mut self, fd: i32) -> Self {
        self.push(&["--info-fd", &fd.to_string()]);
        self
    }

    fn push(&mut self, args: &[&str]) {
        self.mounts.extend(args.iter().map(Into::into));
    }

    /// The command running `argv` in the sandbox.
    pub fn command(self, argv: &[String]) -> Command {
        let mut cmd = Command::new("bwrap");
        cmd.args(&self.mounts)
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
            .arg(self.source_date_epoch.to_string());
        for (name, value) in &self.env {
            cmd.args(["--setenv", name, value]);
        }
        cmd.arg("--").args(argv);
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_come_in_order_before_the_program() {
        let cmd = Sandbox::new(Path::new("/t"), 7)
            .tmpfs("/run")
            .ro_bind(Path::new("/m"), "/run/m")
            .command(&["/usr/bin/true".to_string()]);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |s: &str| args.iter().position(|a| a == s).unwrap();
        assert_eq!(&args[..3], ["--bind", "/t", "/"]);
        assert!(at("--tmpfs") < at("--ro-bind"));
        assert!(at("--ro-bind") < at("--"));
        assert_eq!(args.last().unwrap(), "/usr/bin/true");
        assert_eq!(args[at("SOURCE_DATE_EPOCH") + 1], "7");
    }
}
