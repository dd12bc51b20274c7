//! What the derived layer holds: the overlay's upper dir, less what is no
//! change. Overlay copies a file up when it is opened for writing, so a
//! file rewritten to its old content (`/etc/passwd`) or a directory
//! emptied again would otherwise ride in the layer. Files are compared
//! with the base commit's own metadata, not the checkout's inodes.
//!
//! It only removes from the upper dir; it must not touch the base checkout
//! (the lower dir: its files are the repository's objects) or the repo.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// Removes from the upper dir what is not a change: files that overlay
/// copied up but that end as they were in the base (same content, mode and
/// owner — `/etc/passwd` rewritten to its old content), and directories
/// left empty that the base has too (copied up for a device node or `/var`
/// content that was removed again). Opaque directories stay: they hide
/// the base's content.
pub(crate) fn prune_unchanged(upper: &Path, lower: &Path, base: &BaseTree) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    fn same_file(a: &Path, b: &Path, rel: &Path, base: &BaseTree) -> Result<bool> {
        let (ma, mb) = match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
            (Ok(ma), Ok(mb)) => (ma, mb),
            _ => return Ok(false),
        };
        // The checkout's inode may differ from the commit (bare-user adds
        // an owner read bit): compare with the commit's own metadata.
        let Some((uid, gid, mode)) = base.meta(rel) else {
            return Ok(false);
        };
        let same_meta = ma.file_type().is_file()
            && mb.file_type().is_file()
            && ma.len() == mb.len()
            && ma.mode() & 0o7777 == mode & 0o7777
            && (ma.uid(), ma.gid()) == (uid, gid);
        Ok(same_meta && fs::read(a)? == fs::read(b)?)
    }
    fn walk(dir: &Path, upper: &Path, lower: &Path, base: &BaseTree) -> Result<bool> {
        let mut empty = true;
        let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let rel = path.strip_prefix(upper).expect("under upper");
            let in_lower = lower.join(rel);
            let ft = e.file_type()?;
            if ft.is_dir() {
                // An error reading the mark is no answer: an opaque
                // directory removed would show the base's content again.
                if walk(&path, upper, lower, base)?
                    && in_lower.is_dir()
                    && !in_lower.is_symlink()
                    && !strata_process::xattr::overlay_opaque(&path)?
                {
                    fs::remove_dir(&path)?;
                    continue;
                }
            } else if ft.is_file() && same_file(&path, &in_lower, rel, base)? {
                fs::remove_file(&path)?;
                continue;
            }
            empty = false;
        }
        Ok(empty)
    }
    walk(upper, upper, lower, base)?;
    Ok(())
}

/// uid, gid and mode of `rel` in the base commit (the checkout's inodes
/// carry the repository's owner, and an owner-read bit bare-user adds).
pub(crate) struct BaseTree {
    root: ostree::gio::File,
}

impl BaseTree {
    pub(crate) fn open(repo: &ostree::Repo, commit: &str) -> Result<Self> {
        let (root, _) = repo
            .read_commit(commit, ostree::gio::Cancellable::NONE)
            .with_context(|| format!("reading base commit {commit}"))?;
        Ok(Self { root })
    }

    fn meta(&self, rel: &Path) -> Option<(u32, u32, u32)> {
        use ostree::gio::prelude::FileExt;
        let info = self
            .root
            .resolve_relative_path(rel)
            .query_info(
                "unix::uid,unix::gid,unix::mode",
                ostree::gio::FileQueryInfoFlags::NOFOLLOW_SYMLINKS,
                ostree::gio::Cancellable::NONE,
            )
            .ok()?;
        Some((
            info.attribute_uint32("unix::uid"),
            info.attribute_uint32("unix::gid"),
            info.attribute_uint32("unix::mode"),
        ))
    }
}
