//! What a program run in the tree opens and executes: every file, by
//! the path it has in the sandbox, symlinks resolved, `true` when it was
//! executed. The initramfs cache records a run's inputs from it.
//!
//! Two ways to learn it, the same answer:
//! - as root, the kernel reports it ([`strata_process::fanotify`]) on
//!   the sandbox's own mounts of the tree, so nothing but the sandbox's
//!   processes is seen and the program runs at full speed. The mounts
//!   exist only once bubblewrap has set the sandbox up, so the program is
//!   started by the tree's `/bin/sh`, which says it is ready and waits
//!   until the mounts are watched before it becomes the program (`exec`).
//!   Each reported path is checked to be the very file the kernel opened.
//! - otherwise (an ordinary user, a kernel without fanotify, or a tree
//!   without `/bin/sh`) strace
//!   follows every process (`-f`, `-y`, only successful calls). At RHCOS
//!   size dracut takes 2.6 s alone and 6 s under strace.
//!
//! Must not: lose an input silently. What cannot be placed fails the
//! recording (the program's result stands; it is just not recorded).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use strata_process::fanotify::MountWatch;

use crate::sandbox::{self, Layout};

/// The files a run opened, by their path in the sandbox: `true` when
/// executed.
pub(crate) type Opened = BTreeMap<String, bool>;

/// A program to run in the tree at `root`, laid out as `layout` says,
/// with `SOURCE_DATE_EPOCH` and `env` in its environment.
pub(crate) struct Program<'a> {
    pub(crate) root: &'a Path,
    pub(crate) layout: &'a Layout,
    pub(crate) source_date_epoch: u64,
    pub(crate) env: &'a [(&'a str, &'a str)],
    pub(crate) argv: &'a [String],
}

impl Program<'_> {
    /// The sandbox the program runs in.
    fn sandbox(&self) -> strata_process::sandbox::Sandbox {
        sandbox::sandbox(self.root, self.source_date_epoch, self.layout, self.env)
    }
}

/// Runs `p` as [`sandbox::run_in_tree`] does and learns what it opened.
/// The outer error is the program's (it failed or could not start); the
/// inner one says why what it opened is not known although it ran.
/// `scratch` is a directory for strace's output.
pub(crate) fn run(p: &Program, scratch: &Path) -> Result<Result<Opened>> {
    strata_process::require("bwrap")?;
    run_with(p, scratch, true)
}

/// [`run`], with the kernel's reports only when `watch` allows them.
fn run_with(p: &Program, scratch: &Path, watch: bool) -> Result<Result<Opened>> {
    let shell = watch
        && p.layout
            .host_path(p.root, "/bin/sh")
            .is_some_and(|sh| sandbox::open_input(p.root, &sh).is_ok());
    if shell {
        match MountWatch::new() {
            Ok(watch) => return run_watched(p, watch),
            Err(e) => tracing::debug!("recording through strace: no fanotify ({e})"),
        }
    }
    run_traced(p, scratch)
}

/// The descriptors the sandbox's shell and bubblewrap use: the shell says
/// it is ready on one, waits on the other, and closes both before it
/// becomes the program; bubblewrap writes its info on the third.
const READY_FD: i32 = 5;
const GO_FD: i32 = 6;
const INFO_FD: i32 = 7;

fn run_watched(p: &Program, mut watch: MountWatch) -> Result<Result<Opened>> {
    let program = p.argv.first().context("an empty command line")?;
    let (info_r, info_w) = std::io::pipe().context("creating a pipe")?;
    let (ready_r, ready_w) = std::io::pipe().context("creating a pipe")?;
    let (go_r, go_w) = std::io::pipe().context("creating a pipe")?;
    // Each step only after the one before it worked: a shell that cannot
    // say it is ready must not wait. What the shell itself sets in the
    // environment (PWD, and SHLVL in bash) is not passed on.
    let wrapper = format!(
        "echo >&{READY_FD} && read -r _ <&{GO_FD} && unset PWD SHLVL && \
         exec \"$@\" {READY_FD}>&- {GO_FD}>&- {INFO_FD}>&-"
    );
    let mut wrapped = ["/bin/sh", "-c", &wrapper, "sh"].map(String::from).to_vec();
    wrapped.extend(p.argv.iter().cloned());
    let mut cmd = p.sandbox().info_fd(INFO_FD).command(&wrapped);
    strata_process::fds::inherit(
        &mut cmd,
        &[
            (ready_w.as_raw_fd(), READY_FD),
            (go_r.as_raw_fd(), GO_FD),
            (info_w.as_raw_fd(), INFO_FD),
        ],
    );
    let mut marked = Err(anyhow::anyhow!("the sandbox did not start"));
    let ran = strata_process::run_started(&mut cmd, None, |_| {
        drop((info_w, ready_w, go_r));
        marked = mark(&mut watch, info_r, ready_r);
        // Whatever the marking gave, the program goes on; a sandbox that
        // ended early says why in its own status.
        let _ = (&go_w).write_all(b"\n");
        drop(go_w);
        Ok(())
    });
    ran?;
    Ok(marked.and_then(|mounts| collect(&watch, &mounts, p.root, p.layout, program)))
}

