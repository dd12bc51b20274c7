//! A root of its own for a process that works on an untrusted tree as root
//! (a node's disk, opened by fuse2fs): the tree's filesystems are mounted
//! on a fresh tmpfs, the process pivots into it and lets the old root go,
//! and from then on no path, absolute or `../`, leads anywhere but that
//! tmpfs and what was mounted on it. What the process needs of the host
//! afterwards (libraries it loads late, programs it runs) it must load or
//! start before.
//!
//! Everything here is for a mount namespace the caller owns (a worker's,
//! see [`crate::worker`]): [`make_private`] first, so that nothing done
//! here reaches the namespace it was copied from.
//!
//! What it must not do: resolve a path through the untrusted tree. A
//! directory of that tree is reached with [`open_dir`] (no symlink
//! followed, nothing above the starting directory), and a mount is put on
//! it through its descriptor.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, StatVfsMountFlags};
use rustix::mount::{
    mount, mount_bind, mount_change, mount_remount, unmount, MountFlags, MountPropagationFlags,
    UnmountFlags,
};

/// Makes every mount of this process's mount namespace private: mounts
/// made here from now on propagate nowhere, and none made elsewhere
/// arrive.
pub fn make_private() -> io::Result<()> {
    Ok(mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?)
}

/// Mounts a tmpfs of at most `size` bytes, mode 0755, on `target`.
pub fn mount_tmpfs(target: &Path, size: u64) -> io::Result<()> {
    let data = std::ffi::CString::new(format!("mode=0755,size={size}"))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(mount(
        "strata-root",
        target,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        data.as_c_str(),
    )?)
}

/// Mounts on `target` a procfs of this process's pid namespace. The
/// caller has a pid namespace of its own (`unshare --pid --fork`), so it
/// shows no other process; libraries name descriptors by path
/// (`/proc/self/fd/N`), and a sandbox started inside may mount a procfs
/// of its own only where one is fully visible.
pub fn mount_proc(target: &Path) -> io::Result<()> {
    Ok(mount(
        "proc",
        target,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )?)
}

/// Binds the file `source` on `target` (created empty, with the
/// directories above it): a device, or read-only a program or library.
pub fn bind_file(source: &Path, target: &Path, read_only: bool) -> io::Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::File::create(target)?;
    if read_only {
        bind_read_only(source, target)
    } else {
        Ok(mount_bind(source, target)?)
    }
}

/// Opens the directory `rel` below `dir`, following no symlink on the way
/// and never leaving `dir`: fails with `ELOOP` when a component is a
/// symlink, `ENOTDIR` when it is something else, `EXDEV` when `..` would
/// climb out. The descriptor is `O_PATH`: good for a mount target, for
/// [`open_dir`] below it, and for `fstat`.
pub fn open_dir(dir: &impl AsFd, rel: impl AsRef<Path>) -> io::Result<OwnedFd> {
    resolve(dir, rel, OFlags::PATH | OFlags::DIRECTORY)
}

/// As [`open_dir`], but readable: for listing the directory.
pub fn read_dir(dir: &impl AsFd, rel: impl AsRef<Path>) -> io::Result<OwnedFd> {
    resolve(dir, rel, OFlags::RDONLY | OFlags::DIRECTORY)
}

/// The target of the symlink `rel` below `dir`, its parents reached as in
/// [`open_dir`]. `EINVAL` when `rel` is not a symlink.
pub fn read_link(dir: &impl AsFd, rel: impl AsRef<Path>) -> io::Result<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let rel = rel.as_ref();
    let Some(name) = rel.file_name() else {
        return Err(rustix::io::Errno::INVAL.into());
    };
    let parent = match rel.parent() {
        Some(p) if !p.as_os_str().is_empty() => open_dir(dir, p)?,
        _ => rustix::io::dup(dir)?,
    };
    let target = rustix::fs::readlinkat(&parent, name, Vec::new())?;
    Ok(std::ffi::OsString::from_vec(target.into_bytes()))
}

/// `RESOLVE_NO_SYMLINKS` refuses a symlink anywhere, the last component
/// too (`O_NOFOLLOW` would open that one as a link and report `ENOTDIR`).
fn resolve(dir: &impl AsFd, rel: impl AsRef<Path>, flags: OFlags) -> io::Result<OwnedFd> {
    let rel = rel.as_ref();
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    Ok(openat2(
        dir,
        rel,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?)
}

/// Binds the directory `source` onto the directory `target` was opened on
/// (by [`open_dir`]): the mount lands on that very directory, whatever
/// its path's components have become since.
pub fn bind_onto(source: &Path, target: &OwnedFd) -> io::Result<()> {
    let target = format!("/proc/self/fd/{}", target.as_raw_fd());
    Ok(mount_bind(source, target.as_str())?)
}

/// Binds the directory `source` read-only on `target`. The bind keeps the
/// flags of the mount it comes from (a user namespace may not drop them).
pub fn bind_read_only(source: &Path, target: &Path) -> io::Result<()> {
    mount_bind(source, target)?;
    let from = rustix::fs::statvfs(target)?.f_flag;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    for (have, keep) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if from.contains(have) {
            flags |= keep;
        }
    }
    Ok(mount_remount(target, flags, "")?)
}

/// Makes the current directory (a mount point, see [`mount_tmpfs`]) this
/// process's root and lets the old root go: afterwards nothing outside
/// that directory has a path. Threads share the change; other processes
/// of the mount namespace whose root was the old one move too, so the
/// caller has a namespace of its own (`unshare --mount`).
pub fn enter_current_dir() -> io::Result<()> {
    // The old root goes on top of the new one, then off it: no directory
    // for it is needed in the new root.
    rustix::process::pivot_root(".", ".")?;
    unmount(".", UnmountFlags::DETACH)?;
    rustix::process::chdir("/")?;
    Ok(())
}

/// Takes the mount at `target` (and those below it) off, at once for new
/// lookups; the filesystem ends when the last file open on it is closed.
pub fn detach(target: &Path) -> io::Result<()> {
    Ok(unmount(
        target,
        UnmountFlags::DETACH | UnmountFlags::NOFOLLOW,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_dir_follows_no_symlink_and_stays_below() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("a/abs")).unwrap();
        std::os::unix::fs::symlink("b", d.path().join("a/rel")).unwrap();
        std::fs::write(d.path().join("a/f"), b"").unwrap();
        let root = std::fs::File::open(d.path()).unwrap();
        assert!(open_dir(&root, "a/b").is_ok());
        assert!(open_dir(&root, "").is_ok());
        let errno = |rel: &str| open_dir(&root, rel).unwrap_err().raw_os_error();
        assert_eq!(errno("a/abs"), Some(libc::ELOOP));
        assert_eq!(errno("a/rel"), Some(libc::ELOOP));
        assert_eq!(errno("a/rel/x"), Some(libc::ELOOP));
        assert_eq!(errno("a/f"), Some(libc::ENOTDIR));
        assert_eq!(errno("a/missing"), Some(libc::ENOENT));
        assert_eq!(errno("a/../.."), Some(libc::EXDEV));
        assert_eq!(read_link(&root, "a/abs").unwrap(), "/etc");
        assert_eq!(
            read_link(&root, "a/b").unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }
}
