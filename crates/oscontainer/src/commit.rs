//! Reading an ostree commit into plain data for the layer writers.
//!
//! Encapsulation needs the whole commit as data that can cross threads: the
//! serialized metadata objects (commit, commitmeta, dirtree, dirmeta), every
//! directory with its owner and mode, and every content object with its size,
//! owner, mode, xattrs and the paths that hardlink to it. glib objects are not
//! `Sync`, so this module turns them into plain Rust values once; layer
//! writers open their own repository handle to stream file content.
//!
//! This module reads repositories; it never writes one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ostree::gio;
use ostree::glib;

use crate::error::{Context, Error, Result};
use crate::tarball::Meta;

/// Opens an existing ostree repository.
pub(crate) fn open_repo(path: &Path) -> Result<ostree::Repo> {
    let repo = ostree::Repo::new_for_path(path);
    repo.open(gio::Cancellable::NONE)
        .context_with(|| format!("opening ostree repository {}", path.display()))?;
    Ok(repo)
}

/// ostree's file header: the length-prefixed `(uuuusa(ayay))` of uid,
/// gid, mode, rdev (0) and symlink target (empty for a file), integers
/// big-endian, then xattrs; the length big-endian, then 4 NULs. A content
/// object's checksum is the SHA-256 of this header, then the content.
pub fn file_header(uid: u32, gid: u32, mode: u32, target: &str, xattrs: &glib::Variant) -> Vec<u8> {
    use glib::prelude::*;
    let v = glib::Variant::tuple_from_iter([
        uid.to_be().to_variant(),
        gid.to_be().to_variant(),
        mode.to_be().to_variant(),
        0u32.to_variant(),
        target.to_variant(),
        xattrs.clone(),
    ]);
    let data = v.data();
    let mut out = Vec::with_capacity(8 + data.len());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(data);
    out
}

/// Hex checksum of a 32-byte checksum variant.
pub(crate) fn hex_checksum(bytes: &[u8]) -> Option<String> {
    (bytes.len() == 32).then(|| hex::encode(bytes))
}

/// What a content object is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    Regular { size: u64 },
    Symlink { target: String },
}

/// A content object of the commit.
#[derive(Debug, Clone)]
pub(crate) struct ContentObject {
    pub kind: ObjectKind,
    pub meta: Meta,
    /// Serialized `a(ayay)` xattrs.
    pub xattrs: Vec<u8>,
    /// Every path (relative, as in the commit, e.g. `usr/etc/os-release`) that
    /// is this object, in tree order.
    pub paths: Vec<String>,
}

impl ContentObject {
    /// Bytes this object adds to a layer (file size or symlink target).
    pub(crate) fn size(&self) -> u64 {
        match &self.kind {
            ObjectKind::Regular { size } => *size,
            ObjectKind::Symlink { target } => target.len() as u64,
        }
    }
}

/// A directory of the commit.
#[derive(Debug, Clone)]
pub(crate) struct DirEntry {
    /// Relative path; the root is `""`.
    pub path: String,
    pub dirtree: String,
    pub dirmeta: String,
    pub meta: Meta,
    /// Content objects directly in this directory: (name, checksum).
    pub files: Vec<(String, String)>,
}

/// Commit metadata strata cares about.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommitInfo {
    pub subject: String,
    pub timestamp: u64,
    pub version: Option<String>,
    pub bootable: Option<bool>,
    pub linux: Option<String>,
}

/// A whole commit as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CommitTree {
    pub checksum: String,
    pub commit: Vec<u8>,
    pub commitmeta: Option<Vec<u8>>,
    pub info: CommitInfo,
    /// Directories in walk order (parents before children, siblings sorted),
    /// starting with the root.
    pub dirs: Vec<DirEntry>,
    /// Serialized dirtree objects by checksum.
    pub dirtrees: BTreeMap<String, Vec<u8>>,
    /// Serialized dirmeta objects by checksum.
    pub dirmetas: BTreeMap<String, Vec<u8>>,
    /// Content objects by checksum.
    pub objects: BTreeMap<String, ContentObject>,
}

/// Parses the fields strata uses out of a serialized commit object.
pub(crate) fn parse_commit_info(commit: &glib::Variant) -> Result<(CommitInfo, String, String)> {
    let bad = |reason: &str| Error::BadCommit {
        commit: String::from("(object)"),
        reason: reason.to_string(),
    };
    let (meta, _parent, _related, subject, _body, timestamp, tree, dirmeta) = commit
        .try_get::<ostree::CommitVariantType>()
        .map_err(|e| bad(&format!("not a commit object: {e}")))?;
    let tree = hex_checksum(&tree).ok_or_else(|| bad("bad root dirtree checksum"))?;
    let dirmeta = hex_checksum(&dirmeta).ok_or_else(|| bad("bad root dirmeta checksum"))?;
    let info = CommitInfo {
        subject,
        timestamp: u64::from_be(timestamp),
        version: meta.lookup::<String>("version").ok().flatten(),
        bootable: meta.lookup::<bool>("ostree.bootable").ok().flatten(),
        linux: meta.lookup::<String>("ostree.linux").ok().flatten(),
    };
    Ok((info, tree, dirmeta))
}

fn load(repo: &ostree::Repo, kind: ostree::ObjectType, csum: &str) -> Result<glib::Variant> {
    repo.load_variant(kind, csum)
        .context_with(|| format!("loading {kind:?} object {csum}"))
}

