//! Descriptors a child process inherits, at numbers of the caller's
//! choosing; every other descriptor stays close-on-exec. Choosing the
//! numbers in the child, after the fork, keeps them from leaking into
//! processes other threads start meanwhile.

#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The child of `cmd` gets each `(from, to)`'s descriptor `from` (open
/// in this process until the spawn) as its descriptor `to`, without
/// close-on-exec. At most eight; `to`s must differ and be above 2 (stdio
/// stays as set).
pub fn inherit(cmd: &mut Command, fds: &[(RawFd, RawFd)]) {
    assert!(fds.len() <= 8 && fds.iter().all(|&(_, to)| to > 2));
    let fds = fds.to_vec();
    // SAFETY: the closure runs between fork and exec and only makes
    // system calls (fcntl, dup2, close), which are async-signal-safe; it
    // allocates nothing (the vector is moved in, not grown).
    unsafe {
        cmd.pre_exec(move || {
            // First every source above every target, so that placing one
            // cannot overwrite another's source.
            let top = fds.iter().map(|&(_, to)| to).max().unwrap_or(2) + 1;
            let mut moved = [0 as RawFd; 8];
            for (slot, &(from, _)) in moved.iter_mut().zip(&fds) {
                let fd = libc::fcntl(from, libc::F_DUPFD_CLOEXEC, top);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                *slot = fd;
            }
            for (&fd, &(_, to)) in moved.iter().zip(&fds) {
                if libc::dup2(fd, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
            }
            Ok(())
        });
    }
}