/// Watches every mount of the sandbox but its own `/dev`, `/proc` and
/// `/tmp` (the tree and whatever is mounted in it: the layout's mounts,
/// and any mount below the tree, which bubblewrap binds along) once its
/// shell says it is ready. bubblewrap names the process (`child-pid` on
/// `info`) whose root and mount table are the sandbox's. Returns where
/// each watched mount is in the sandbox, in [`MountWatch::mark`]'s order.
fn mark(
    watch: &mut MountWatch,
    mut info: std::io::PipeReader,
    mut ready: std::io::PipeReader,
) -> Result<Vec<String>> {
    let mut text = Vec::new();
    let value: serde_json::Value = loop {
        let mut buf = [0u8; 512];
        let n = info.read(&mut buf).context("reading bubblewrap's info")?;
        if n == 0 {
            bail!("bubblewrap said nothing of the sandbox");
        }
        text.extend_from_slice(&buf[..n]);
        if let Ok(v) = serde_json::from_slice(&text) {
            break v;
        }
    };
    let pid = value["child-pid"]
        .as_u64()
        .context("bubblewrap's info has no child-pid")?;
    let mut byte = [0u8; 1];
    if ready.read(&mut byte).context("waiting for the sandbox")? == 0 {
        bail!("the sandbox ended before its program started");
    }
    let table = fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .context("reading the sandbox's mounts")?;
    let mut mounts = Vec::new();
    for point in mount_points(&table)? {
        let own = ["/dev", "/proc", "/tmp"]
            .iter()
            .any(|m| point == *m || point.starts_with(&format!("{m}/")));
        if own || mounts.contains(&point) {
            continue;
        }
        let at = format!("/proc/{pid}/root{}", point.trim_end_matches('/'));
        watch
            .mark(Path::new(&at))
            .with_context(|| format!("watching the sandbox's {point}"))?;
        mounts.push(point);
    }
    Ok(mounts)
}

/// The mount points of a mount table (`/proc/<pid>/mountinfo`, read by
/// [`strata_process::mountinfo`]), in its order, as text: a point that is
/// not UTF-8 cannot be named to the watch and fails the run.
fn mount_points(table: &str) -> Result<Vec<String>> {
    strata_process::mountinfo::parse(table)?
        .into_iter()
        .map(|m| {
            m.point.to_str().map(str::to_string).with_context(|| {
                format!(
                    "a mount point strata cannot place: {}",
                    strata_process::text::shown(&m.point.to_string_lossy())
                )
            })
        })
        .collect()
}

/// What the watch saw, by the paths in the sandbox, each checked to be
/// the file the tree has there. A reported path starts at its mount's
/// root, or at the sandbox's root while a process of the sandbox still
/// lives: the one that leads to the very file opened is taken.
fn collect(
    watch: &MountWatch,
    mounts: &[String],
    root: &Path,
    layout: &Layout,
    program: &str,
) -> Result<Opened> {
    let mut read = Opened::new();
    read.insert(program.to_string(), true);
    watch.drain(|o| -> Result<()> {
        let opened = rustix::fs::fstat(o.file).context("reading a file the kernel reported")?;
        // Deleted since: the run's own scratch.
        if opened.st_nlink == 0 {
            return Ok(());
        }
        let rel = o
            .path
            .to_str()
            .with_context(|| format!("a path strata cannot place: {:?}", o.path))?;
        let mount = mounts[o.mount].as_str();
        let below = match (mount, rel) {
            ("/", _) => rel.to_string(),
            (_, "/") => mount.to_string(),
            _ => format!("{mount}{rel}"),
        };
        let is_it = |path: &str| {
            layout.host_path(root, path).is_some_and(|host| {
                rustix::fs::lstat(&host)
                    .is_ok_and(|m| (m.st_dev, m.st_ino) == (opened.st_dev, opened.st_ino))
            })
        };
        let path = [below.as_str(), rel]
            .into_iter()
            .find(|p| is_it(p))
            .with_context(|| {
                format!("the file opened at {rel} on the sandbox's {mount} is not in the tree")
            })?;
        *read.entry(path.to_string()).or_insert(false) |= o.executed;
        Ok(())
    })?;
    Ok(read)
}