fn dir_meta(v: &glib::Variant, csum: &str) -> Result<Meta> {
    let m = ostree::DirMetaParsed::from_variant(v).map_err(|e| Error::BadCommit {
        commit: csum.to_string(),
        reason: format!("bad dirmeta: {e}"),
    })?;
    Ok(Meta {
        uid: m.uid,
        gid: m.gid,
        mode: m.mode & 0o7777,
    })
}

/// Reads `rev` (a ref or checksum) from `repo` completely.
pub(crate) fn read_commit(repo: &ostree::Repo, rev: &str) -> Result<CommitTree> {
    let checksum = repo
        .resolve_rev(rev, false)
        .context_with(|| format!("resolving {rev}"))?
        .map(|c| c.to_string())
        .ok_or_else(|| Error::BadCommit {
            commit: rev.to_string(),
            reason: "no such ref or commit".into(),
        })?;
    let commit_v = load(repo, ostree::ObjectType::Commit, &checksum)?;
    let (info, root_tree, root_meta) = parse_commit_info(&commit_v).map_err(|e| match e {
        Error::BadCommit { reason, .. } => Error::BadCommit {
            commit: checksum.clone(),
            reason,
        },
        e => e,
    })?;
    let commitmeta = repo
        .read_commit_detached_metadata(&checksum, gio::Cancellable::NONE)
        .context_with(|| format!("reading detached metadata of {checksum}"))?
        .map(|v| v.data_as_bytes().to_vec());

    let mut tree = CommitTree {
        checksum: checksum.clone(),
        commit: commit_v.data_as_bytes().to_vec(),
        commitmeta,
        info,
        dirs: Vec::new(),
        dirtrees: BTreeMap::new(),
        dirmetas: BTreeMap::new(),
        objects: BTreeMap::new(),
    };
    let mut seen_files = BTreeSet::new();
    walk(
        repo,
        &mut tree,
        &mut seen_files,
        String::new(),
        root_tree,
        root_meta,
    )?;
    Ok(tree)
}

fn walk(
    repo: &ostree::Repo,
    tree: &mut CommitTree,
    seen: &mut BTreeSet<String>,
    path: String,
    dirtree: String,
    dirmeta: String,
) -> Result<()> {
    let meta_v = load(repo, ostree::ObjectType::DirMeta, &dirmeta)?;
    let meta = dir_meta(&meta_v, &dirmeta)?;
    tree.dirmetas
        .entry(dirmeta.clone())
        .or_insert_with(|| meta_v.data_as_bytes().to_vec());
    let tree_v = load(repo, ostree::ObjectType::DirTree, &dirtree)?;
    let (files, dirs) =
        tree_v
            .try_get::<ostree::TreeVariantType>()
            .map_err(|e| Error::BadCommit {
                commit: tree.checksum.clone(),
                reason: format!("dirtree {dirtree}: {e}"),
            })?;
    tree.dirtrees
        .entry(dirtree.clone())
        .or_insert_with(|| tree_v.data_as_bytes().to_vec());
    let join = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}/{name}")
        }
    };
    let mut entry_files = Vec::with_capacity(files.len());
    for (name, csum) in files {
        let csum = hex_checksum(&csum).ok_or_else(|| Error::BadCommit {
            commit: tree.checksum.clone(),
            reason: format!("bad checksum for {}", join(&name)),
        })?;
        let fpath = join(&name);
        if seen.insert(csum.clone()) {
            let obj = query_object(repo, &csum)?;
            tree.objects.insert(csum.clone(), obj);
        }
        if let Some(o) = tree.objects.get_mut(&csum) {
            o.paths.push(fpath);
        }
        entry_files.push((name, csum));
    }
    tree.dirs.push(DirEntry {
        path: path.clone(),
        dirtree,
        dirmeta,
        meta,
        files: entry_files,
    });
    for (name, sub_tree, sub_meta) in dirs {
        let bad = || Error::BadCommit {
            commit: tree.checksum.clone(),
            reason: format!("bad checksum for directory {}", join(&name)),
        };
        let sub_tree = hex_checksum(&sub_tree).ok_or_else(bad)?;
        let sub_meta = hex_checksum(&sub_meta).ok_or_else(bad)?;
        walk(repo, tree, seen, join(&name), sub_tree, sub_meta)?;
    }
    Ok(())
}

fn query_object(repo: &ostree::Repo, csum: &str) -> Result<ContentObject> {
    let (info, xattrs) = repo
        .query_file(csum, gio::Cancellable::NONE)
        .context_with(|| format!("reading content object {csum}"))?;
    let meta = Meta {
        uid: info.attribute_uint32("unix::uid"),
        gid: info.attribute_uint32("unix::gid"),
        mode: info.attribute_uint32("unix::mode") & 0o7777,
    };
    let kind = match info.file_type() {
        gio::FileType::Regular => ObjectKind::Regular {
            size: u64::try_from(info.size()).unwrap_or(0),
        },
        gio::FileType::SymbolicLink => {
            let target = info
                .symlink_target()
                .and_then(|t| t.to_str().map(str::to_string))
                .ok_or_else(|| Error::BadCommit {
                    commit: csum.to_string(),
                    reason: "symlink object without a UTF-8 target".into(),
                })?;
            ObjectKind::Symlink { target }
        }
        other => {
            return Err(Error::BadCommit {
                commit: csum.to_string(),
                reason: format!("unsupported content object type {other:?}"),
            })
        }
    };
    Ok(ContentObject {
        kind,
        meta,
        xattrs: xattrs.data_as_bytes().to_vec(),
        paths: Vec::new(),
    })
}
