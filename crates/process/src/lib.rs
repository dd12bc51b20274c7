//! Runs external commands for every strata crate.
//!
//! strata drives real tools (createrepo_c, skopeo, mkfs.ext4, qemu, …). Every
//! such call goes through [`run`] so that the command line is logged at debug
//! level, stderr is captured, and a failure carries the command, its exit
//! status and the tail of its stderr. A missing program is reported with the
//! Debian package that provides it, because the fix is always "install X".
//!
//! This crate must not interpret any tool's output: callers do that.
//!
//! It also holds the byte formats more than one crate writes: newc cpio
//! ([`cpio`]) and deterministic parallel gzip ([`gzip`]); and the one
//! opener of a file a user names ([`regular`]), the one escaper of
//! untrusted text in errors ([`text`]) and the one mount table reader
//! ([`mountinfo`]).

pub mod cpio;
pub mod direct;
pub mod fanotify;
pub mod fds;
pub mod gzip;
pub mod in_root;
pub mod mountinfo;
pub mod own_root;
pub mod progress;
pub mod regular;
pub mod sandbox;
pub mod text;
pub mod userns;
pub mod worker;
pub mod xattr;

pub use mountinfo::{filesystem_in, filesystem_of};

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// How many bytes of stderr an error keeps.
const STDERR_TAIL: usize = 2000;

/// Programs strata runs, with the Debian package that ships each one.
/// `ci/install-deps` installs all of them.
const TOOL_PACKAGES: &[(&str, &str)] = &[
    ("createrepo_c", "createrepo-c"),
    ("rpm", "rpm"),
    ("rpmkeys", "rpm"),
    ("rpmdb", "rpm"),
    ("db5.3_dump", "db5.3-util"),
    ("db5.3_verify", "db5.3-util"),
    ("sqlite3", "sqlite3"),
    ("dnf", "dnf"),
    ("ostree", "ostree"),
    ("skopeo", "skopeo"),
    ("umoci", "umoci"),
    ("registry", "docker-registry"),
    ("docker-registry", "docker-registry"),
    ("busybox", "busybox-static"),
    ("grub-mkimage", "grub-common"),
    ("mkfs.ext4", "e2fsprogs"),
    ("fsck.ext4", "e2fsprogs"),
    ("debugfs", "e2fsprogs"),
    ("fuse2fs", "fuse2fs (from bookworm-backports)"),
    ("mkfs.vfat", "dosfstools"),
    ("fsck.vfat", "dosfstools"),
    ("mcopy", "mtools"),
    ("mmd", "mtools"),
    ("xorriso", "xorriso"),
    ("mksquashfs", "squashfs-tools"),
    ("unsquashfs", "squashfs-tools"),
    ("sfdisk", "fdisk"),
    ("qemu-img", "qemu-utils"),
    (
        "qemu-system-x86_64",
        "qemu-system-x86 (from bookworm-backports)",
    ),
    ("depmod", "kmod"),
    ("modinfo", "kmod"),
    ("dpkg-deb", "dpkg"),
    ("mmdebstrap", "mmdebstrap"),
    ("objcopy", "binutils"),
    ("cc", "build-essential"),
    ("bwrap", "bubblewrap"),
    ("cpio", "cpio"),
    ("strace", "strace"),
    ("unshare", "util-linux"),
    ("setpriv", "util-linux"),
];

/// A command that could not run or did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program is not installed.
    #[error("`{program}` not found: install the Debian package {package} (ci/install-deps does)")]
    Missing { program: String, package: String },
    /// The program could not be started for another reason.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    /// The program ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}){}", stderr_suffix(.stderr))]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    /// An ordinary user lacks what a user namespace for the work needs.
    #[error("{what} as an ordinary user needs a user namespace holding the image's ids: {advice}")]
    Unprivileged { what: String, advice: String },
    /// no_new_privs is set on this process: the root of a user namespace
    /// made for the work would get no capabilities ([`userns::refuse_no_new_privs`]).
    #[error(
        "{what} in a user namespace would start without capabilities: no_new_privs is set on \
         this process (bubblewrap sets it, as do `--security-opt no-new-privileges` and \
         Kubernetes' allowPrivilegeEscalation: false); run strata without it"
    )]
    NoNewPrivs { what: String },
}

fn stderr_suffix(stderr: &str) -> String {
    let s = stderr.trim();
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

/// The Debian package that provides `program`, when strata knows it.
pub fn package_for(program: &str) -> Option<&'static str> {
    TOOL_PACKAGES
        .iter()
        .find(|(p, _)| *p == program)
        .map(|(_, pkg)| *pkg)
}

