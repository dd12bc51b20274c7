//! Paths below a tree's root, reached as the tree itself resolves them:
//! every symlink on the way, absolute ones too, resolves inside the root
//! (`openat2` with `RESOLVE_IN_ROOT`). Trees come from registries and
//! repositories; their symlinks must not lead what strata reads, writes or
//! removes out of the tree.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

pub use rustix::fs::OFlags;

use rustix::fs::{mkdirat, openat, openat2, unlinkat, AtFlags, Mode, ResolveFlags};

/// A tree's root, opened once for the lookups below it.
pub struct Root(File);

impl Root {
    pub fn open(root: &Path) -> io::Result<Root> {
        File::open(root).map(Root)
    }

    /// Opens `rel` (relative to the root) with `flags` (and `O_CLOEXEC`).
    pub fn open_file(&self, rel: impl AsRef<Path>, flags: OFlags) -> io::Result<File> {
        self.open_fd(rel.as_ref(), flags).map(File::from)
    }

    fn open_fd(&self, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
        Ok(openat2(
            &self.0,
            rel,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        )?)
    }

    /// The directory `rel` (relative, `/`-separated; `""` is the root).
    fn dir(&self, rel: &str) -> io::Result<OwnedFd> {
        if rel.is_empty() {
            return Ok(self.0.try_clone()?.into());
        }
        self.open_fd(Path::new(rel), OFlags::RDONLY | OFlags::DIRECTORY)
    }

    /// Whether `rel` is a directory.
    pub fn has_dir(&self, rel: &str) -> bool {
        self.dir(rel).is_ok()
    }

    /// Makes the directory `rel` and the missing ones above it (mode 0755).
    pub fn create_dirs(&self, rel: &str) -> io::Result<()> {
        let ends = rel.match_indices('/').map(|(i, _)| i).chain([rel.len()]);
        for here in ends.map(|end| &rel[..end]) {
            if self.has_dir(here) {
                continue;
            }
            let (parent, name) = split(here);
            match mkdirat(self.dir(parent)?, name, Mode::from_raw_mode(0o755)) {
                Ok(()) => {}
                Err(e) if e == rustix::io::Errno::EXIST => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Creates the file `rel` with `content` and `mode`. Fails, changing
    /// nothing, when anything is in its place (a symlink too: it is never
    /// followed).
    pub fn create_new(&self, rel: &str, content: &[u8], mode: u32) -> io::Result<()> {
        use std::io::Write;
        let (parent, name) = split(rel);
        let fd = openat(
            self.dir(parent)?,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        let written = rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
            .map_err(io::Error::from)
            .and_then(|()| File::from(fd).write_all(content));
        if written.is_err() {
            // What was made goes again: the error leaves nothing behind.
            let _ = self.remove_file(rel);
        }
        written
    }

    /// Removes the file `rel`.
    pub fn remove_file(&self, rel: &str) -> io::Result<()> {
        let (parent, name) = split(rel);
        Ok(unlinkat(self.dir(parent)?, name, AtFlags::empty())?)
    }

    /// Removes the directory `rel` if it is empty.
    pub fn remove_dir(&self, rel: &str) -> io::Result<()> {
        let (parent, name) = split(rel);
        Ok(unlinkat(self.dir(parent)?, name, AtFlags::REMOVEDIR)?)
    }
}

fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_of_the_tree_resolve_inside_it() {
        let outside = tempfile::tempdir().unwrap();
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("usr")).unwrap();
        // A hostile tree's /etc names a directory of the host.
        std::os::unix::fs::symlink(outside.path(), root.join("etc")).unwrap();
        let inside = root.join(outside.path().strip_prefix("/").unwrap());
        std::fs::create_dir_all(&inside).unwrap();
        let r = Root::open(&root).unwrap();
        r.create_dirs("etc/kernel/install.d").unwrap();
        r.create_new("etc/kernel/install.d/x.install", b"#!/bin/sh\n", 0o755)
            .unwrap();
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // Inside the root, the absolute link names the root's own directory.
        let file = inside.join("kernel/install.d/x.install");
        assert_eq!(std::fs::read(&file).unwrap(), b"#!/bin/sh\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o755
        );
        r.remove_file("etc/kernel/install.d/x.install").unwrap();
        r.remove_dir("etc/kernel/install.d").unwrap();
        assert!(!inside.join("kernel/install.d").exists());
        assert!(r.has_dir("etc/kernel") && !r.has_dir("etc/kernel/install.d"));
    }

    #[test]
    fn a_symlink_in_the_files_place_is_not_followed() {
        let outside = tempfile::NamedTempFile::new().unwrap();
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("f")).unwrap();
        let r = Root::open(d.path()).unwrap();
        assert!(r.create_new("f", b"x", 0o644).is_err());
        assert_eq!(std::fs::read(outside.path()).unwrap(), b"");
    }

    #[test]
    fn a_file_already_there_is_left_as_it_was() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"the tree's").unwrap();
        let r = Root::open(d.path()).unwrap();
        let e = r.create_new("f", b"x", 0o755).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"the tree's");
    }
}