/// Runs the program under strace, which writes to a file in `scratch`
/// every file opened or executed, with the path it has in the sandbox
/// (`-y`).
fn run_traced(p: &Program, scratch: &Path) -> Result<Result<Opened>> {
    strata_process::require("strace")?;
    let program = p.argv.first().context("an empty command line")?;
    let trace = tempfile::NamedTempFile::new_in(scratch).context("creating a trace file")?;
    let bwrap = p.sandbox().command(p.argv);
    let mut cmd = Command::new("strace");
    // Only the traced calls stop the program (seccomp), and only
    // successful ones are written: a failed open reads nothing.
    cmd.args([
        "-f",
        "-qq",
        "-y",
        "--seccomp-bpf",
        "-e",
        "status=successful",
    ])
    .args([
        "-e",
        "trace=open,openat,openat2,creat,execve,execveat",
        "-o",
    ])
    .arg(trace.path())
    .arg("--")
    .arg(bwrap.get_program())
    .args(bwrap.get_args());
    strata_process::run(&mut cmd)?;
    Ok(fs::read_to_string(trace.path())
        .context("reading the trace")
        .and_then(|text| parse_trace(&text, program)))
}

/// The files a run opened or executed, from strace's `-y` output: each
/// path as the sandbox sees it, `true` when executed. Starts at the
/// execution of `program` (what precedes it is bubblewrap setting the
/// sandbox up, on the host). An error when the trace holds anything it
/// cannot place (an escaped path, an `execveat`, a relative execution):
/// an entry must not miss an input.
fn parse_trace(text: &str, program: &str) -> Result<BTreeMap<String, bool>> {
    let start = format!("execve(\"{program}\",");
    let mut lines = text.lines();
    lines
        .by_ref()
        .find(|l| pid_stripped(l).starts_with(&start))
        .with_context(|| format!("the trace shows no execution of {program}"))?;
    let mut read = BTreeMap::new();
    read.insert(program.to_string(), true);
    for line in lines {
        let call = pid_stripped(line);
        if call.starts_with("execveat(") {
            bail!("the trace has an execveat: {line}");
        }
        if let Some(rest) = call.strip_prefix("execve(\"") {
            let path = unescape(quoted(rest))
                .filter(|p| p.starts_with('/'))
                .with_context(|| {
                    format!("the trace has an execution strata cannot place: {line}")
                })?;
            read.insert(path, true);
            continue;
        }
        // `… = 3</usr/lib64/libc.so.6>`, possibly on a resumed line.
        let Some(path) = opened_path(line.trim_end()) else {
            continue;
        };
        // Pipes, sockets and anonymous inodes (`pipe:[1520717]`) are no
        // files; deleted files were the run's own scratch.
        if !path.starts_with('/') || path.ends_with(" (deleted)") {
            continue;
        }
        let path = unescape(path)
            .with_context(|| format!("the trace has a path strata cannot place: {line}"))?;
        read.entry(path).or_insert(false);
    }
    Ok(read)
}

/// The text of a C string strace printed, up to its closing quote
/// (`rest` starts after the opening one).
fn quoted(rest: &str) -> &str {
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return &rest[..i],
            _ => {}
        }
    }
    rest
}