/// For a worker process: die (SIGKILL) with the strata process that
/// started it, so that a killed build leaves no worker writing into the
/// workdir its next writer cleans. The starting thread waits for the
/// worker, so the signal (sent when that thread ends) means the build is
/// gone. A worker whose parent is already gone exits at once.
pub fn die_with_parent() {
    use rustix::process::{getppid, set_parent_process_death_signal, Signal};
    let _ = set_parent_process_death_signal(Some(Signal::KILL));
    // No parent id: the parent is outside this process's pid namespace
    // (this is its first process), and the signal still comes.
    if getppid().is_some_and(|p| p.as_raw_nonzero().get() == 1) {
        std::process::exit(1);
    }
}

/// Finds `program` on PATH, or fails naming the package to install.
pub fn require(program: &str) -> Result<PathBuf, Error> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| missing(program))
}

fn missing(program: &str) -> Error {
    Error::Missing {
        program: program.to_string(),
        package: package_for(program).unwrap_or("providing it").to_string(),
    }
}

/// The command line as a user would type it, for logs and errors.
pub fn display(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Runs `cmd` to completion with stdout and stderr captured; fails unless it
/// exits 0. Stdin is closed.
pub fn run(cmd: &mut Command) -> Result<Output, Error> {
    run_with_input(cmd, None)
}

/// Like [`run`], feeding `input` on stdin.
pub fn run_with_input(cmd: &mut Command, input: Option<&[u8]>) -> Result<Output, Error> {
    run_started(cmd, input, |_| Ok(()))
}

/// Like [`run_with_input`], calling `started` with the child's process id
/// once it runs. When `started` fails, the child is killed and reaped, and
/// the error is returned.
pub fn run_started(
    cmd: &mut Command,
    input: Option<&[u8]>,
    started: impl FnOnce(u32) -> std::io::Result<()>,
) -> Result<Output, Error> {
    let command = display(cmd);
    tracing::debug!(target: "strata::cmd", "{command}");
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            missing(&cmd.get_program().to_string_lossy())
        } else {
            Error::Spawn {
                command: command.clone(),
                source,
            }
        }
    })?;
    if let Err(source) = started(child.id()) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Error::Spawn { command, source });
    }
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A child that exits early closes the pipe; its status tells the story.
        let _ = stdin.write_all(input);
    }
    let output = child.wait_with_output().map_err(|source| Error::Spawn {
        command: command.clone(),
        source,
    })?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(Error::Failed {
            command,
            status: output.status,
            stderr: tail(&output.stderr),
        })
    }
}

impl Error {
    /// The line of a failed command's stderr saying it ran out of space
    /// (`ENOSPC`, "No space left on device"), if it says so: the cause a
    /// caller names once, with the filesystem ([`filesystem_of`]), instead
    /// of the command line.
    pub fn no_space_line(&self) -> Option<&str> {
        match self {
            Error::Failed { stderr, .. } => stderr
                .lines()
                .rev()
                .find(|l| l.contains("No space left on device")),
            _ => None,
        }
    }
}

/// Runs `cmd` and returns its stdout as text.
pub fn stdout(cmd: &mut Command) -> Result<String, Error> {
    Ok(String::from_utf8_lossy(&run(cmd)?.stdout).into_owned())
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    match text.char_indices().rev().nth(STDERR_TAIL) {
        Some((cut, _)) => format!("…{}", &text[cut..]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_carries_command_and_stderr_tail() {
        let err = run(Command::new("sh").args(["-c", "echo boom >&2; exit 3"])).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("`sh -c 'echo boom >&2; exit 3'` failed"),
            "{msg}"
        );
        assert!(msg.ends_with(": boom"), "{msg}");
    }

    #[test]
    fn missing_program_names_its_package() {
        let err = run(&mut Command::new("qemu-system-x86_64-not-here")).unwrap_err();
        assert!(matches!(err, Error::Missing { .. }), "{err}");
        let err = missing("sfdisk");
        assert_eq!(
            err.to_string(),
            "`sfdisk` not found: install the Debian package fdisk (ci/install-deps does)"
        );
    }

    /// A command that ran out of space (`dd` writing to /dev/full gets
    /// ENOSPC, as a tool writing to a full filesystem does) is recognised
    /// from its stderr.
    #[test]
    fn out_of_space_is_recognised_from_stderr() {
        let err = run(Command::new("dd").args(["if=/dev/zero", "of=/dev/full", "bs=1", "count=1"]))
            .unwrap_err();
        let line = err.no_space_line().expect("dd's ENOSPC");
        assert!(line.contains("/dev/full"), "{line}");
        let err = run(Command::new("sh").args(["-c", "exit 1"])).unwrap_err();
        assert_eq!(err.no_space_line(), None);
    }

    #[test]
    fn input_reaches_stdin() {
        let out = run_with_input(&mut Command::new("cat"), Some(b"hello")).unwrap();
        assert_eq!(out.stdout, b"hello");
    }

    #[test]
    fn long_stderr_is_cut_to_its_tail() {
        let long = "x".repeat(5000) + "END";
        let t = tail(long.as_bytes());
        assert!(t.starts_with('…') && t.ends_with("END"));
        assert!(t.chars().count() <= STDERR_TAIL + 2);
    }
}
