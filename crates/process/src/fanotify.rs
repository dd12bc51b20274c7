//! Which files the processes working through a mount open and execute,
//! as the kernel reports them (fanotify).
//!
//! A mount is watched through a path into it, for example
//! `/proc/<pid>/root/etc` for the mount a sandboxed process sees at
//! `/etc`: only what goes through that very mount is reported, so the
//! sandbox's processes and no other. Each mount gets its own fanotify
//! group, so every report says which mount it came through. The kernel
//! opens each reported file for the reader; its path, read back, has
//! symlinks resolved and starts at the mount's root once the mount's
//! namespace is gone, at the namespace's root while it lives: callers
//! place it themselves.
//!
//! Watching mounts needs `CAP_SYS_ADMIN` in the initial user namespace:
//! [`MountWatch::new`] says `None` when this process lacks it.

#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

/// How many bytes of reports are read at once: each report read comes
/// with a file descriptor, so this keeps the open ones to 64 (a kernel
/// without `FAN_REPORT_FD_ERROR` drops a report whose descriptor it
/// cannot open).
const READ_SIZE: usize = 64 * std::mem::size_of::<libc::fanotify_event_metadata>();

/// Reports carry the error instead of being dropped when the kernel
/// cannot open their file (Linux 6.13).
const FAN_REPORT_FD_ERROR: libc::c_uint = 0x0000_2000;

/// Watches for opens and executions through some mounts.
#[derive(Debug)]
pub struct MountWatch {
    /// One group per watched mount, in [`MountWatch::mark`]'s order.
    groups: Vec<OwnedFd>,
    /// The group [`MountWatch::new`] made to learn that watching works,
    /// for the first mark.
    spare: Option<OwnedFd>,
}

/// One file opened through a watched mount.
#[derive(Debug)]
pub struct Opened<'a> {
    /// Which of the marked mounts (in [`MountWatch::mark`]'s order).
    pub mount: usize,
    /// The file's path, symlinks resolved: from the mount's root (`/` for
    /// a file that is the mount's root) or, while the mount's namespace
    /// lives, from that namespace's root.
    pub path: OsString,
    /// Whether it was opened to be executed (a program, or the loader or
    /// interpreter the kernel loaded for one).
    pub executed: bool,
    /// The file, as the kernel opened it for the report (read-only).
    pub file: BorrowedFd<'a>,
}

impl MountWatch {
    /// A watch of nothing yet. An error when this process may not watch
    /// mounts (`EPERM`: it is not root in the initial user namespace) or
    /// the kernel has no fanotify.
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            groups: Vec::new(),
            spare: Some(group()?),
        })
    }

    /// Watches the mount `path` is in (the mount itself, not the mounts
    /// below it). Returns the mount's index in [`Opened::mount`].
    pub fn mark(&mut self, path: &Path) -> io::Result<usize> {
        let group = match self.spare.take() {
            Some(g) => g,
            None => group()?,
        };
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid fanotify descriptor and a NUL-terminated path.
        let rc = unsafe {
            libc::fanotify_mark(
                group.as_raw_fd(),
                libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                libc::FAN_OPEN | libc::FAN_OPEN_EXEC,
                libc::AT_FDCWD,
                c.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.groups.push(group);
        Ok(self.groups.len() - 1)
    }

    /// Calls `each` with every report so far, in the order of the mounts
    /// and, for each, the order the files were opened (a file opened
    /// again before the report was read is reported once). Fails when the
    /// kernel lost reports or could not open a reported file.
    pub fn drain<E: From<io::Error>>(
        &self,
        mut each: impl FnMut(Opened<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut buf = vec![0u8; READ_SIZE];
        for (mount, group) in self.groups.iter().enumerate() {
            loop {
                let n = match rustix::io::read(group, &mut buf) {
                    Ok(n) => n,
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(io::Error::from(e).into()),
                };
                if n == 0 {
                    break;
                }
                // Every descriptor of this read is owned before any is
                // used, so that all are closed whatever `each` says.
                let reports = parse(&buf[..n])?;
                let mut failed = None;
                for (mask, file) in reports {
                    if failed.is_some() {
                        continue;
                    }
                    if mask & libc::FAN_Q_OVERFLOW != 0 {
                        failed = Some(
                            io::Error::other("the kernel lost reports (queue overflow)").into(),
                        );
                        continue;
                    }
                    let Some(file) = file else {
                        failed = Some(
                            io::Error::other("the kernel could not open a reported file").into(),
                        );
                        continue;
                    };
                    let path = rustix::fs::readlinkat(
                        rustix::fs::CWD,
                        format!("/proc/self/fd/{}", file.as_raw_fd()),
                        Vec::new(),
                    )
                    .map_err(io::Error::from)?;
                    let opened = Opened {
                        mount,
                        path: OsString::from_vec(path.into_bytes()),
                        executed: mask & libc::FAN_OPEN_EXEC != 0,
                        file: file.as_fd(),
                    };
                    if let Err(e) = each(opened) {
                        failed = Some(e);
                    }
                }
                if let Some(e) = failed {
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// A new fanotify group that reports opens without blocking anyone,
/// with the error in place of a file the kernel could not open where the
/// kernel can say so.
fn group() -> io::Result<OwnedFd> {
    let flags =
        libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK | libc::FAN_UNLIMITED_QUEUE;
    let event_flags = (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC) as libc::c_uint;
    // SAFETY: plain flags; the result is checked before use.
    let mut fd = unsafe { libc::fanotify_init(flags | FAN_REPORT_FD_ERROR, event_flags) };
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // SAFETY: as above.
        fd = unsafe { libc::fanotify_init(flags, event_flags) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor fanotify_init just returned, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The reports in `buf`: each one's mask, with its file (owned from here
/// on), or `None` where the kernel gave none (an overflow, or the error
/// opening it).
fn parse(buf: &[u8]) -> io::Result<Vec<(u64, Option<OwnedFd>)>> {
    const META: usize = std::mem::size_of::<libc::fanotify_event_metadata>();
    let mut out = Vec::new();
    let mut off = 0;
    let bad = || io::Error::other("a malformed fanotify report");
    while off < buf.len() {
        let at = |o: usize, n: usize| buf.get(off + o..off + o + n).ok_or_else(bad);
        let len = u32::from_ne_bytes(at(0, 4)?.try_into().expect("4 bytes")) as usize;
        let version = at(4, 1)?[0];
        let mask = u64::from_ne_bytes(at(8, 8)?.try_into().expect("8 bytes"));
        let fd = i32::from_ne_bytes(at(16, 4)?.try_into().expect("4 bytes"));
        // SAFETY: the kernel opened this descriptor for this reader; it is
        // owned here only, and closed when dropped.
        let file = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        out.push((mask, file));
        if version != libc::FANOTIFY_METADATA_VERSION || len < META || off + len > buf.len() {
            return Err(bad());
        }
        off += len;
    }
    Ok(out)
}