/// A string as strace escapes it (`\\`, `\"`, `\n`…, `\ooo`, `\xhh`),
/// unescaped; `None` when it is not UTF-8 or an escape is unknown.
fn unescape(s: &str) -> Option<String> {
    if !s.contains('\\') {
        return Some(s.to_string());
    }
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let c = *bytes.get(i + 1)?;
        i += 2;
        match c {
            b'\\' | b'"' | b'\'' | b'<' | b'>' => out.push(c),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let hex = s.get(i..i + 2)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    v = v * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(u8::try_from(v).ok()?);
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// A trace line without its leading process id.
fn pid_stripped(line: &str) -> &str {
    line.trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start()
}

/// The path of the descriptor a call returned: `= N<path>` at the end.
fn opened_path(line: &str) -> Option<&str> {
    let body = line.strip_suffix('>')?;
    let (before, path) = body.rsplit_once("= ")?;
    let _ = before;
    let (fd, path) = path.split_once('<')?;
    fd.chars().all(|c| c.is_ascii_digit()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn program<'a>(root: &'a Path, layout: &'a Layout, argv: &'a [String]) -> Program<'a> {
        Program {
            root,
            layout,
            source_date_epoch: 0,
            env: &[],
            argv,
        }
    }

    /// A small tree of the host's own programs: a shell, `cat`, `rm` and what
    /// they load, with `/etc` in `/usr/etc`.
    fn tree(at: &Path) {
        for dir in [
            "usr/bin",
            "usr/lib64",
            "usr/lib/x86_64-linux-gnu",
            "usr/etc",
            "usr/share",
            "etc",
        ] {
            fs::create_dir_all(at.join(dir)).unwrap();
        }
        for (from, to) in [
            ("/usr/bin/dash", "usr/bin/dash"),
            ("/usr/bin/cat", "usr/bin/cat"),
            ("/usr/bin/rm", "usr/bin/rm"),
            ("/usr/bin/sleep", "usr/bin/sleep"),
            (
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "usr/lib/x86_64-linux-gnu/libc.so.6",
            ),
            (
                "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                "usr/lib64/ld-linux-x86-64.so.2",
            ),
        ] {
            fs::copy(from, at.join(to)).unwrap();
        }
        for (target, link) in [
            ("dash", "usr/bin/sh"),
            ("usr/bin", "bin"),
            ("usr/lib64", "lib64"),
            ("usr/lib", "lib"),
        ] {
            std::os::unix::fs::symlink(target, at.join(link)).unwrap();
        }
        fs::write(at.join("usr/etc/passwd"), "root:x:0:0::/:/bin/sh\n").unwrap();
        fs::write(at.join("usr/share/data"), "data").unwrap();
        fs::write(at.join("usr/share/gone"), "scratch").unwrap();
    }

    #[test]
    fn the_kernel_and_strace_name_the_same_files_through_every_mount() {
        strata_testdistro::require_root("fanotify watches mounts only for root");
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        tree(&root);
        let os_release = t.path().join("os-release");
        fs::write(&os_release, "ID=rhel\n").unwrap();
        let layout = Layout {
            etc_in_usr_etc: true,
            os_release: Some(os_release),
        };
        // A mount below the tree, which the sandbox binds along.
        let sub = root.join("usr/share/sub");
        fs::create_dir_all(&sub).unwrap();
        strata_process::run(Command::new("mount").args(["-t", "tmpfs", "sub"]).arg(&sub)).unwrap();
        let _unmount = Unmount(sub.clone());
        fs::write(sub.join("in"), "below").unwrap();
        // The last line leaves a process of the sandbox running on its
        // own after the program ends: the sandbox's mounts stay.
        let script = "cat /etc/passwd /usr/lib/os-release /usr/share/data /usr/share/gone \
            /usr/share/sub/in >/dev/null \
            && echo x >/usr/share/gone && rm /usr/share/gone \
            && { sleep 2 </dev/null >/dev/null 2>&1 & }";
        let argv = ["/usr/bin/sh", "-c", script].map(String::from);
        let scratch = PathBuf::from(t.path());
        for watch in [true, false] {
            fs::write(root.join("usr/share/gone"), "scratch").unwrap();
            let read = run_with(&program(&root, &layout, &argv), &scratch, watch)
                .unwrap()
                .unwrap();
            let how = if watch { "watched" } else { "traced" };
            for (path, executed) in [
                ("/usr/bin/sh", true),
                ("/usr/bin/cat", true),
                ("/usr/lib/x86_64-linux-gnu/libc.so.6", false),
                ("/etc/passwd", false),
                ("/usr/lib/os-release", false),
                ("/usr/share/data", false),
                ("/usr/share/sub/in", false),
            ] {
                assert_eq!(read.get(path), Some(&executed), "{how}: {path} in {read:?}");
            }
            // strace names a file deleted since as it was; the kernel's
            // report comes after the deletion. Either way, nothing is
            // there to record.
            assert_eq!(
                read.contains_key("/usr/share/gone"),
                !watch,
                "{how}: {read:?}"
            );
            assert!(!read.contains_key("/usr/etc/passwd"), "{how}: {read:?}");
            // The kernel also names what it loaded itself, by the paths
            // links lead to.
            if watch {
                for path in ["/usr/lib64/ld-linux-x86-64.so.2", "/usr/bin/dash"] {
                    assert_eq!(read.get(path), Some(&true), "{path} in {read:?}");
                }
            }
        }
    }

    #[test]
    fn mount_points_are_read_from_the_mount_table() {
        let table = "72 47 254:0 /w/root / rw,relatime - ext4 /dev/vda rw\n\
            85 72 254:0 /w/root/usr/etc /etc rw,relatime - ext4 /dev/vda rw\n\
            86 72 0:44 / /usr/share/a\\040b rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mount_points(table).unwrap(),
            ["/", "/etc", "/usr/share/a b"]
        );
        assert!(mount_points("72 47 254:0\n").is_err());
    }

    /// Unmounts its path when dropped.
    struct Unmount(PathBuf);

    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("--lazy").arg(&self.0).status();
        }
    }

    #[test]
    fn a_failing_program_is_the_runs_error_whichever_way_it_is_watched() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        tree(&root);
        let argv = ["/usr/bin/sh", "-c", "echo broken >&2; exit 3"].map(String::from);
        for watch in [true, false] {
            let e =
                run_with(&program(&root, &Layout::default(), &argv), t.path(), watch).unwrap_err();
            assert!(format!("{e:#}").contains("broken"), "{e:#}");
        }
    }

    const TRACE: &str = r#"802   execve("/usr/bin/bwrap", ["bwrap"], 0x7ffc /* 35 vars */) = 0
