//! The mount table (`/proc/<pid>/mountinfo`) read once for every crate,
//! and the filesystem a file is on, as an error names it ("no space left
//! on /var (ext4, 12 MiB free now)").
//!
//! A file is placed on its mount by the kernel's own answer for an open
//! descriptor (`mnt_id` in `/proc/self/fdinfo`), never by comparing path
//! prefixes of a resolved path: a path in an untrusted tree is opened
//! inside that tree ([`filesystem_in`]), so that a symlink of the tree
//! does not lead the lookup onto the host.
//!
//! Must not: mount or change anything; interpret mount options.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// One line of a mount table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id (the first field), as `fdinfo`'s `mnt_id` names it.
    pub id: u64,
    /// Where it is mounted, as the reading process sees it (escapes undone).
    pub point: PathBuf,
    /// The filesystem type (`ext4`, `tmpfs`…).
    pub fstype: String,
}

/// The mounts of a mount table, in its order. A line without the fields
/// of the format is an error naming it.
pub fn parse(table: &str) -> io::Result<Vec<Mount>> {
    table.lines().map(parse_line).collect()
}

fn parse_line(line: &str) -> io::Result<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "a mount table line strata cannot read: {}",
                crate::text::shown(line)
            ),
        )
    };
    let id = fields
        .first()
        .and_then(|f| f.parse().ok())
        .ok_or_else(bad)?;
    let point = fields.get(4).ok_or_else(bad)?;
    // Optional fields end at a lone `-`; the type follows it.
    let dash = fields
        .iter()
        .skip(5)
        .position(|f| *f == "-")
        .ok_or_else(bad)?
        + 5;
    let fstype = fields.get(dash + 1).ok_or_else(bad)?;
    Ok(Mount {
        id,
        point: PathBuf::from(OsStr::from_bytes(&unescape(point))),
        fstype: String::from_utf8_lossy(&unescape(fstype)).into_owned(),
    })
}

/// A mount table field: a space, tab, newline or backslash is written as
/// an octal escape (`\040`).
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) if b[i] == b'\\' => {
                let n = d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(n).unwrap_or(b'?'));
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// The filesystem holding the host path `path` (or the nearest part of it
/// that exists: what ran out of space may have removed its file), as
/// `<mount point> (<type>, <free> free now)`; the path itself when that
/// cannot be read.
pub fn filesystem_of(path: &Path) -> String {
    let open = |p: &Path| rustix::fs::open(p, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok();
    path.ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .find_map(open)
        .and_then(|fd| describe(fd.as_fd()))
        .unwrap_or_else(|| crate::text::escaped(&path.display().to_string()))
}

/// The filesystem holding `rel` in the tree at `root`, `rel` resolved
/// inside the tree ([`crate::in_root`]: an absolute symlink of the tree
/// names the tree's own file, never the host's); the nearest part of it
/// that exists, else the root directory itself. As [`filesystem_of`]
/// shows it.
pub fn filesystem_in(root: &Path, rel: &Path) -> String {
    let Ok(tree) = crate::in_root::Root::open(root) else {
        return filesystem_of(root);
    };
    let rel = rel.strip_prefix("/").unwrap_or(rel);
    rel.ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .chain([Path::new(".")])
        .find_map(|p| tree.open_file(p, OFlags::PATH).ok())
        .and_then(|f| describe(f.as_fd()))
        .unwrap_or_else(|| filesystem_of(root))
}

/// `<mount point> (<type>, <free> free now)` of the file open as `fd`.
fn describe(fd: std::os::fd::BorrowedFd<'_>) -> Option<String> {
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    let id: u64 = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))?
        .trim()
        .parse()
        .ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = parse(&table).ok()?.into_iter().find(|m| m.id == id)?;
    let free = rustix::fs::fstatvfs(fd)
        .ok()
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize));
    let free = match free {
        Some(b) if b >= 1 << 20 => format!(", {} MiB free now", b >> 20),
        Some(b) => format!(", {} KiB free now", b >> 10),
        None => String::new(),
    };
    Some(format!(
        "{} ({}{free})",
        crate::text::escaped(&mount.point.display().to_string()),
        crate::text::shown(&mount.fstype)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_tables_are_read_with_their_escapes() {
        let table = "72 47 254:0 /w/root / rw,relatime - ext4 /dev/vda rw\n\
            85 72 254:0 /w/root/usr/etc /etc rw,relatime shared:1 - ext4 /dev/vda rw\n\
            86 72 0:44 / /usr/share/a\\040b rw - tmpfs tmpfs rw\n";
        let mounts = parse(table).unwrap();
        let points: Vec<&Path> = mounts.iter().map(|m| m.point.as_path()).collect();
        assert_eq!(
            points,
            [
                Path::new("/"),
                Path::new("/etc"),
                Path::new("/usr/share/a b")
            ]
        );
        assert_eq!((mounts[1].id, mounts[1].fstype.as_str()), (85, "ext4"));
        assert_eq!(mounts[2].fstype, "tmpfs");
        let e = parse("72 47 254:0\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a mount table line strata cannot read: 72 47 254:0"
        );
        assert_eq!(unescape("a\\134b\\012"), b"a\\b\n");
        assert_eq!(unescape("a\\9b"), b"a\\9b");
    }

    #[test]
    fn a_path_is_placed_on_its_mount() {
        let fs = filesystem_of(Path::new("/proc/self"));
        assert!(fs.starts_with("/proc (proc"), "{fs}");
        let fs = filesystem_of(Path::new("/proc/self/no/such/file"));
        assert!(fs.starts_with("/proc (proc"), "{fs}");
    }

    /// A tree whose path leads, by an absolute symlink, to /proc: read on
    /// the host that would name the host's /proc; inside the tree it is
    /// the tree's own (missing) directory, so the tree's filesystem.
    #[test]
    fn a_symlink_in_the_tree_does_not_lead_to_the_hosts_filesystem() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/proc/self", d.path().join("usr")).unwrap();
        let tree = filesystem_in(d.path(), Path::new("/usr/lib/modules/x/initramfs.img"));
        assert_eq!(tree, filesystem_of(d.path()));
        assert!(!tree.starts_with("/proc"), "{tree}");
    }
}
