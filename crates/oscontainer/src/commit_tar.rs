//! The tar stream of an ostree commit's layers, in the format ostree-ext
//! (bootc, rpm-ostree) imports — facts taken from ostree-rs-ext 0.15
//! (`lib/src/tar/export.rs`, `tar/import.rs`):
//!
//! - Layer 0, the *commit layer*, starts with the root directory and the
//!   skeleton of a `bare-split-xattrs` repository under `sysroot/ostree/repo`
//!   (`objects/00`…`ff`, `refs/…`, `config`), then the commit object, its
//!   detached metadata (`.commitmeta`), then every `.dirtree`/`.dirmeta`
//!   object, with the tree's directories as ordinary tar directories. The
//!   first non-directory entry under `sysroot/ostree/repo/` other than
//!   `config` must be the `.commit`.
//! - Content objects are `sysroot/ostree/repo/objects/xx/yyyy.file` (a regular
//!   file with the object's uid/gid/mode, or a symlink), each preceded by a
//!   `.file-xattrs-link` hard link to a `.file-xattrs` object holding the
//!   serialized xattrs (named by their sha256; written once per layer). Each
//!   path of the object in the tree follows as a hard link to it, except
//!   empty regular files, which are written as empty files. `usr/etc` appears
//!   as `etc`; nothing is written under the commit's own `sysroot`.
//! - Layers 1..n (*chunks*) hold only content objects and their hard links.
//!
//! Entries come in a fixed order with mtime 0 (ostree content has no
//! mtimes): the same objects give the same bytes, which
//! [`crate::layer_cache`] relies on (bump its `FORMAT` with any change
//! here).

use std::collections::BTreeSet;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ostree::gio;
use ostree::prelude::*;
use sha2::{Digest as _, Sha256};

use crate::commit::{self, CommitTree, ContentObject, ObjectKind};
use crate::compress::{Compression, Encoder};
use crate::encapsulate::{Job, JobKind};
use crate::error::{Context, Error, Result};
use crate::layer_cache::WrittenLayer;
use crate::tarball::{Meta, TarWriter};

/// Where ostree objects live in the tar stream.
const REPO_DIR: &str = "sysroot/ostree/repo";
/// The repository config of a tar export (ostree-ext's `bare-split-xattrs`).
const REPO_CONFIG: &str = "[core]\nrepo_version=1\nmode=bare-split-xattrs\n";

/// A commit path as a container sees it: `usr/etc` is `etc`.
fn checkout_path(path: &str) -> &str {
    if path == "usr/etc" || path.starts_with("usr/etc/") {
        &path[4..]
    } else {
        path
    }
}

/// Paths under the commit's own `/sysroot` are not written as files: the tar
/// stream's `sysroot/` holds the object store.
fn in_sysroot(path: &str) -> bool {
    path == "sysroot" || path.starts_with("sysroot/")
}

/// Writes one layer blob.
pub(crate) fn write_layer(
    ocidir: &ocidir::OciDir,
    repo_path: &Path,
    tree: &CommitTree,
    job: &Job,
    compression: Compression,
) -> Result<WrittenLayer> {
    let what = match job.kind {
        JobKind::Commit => "commit layer".to_string(),
        JobKind::Chunk => format!("layer for {}", job.description),
    };
    let io = |e: std::io::Error| Error::Io {
        context: format!("writing {what}"),
        source: e,
    };
    let repo = commit::open_repo(repo_path)?;
    let lw = ocidir
        .create_custom_layer(|bw| Encoder::new(compression, bw), compression.media_type())
        .map_err(|source| Error::Layout {
            path: PathBuf::from("(layer)"),
            source,
        })?;
    let mut t = TarWriter::new(BufWriter::with_capacity(256 * 1024, lw), 0);
    let mut w = LayerContent {
        repo: &repo,
        tree,
        xattrs_written: BTreeSet::new(),
    };
    match job.kind {
        JobKind::Commit => w.commit_layer(&mut t, &job.objects)?,
        JobKind::Chunk => w.chunk_layer(&mut t, &job.objects)?,
    }
    let lw = t
        .finish()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    let layer = lw.complete().map_err(|source| Error::Layout {
        path: PathBuf::from("(layer)"),
        source,
    })?;
    Ok(WrittenLayer {
        digest: format!("sha256:{}", layer.blob.sha256().digest()),
        size: layer.blob.size(),
        diff_id: format!("sha256:{}", layer.uncompressed_sha256.digest()),
        media_type: layer.media_type.to_string(),
    })
}