802   openat(AT_FDCWD</work>, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache>
803   execve("/usr/bin/dracut", ["/usr/bin/dracut", "-f"], 0x5618 /* 6 vars */) = 0
803   openat(AT_FDCWD</>, "/lib/x86_64-linux-gnu/libtinfo.so.6", O_RDONLY|O_CLOEXEC) = 3</usr/lib64/libtinfo.so.6.4>
2877  openat(AT_FDCWD</>, "/lib/x86_64-linux-gnu/libattr.so.1", O_RDONLY|O_CLOEXEC <unfinished ...>
)                                       = 4</usr/lib64/libattr.so.1.1.2501>
2841  --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=2842} ---
2842  execve("/usr/bin/readlink", ["readlink", "-f", "/usr/bin/dracut"], 0x55f8 /* 8 vars */) = 0
2843  openat(3</var/tmp/dracut.X>, "initramfs", O_RDONLY|O_DIRECTORY) = 4</var/tmp/dracut.X/initramfs>
2844  openat(AT_FDCWD</>, "/var/tmp/x", O_RDONLY) = 5</var/tmp/x (deleted)>
2845  openat(AT_FDCWD</>, "/dev/fd/63", O_RDONLY) = 3<pipe:[1520717]>
2845  +++ exited with 0 +++
"#;

    #[test]
    fn a_trace_names_what_was_read_and_executed_after_the_program_started() {
        let read = parse_trace(TRACE, "/usr/bin/dracut").unwrap();
        let want: BTreeMap<String, bool> = [
            ("/usr/bin/dracut", true),
            ("/usr/lib64/libtinfo.so.6.4", false),
            ("/usr/lib64/libattr.so.1.1.2501", false),
            ("/usr/bin/readlink", true),
            ("/var/tmp/dracut.X/initramfs", false),
        ]
        .into_iter()
        .map(|(p, x)| (p.to_string(), x))
        .collect();
        assert_eq!(read, want);
        assert!(parse_trace(TRACE, "/usr/bin/mkinitrd").is_err());
    }

    #[test]
    fn a_trace_with_paths_it_cannot_place_is_refused() {
        for bad in [
            "9 openat(AT_FDCWD</>, \"x\", O_RDONLY) = 3</usr/lib/a\\qb>",
            "9 execve(\"./run\", [\"run\"], 0x1 /* 1 var */) = 0",
            "9 execveat(3</usr/bin>, \"x\", [], 0x1, 0) = 0",
        ] {
            let trace = format!("1 execve(\"/usr/bin/dracut\", [], 0x1) = 0\n{bad}\n");
            assert!(parse_trace(&trace, "/usr/bin/dracut").is_err(), "{bad}");
        }
    }

    #[test]
    fn escaped_paths_are_read_as_the_bytes_they_name() {
        let trace = "1 execve(\"/usr/bin/dracut\", [], 0x1) = 0\n\
            2 openat(AT_FDCWD</>, \"u\", O_RDONLY) = 3</usr/lib/systemd/system/a\\x2db.slice>\n\
            2 openat(AT_FDCWD</>, \"u\", O_RDONLY) = 3</usr/lib/a\\\\b\\076>\n\
            3 execve(\"/usr/bin/a\\\"b\", [], 0x1) = 0\n";
        let read = parse_trace(trace, "/usr/bin/dracut").unwrap();
        let paths: Vec<&str> = read.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "/usr/bin/a\"b",
                "/usr/bin/dracut",
                "/usr/lib/a\\b>",
                "/usr/lib/systemd/system/a-b.slice"
            ]
        );
    }
}
