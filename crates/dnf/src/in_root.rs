//! Paths below an install root, reached as the tree itself resolves them:
//! every symlink on the way, absolute ones too, resolves inside the root
//! (`openat2` with `RESOLVE_IN_ROOT`). A derived image installs over a base
//! that came from a registry; its symlinks must not lead what strata writes
//! or removes around the transaction out of the tree.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{mkdirat, openat, openat2, unlinkat, AtFlags, Mode, OFlags, ResolveFlags};

/// The install root, opened once for the lookups below it.
pub(crate) struct Root(File);

impl Root {
    pub(crate) fn open(root: &Path) -> io::Result<Root> {
        File::open(root).map(Root)
    }

    /// The directory `rel` (relative, `/`-separated; `""` is the root).
    fn dir(&self, rel: &str) -> io::Result<OwnedFd> {
        if rel.is_empty() {
            return Ok(self.0.try_clone()?.into());
        }
        Ok(openat2(
            &self.0,
            rel,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        )?)
    }

    /// Whether `rel` is a directory.
    pub(crate) fn has_dir(&self, rel: &str) -> bool {
        self.dir(rel).is_ok()
    }

    /// Makes the directory `rel` and the missing ones above it (mode 0755).
    pub(crate) fn create_dirs(&self, rel: &str) -> io::Result<()> {
        let mut upto: usize = 0;
        for part in rel.split('/') {
            let parent = &rel[..upto.saturating_sub(1)];
            upto += part.len() + 1;
            let here = &rel[..upto - 1];
            if self.has_dir(here) {
                continue;
            }
            match mkdirat(self.dir(parent)?, part, Mode::from_raw_mode(0o755)) {
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
    pub(crate) fn create_new(&self, rel: &str, content: &[u8], mode: u32) -> io::Result<()> {
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
    pub(crate) fn remove_file(&self, rel: &str) -> io::Result<()> {
        let (parent, name) = split(rel);
        Ok(unlinkat(self.dir(parent)?, name, AtFlags::empty())?)
    }

    /// Removes the directory `rel` if it is empty.
    pub(crate) fn remove_dir(&self, rel: &str) -> io::Result<()> {
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