/// Path of an object in the tar stream.
fn object_path(checksum: &str, ext: &str) -> String {
    format!(
        "{REPO_DIR}/objects/{}/{}.{ext}",
        &checksum[..2],
        &checksum[2..]
    )
}

struct LayerContent<'a> {
    repo: &'a ostree::Repo,
    tree: &'a CommitTree,
    xattrs_written: BTreeSet<String>,
}

impl LayerContent<'_> {
    fn io_ctx(&self, what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
        let what = what.to_string();
        move |source| Error::Io {
            context: format!("writing {what} of commit {}", self.tree.checksum),
            source,
        }
    }

    /// The repository skeleton; `all_shards` writes all 256 object
    /// directories, otherwise only those in `shards`.
    fn repo_structure<W: Write>(
        &self,
        t: &mut TarWriter<W>,
        shards: &BTreeSet<&str>,
        full: bool,
    ) -> Result<()> {
        let dir = Meta::root(0o755);
        let e = self.io_ctx("repository skeleton");
        for d in ["sysroot", "sysroot/ostree", REPO_DIR] {
            t.dir(d, dir).map_err(&e)?;
        }
        t.dir(&format!("{REPO_DIR}/objects"), dir).map_err(&e)?;
        if full {
            for i in 0..=255u8 {
                t.dir(&format!("{REPO_DIR}/objects/{i:02x}"), dir)
                    .map_err(&e)?;
            }
            for d in [
                "extensions",
                "refs",
                "refs/heads",
                "refs/mirrors",
                "refs/remotes",
                "state",
                "tmp",
                "tmp/cache",
            ] {
                t.dir(&format!("{REPO_DIR}/{d}"), dir).map_err(&e)?;
            }
            t.data(
                &format!("{REPO_DIR}/config"),
                Meta::root(0o644),
                REPO_CONFIG.as_bytes(),
            )
            .map_err(&e)?;
        } else {
            for s in shards {
                t.dir(&format!("{REPO_DIR}/objects/{s}"), dir).map_err(&e)?;
            }
        }
        Ok(())
    }

    fn commit_layer<W: Write>(
        &mut self,
        t: &mut TarWriter<W>,
        objects: &BTreeSet<&str>,
    ) -> Result<()> {
        let tree = self.tree;
        let e = |source| Error::Io {
            context: format!("writing the commit layer of commit {}", tree.checksum),
            source,
        };
        let root = tree.dirs.first().ok_or_else(|| Error::BadCommit {
            commit: tree.checksum.clone(),
            reason: "no root directory".into(),
        })?;
        t.dir("./", root.meta).map_err(&e)?;
        self.repo_structure(t, &BTreeSet::new(), true)?;
        let file = Meta::root(0o644);
        t.data(&object_path(&tree.checksum, "commit"), file, &tree.commit)
            .map_err(&e)?;
        if let Some(meta) = &tree.commitmeta {
            t.data(&object_path(&tree.checksum, "commitmeta"), file, meta)
                .map_err(&e)?;
        }
        let mut trees_done = BTreeSet::new();
        let mut metas_done = BTreeSet::new();
        let mut objects_done = BTreeSet::new();
        let mut has_var_tmp = false;
        for dir in &tree.dirs {
            if metas_done.insert(dir.dirmeta.as_str()) {
                t.data(
                    &object_path(&dir.dirmeta, "dirmeta"),
                    file,
                    &tree.dirmetas[&dir.dirmeta],
                )
                .map_err(&e)?;
            }
            if trees_done.insert(dir.dirtree.as_str()) {
                t.data(
                    &object_path(&dir.dirtree, "dirtree"),
                    file,
                    &tree.dirtrees[&dir.dirtree],
                )
                .map_err(&e)?;
            }
            has_var_tmp |= dir.path == "var/tmp";
            if !dir.path.is_empty() && !in_sysroot(&dir.path) {
                t.dir(checkout_path(&dir.path), dir.meta).map_err(&e)?;
            }
            for (_, csum) in &dir.files {
                if objects.contains(csum.as_str()) && objects_done.insert(csum.as_str()) {
                    self.object(t, csum)?;
                }
            }
        }
        if !has_var_tmp {
            // Container runtimes expect /var/tmp (ostree-ext does the same).
            t.dir("var/tmp", Meta::root(0o1777)).map_err(&e)?;
        }
        Ok(())
    }

    fn chunk_layer<W: Write>(
        &mut self,
        t: &mut TarWriter<W>,
        objects: &BTreeSet<&str>,
    ) -> Result<()> {
        let mut shards: BTreeSet<&str> = BTreeSet::new();
        let mut xattr_shards: BTreeSet<String> = BTreeSet::new();
        for csum in objects {
            shards.insert(&csum[..2]);
            let x = hex::encode(Sha256::digest(&self.tree.objects[*csum].xattrs));
            xattr_shards.insert(x[..2].to_string());
        }
        for s in &xattr_shards {
            shards.insert(s.as_str());
        }
        self.repo_structure(t, &shards, false)?;
        for csum in objects {
            self.object(t, csum)?;
        }
        Ok(())
    }

    /// A content object: its xattrs (once per layer), the xattrs link, the
    /// object, and its paths as hard links.
    fn object<W: Write>(&mut self, t: &mut TarWriter<W>, csum: &str) -> Result<()> {
        let tree = self.tree;
        let obj: &ContentObject = &tree.objects[csum];
        let e = |source| Error::Io {
            context: format!("writing object {csum} of commit {}", tree.checksum),
            source,
        };
        let xcsum = hex::encode(Sha256::digest(&obj.xattrs));
        let xpath = object_path(&xcsum, "file-xattrs");
        if self.xattrs_written.insert(xcsum.clone()) {
            t.data(&xpath, Meta::root(0o644), &obj.xattrs).map_err(e)?;
        }
        t.hardlink(
            &object_path(csum, "file-xattrs-link"),
            Meta::root(0o644),
            &xpath,
        )
        .map_err(e)?;
        let opath = object_path(csum, "file");
        match &obj.kind {
            ObjectKind::Regular { size } => {
                let (stream, _, _) = self
                    .repo
                    .load_file(csum, gio::Cancellable::NONE)
                    .context_with(|| format!("reading content object {csum}"))?;
                let stream = stream.ok_or_else(|| Error::BadCommit {
                    commit: tree.checksum.clone(),
                    reason: format!("object {csum} has no content stream"),
                })?;
                let mut r = stream.into_read();
                t.file(&opath, obj.meta, *size, &mut r as &mut dyn Read)
                    .map_err(e)?;
            }
            ObjectKind::Symlink { target } => {
                t.symlink(&opath, obj.meta, target).map_err(e)?;
            }
        }
        let empty_file = matches!(obj.kind, ObjectKind::Regular { size: 0 });
        for p in &obj.paths {
            if in_sysroot(p) {
                continue;
            }
            let p = checkout_path(p);
            if empty_file {
                // Hard links to empty files invite container builds to modify
                // the object in /sysroot; ostree-ext writes them as files.
                t.data(p, obj.meta, b"").map_err(e)?;
            } else {
                t.hardlink(p, obj.meta, &opath).map_err(e)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkout_paths() {
        assert_eq!(checkout_path("usr/etc/passwd"), "etc/passwd");
        assert_eq!(checkout_path("usr/etc"), "etc");
        assert_eq!(checkout_path("usr/etcx"), "usr/etcx");
        assert!(in_sysroot("sysroot/x") && in_sysroot("sysroot") && !in_sysroot("sysrootx"));
    }
}
