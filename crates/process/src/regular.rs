//! The one way strata opens a file a user or an untrusted tree names for
//! reading: a regular file only, and nothing else opened for real.
//!
//! The path is opened with `O_PATH` first, which has no side effect
//! whatever it names (opening `/dev/watchdog` arms the watchdog, opening a
//! FIFO waits for a writer, opening a tape device may rewind it), its type
//! is read from that descriptor, and only a regular file is then opened
//! for reading, through `/proc/self/fd` (the very inode looked at, not the
//! path again). Anything else is refused naming what it is.
//!
//! Must not: read more than its caller allows ([`read_regular`] reads at
//! most one byte past the limit), or know any format.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

/// Whether a symlink as the path's last component is followed (a user's
/// `include:` may be a link) or refused as such (a blob of an image
/// layout must be the file itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalSymlink {
    Follow,
    Refuse,
}

/// A regular file open for reading, and its size when it was opened.
#[derive(Debug)]
pub struct Regular {
    pub file: File,
    pub size: u64,
}

/// What a path names instead of a regular file ("a FIFO", "a character
/// device", "a directory", "a symlink"…). It is the inner error of the
/// `InvalidInput` [`io::Error`] [`open_regular`] returns: [`NotRegular::of`]
/// finds it again, for a caller with an error type of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotRegular {
    pub kind: &'static str,
}

impl NotRegular {
    /// The refusal carried by `e`, if `e` is one.
    pub fn of(e: &io::Error) -> Option<NotRegular> {
        e.get_ref()?.downcast_ref::<NotRegular>().copied()
    }
}

impl fmt::Display for NotRegular {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, not a regular file", self.kind)
    }
}

impl std::error::Error for NotRegular {}

/// Opens `path` for reading if it is a regular file; anything else is
/// refused by kind ([`NotRegular`]) without having been opened for real.
pub fn open_regular(path: &Path, link: FinalSymlink) -> io::Result<Regular> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if link == FinalSymlink::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    let at = rustix::fs::open(path, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&at)?;
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => None,
        FileType::Directory => Some("a directory"),
        FileType::Fifo => Some("a FIFO"),
        FileType::CharacterDevice => Some("a character device"),
        FileType::BlockDevice => Some("a block device"),
        FileType::Socket => Some("a socket"),
        FileType::Symlink => Some("a symlink"),
        FileType::Unknown => Some("not a file"),
    };
    if let Some(kind) = kind {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotRegular { kind },
        ));
    }
    let file = rustix::fs::open(
        format!("/proc/self/fd/{}", at.as_raw_fd()),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT => io::Error::new(
            io::ErrorKind::NotFound,
            "/proc is not mounted: a file is opened through /proc/self/fd",
        ),
        e => e.into(),
    })?;
    Ok(Regular {
        file: File::from(file),
        size: u64::try_from(stat.st_size).unwrap_or(0),
    })
}

/// The content of the regular file `path` (a final symlink followed),
/// refused when it holds more than `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_limited(open_regular(path, FinalSymlink::Follow)?.file, limit)
}

/// What `reader` gives, refused when that is more than `limit` bytes (of
/// which at most one more is read).
pub fn read_limited(reader: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// The refusal of a file larger than `limit` bytes.
pub fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than {limit} bytes, the most strata reads of such a file"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(path: &Path, link: FinalSymlink) -> String {
        let e = open_regular(path, link).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        NotRegular::of(&e).expect("a NotRegular").to_string()
    }

    /// Opening a device can act (`/dev/watchdog` arms the watchdog): a
    /// device is refused from its `O_PATH` descriptor, never opened. A
    /// FIFO with no writer would block an ordinary open forever.
    #[test]
    fn a_device_or_fifo_is_refused_without_being_opened() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo (Debian package coreutils)");
        assert!(made.success());
        let cases = [
            (
                Path::new("/dev/zero"),
                "a character device, not a regular file",
            ),
            (fifo.as_path(), "a FIFO, not a regular file"),
            (d.path(), "a directory, not a regular file"),
        ];
        for (path, want) in cases {
            assert_eq!(refused(path, FinalSymlink::Follow), want);
        }
        // Not opened: the kernel reports no open of the FIFO (an ordinary
        // open of a device would be one, and act).
        use rustix::fs::inotify;
        let watch =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&watch, &fifo, inotify::WatchFlags::OPEN).unwrap();
        refused(&fifo, FinalSymlink::Refuse);
        let mut events = [0u8; 256];
        let read = rustix::io::read(&watch, &mut events);
        assert_eq!(
            read.unwrap_err(),
            rustix::io::Errno::AGAIN,
            "an open was reported"
        );
        // /dev/watchdog is opened by nobody here (as root, an open would
        // arm it): O_PATH opens of a character device are side-effect
        // free, the same code path as /dev/zero above.
        if Path::new("/dev/watchdog").exists() {
            assert_eq!(
                refused(Path::new("/dev/watchdog"), FinalSymlink::Follow),
                "a character device, not a regular file"
            );
        }
    }

    #[test]
    fn a_final_symlink_is_followed_or_refused_as_asked() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"abc").unwrap();
        std::os::unix::fs::symlink("f", d.path().join("link")).unwrap();
        let link = d.path().join("link");
        let r = open_regular(&link, FinalSymlink::Follow).unwrap();
        assert_eq!(r.size, 3);
        assert_eq!(read_limited(r.file, 10).unwrap(), b"abc");
        assert_eq!(
            refused(&link, FinalSymlink::Refuse),
            "a symlink, not a regular file"
        );
        let r = open_regular(&d.path().join("f"), FinalSymlink::Refuse).unwrap();
        assert_eq!(r.size, 3);
        let missing = open_regular(&d.path().join("none"), FinalSymlink::Refuse).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert!(NotRegular::of(&missing).is_none());
    }

    #[test]
    fn never_more_than_the_limit_is_read() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big");
        std::fs::write(&big, [b'x'; 11]).unwrap();
        let e = read_regular(&big, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            e.to_string(),
            "larger than 10 bytes, the most strata reads of such a file"
        );
        assert_eq!(read_regular(&big, 11).unwrap().len(), 11);
        // An endless source costs limit + 1 bytes.
        let e = read_limited(io::repeat(0), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
    }
}
