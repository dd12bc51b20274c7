//! OCI image → ostree commit.
//!
//! Reads an image in the ostree-ext container format (ours or any other
//! writer's) back into a repository. The ostree layers — the first layer up
//! to the one named by `ostree.final-diffid` — carry objects; importing them
//! reproduces the exact commit, which is then checked to be complete.
//! Layers after that are derived layers (plain tars with OCI whiteouts,
//! `.wh.NAME` and `.wh..wh..opq`); they are applied on top of the commit's
//! tree in memory (an ostree `MutableTree`, nothing is checked out), with
//! ostree-ext's rules for derived content: `etc` goes to `usr/etc`, `usr` and
//! `var` are kept, the children of `run`, `tmp`, `proc`, `sys`, `dev` and
//! every other top-level directory are dropped and counted. The result is a
//! new commit whose parent is the base commit.
//!
//! Input is untrusted until proven otherwise: every blob is checked against
//! its descriptor before the repository is touched, every object is written
//! with its expected checksum (libostree verifies), tar paths that are
//! absolute, contain `..`, or lead through a symlink are refused, and all
//! writes happen in one repository transaction that is aborted on error.
//! Nothing is written outside the repository.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use oci_spec::image::Descriptor;
use ostree::gio;
use ostree::glib;
use ostree::prelude::*;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::commit::{self, hex_checksum};
use crate::error::{Context, Error, Result};
use crate::labels::{parse_rfc3339, LABEL_COMMIT, LABEL_FINAL_DIFFID, LABEL_VERSION};
use crate::layout::{LayerCheck, Layout, ResolvedImage, DEFAULT_MAX_EXPANSION};
use crate::tarball::normalize_entry_path;
use crate::transport::{ImageRef, TransportOptions};

/// Largest metadata object accepted (libostree's limit).
const MAX_METADATA_SIZE: u64 = 10 * 1024 * 1024;
/// Largest xattrs object accepted.
const MAX_XATTRS_SIZE: u64 = 1024 * 1024;
/// Files up to this size are written in one call.
const SMALL_FILE: u64 = 127 * 1024;
/// Where objects live in an ostree layer.
const OBJECTS_PREFIX: &str = "sysroot/ostree/repo/objects/";
/// Top-level directories whose children derived layers may not add.
const EXCLUDED_TOPLEVEL: &[&str] = &["run", "tmp", "proc", "sys", "dev"];

/// How to import.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Point this ref at the resulting commit.
    pub ref_name: Option<String>,
    /// For `docker://` images.
    pub transport: TransportOptions,
    /// When the repository already holds the complete commit that the
    /// image's `ostree.commit` label names, take it as the base and read
    /// only the derived layers (derive and disk, whose base came from this
    /// workdir): the cost follows the derived layers, not the base.
    pub reuse_base: bool,
    /// How many times its compressed size a layer may expand to (plus
    /// 64 MiB); a layer that expands further is refused as hostile.
    /// Default [`DEFAULT_MAX_EXPANSION`].
    pub max_expansion: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            ref_name: None,
            transport: TransportOptions::default(),
            reuse_base: false,
            max_expansion: DEFAULT_MAX_EXPANSION,
        }
    }
}

/// What [`import`] produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// The resulting commit: the derived commit if the image has derived
    /// layers, else the base commit.
    pub commit: String,
    /// The commit the ostree layers carry.
    pub base_commit: String,
    /// The image's manifest digest.
    pub manifest_digest: String,
    /// How many derived layers were applied.
    pub derived_layers: usize,
    /// Derived-layer entries dropped, by top-level directory.
    pub filtered: BTreeMap<String, u32>,
}

/// How an image's layers split into ostree and derived layers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split {
    /// Index of the last ostree layer.
    pub last_ostree: usize,
}

/// Finds the ostree layers of an image from its `ostree.final-diffid` label.
pub(crate) fn split_layers(image: &ResolvedImage, name: &str) -> Result<Split> {
    let not = |reason: String| Error::NotOstreeImage {
        image: name.to_string(),
        reason,
    };
    let layers = image.manifest.layers();
    if layers.is_empty() {
        return Err(not("it has no layers".into()));
    }
    let diff_ids = image.config.rootfs().diff_ids();
    if diff_ids.len() != layers.len() {
        return Err(not(format!(
            "the config lists {} diff IDs for {} layers",
            diff_ids.len(),
            layers.len()
        )));
    }
    let final_diffid = labels_of(image)
        .get(LABEL_FINAL_DIFFID)
        .cloned()
        .ok_or_else(|| not(format!("no {LABEL_FINAL_DIFFID} label")))?;
    let last_ostree = diff_ids
        .iter()
        .position(|d| *d == final_diffid)
        .ok_or_else(|| {
            not(format!(
                "{LABEL_FINAL_DIFFID} {final_diffid} names no layer"
            ))
        })?;
    Ok(Split { last_ostree })
}

/// The config labels of an image.
pub(crate) fn labels_of(image: &ResolvedImage) -> HashMap<String, String> {
    image
        .config
        .config()
        .as_ref()
        .and_then(|c| c.labels().clone())
        .unwrap_or_default()
}

/// Imports `image` into the ostree repository at `repo` (which must exist).
pub fn import(image: &ImageRef, repo: &Path, opts: &ImportOptions) -> Result<Imported> {
    match image {
        ImageRef::Oci { dir, tag } => import_layout(dir, tag.as_deref(), repo, opts),
        ImageRef::Docker { .. } => {
            let tmp =
                tempfile::tempdir().context_with(|| "creating a temporary directory".into())?;
            let local = crate::transport::pull(image, tmp.path(), "import", &opts.transport)?;
            import(&local, repo, opts)
        }
    }
}

fn import_layout(
    dir: &Path,
    tag: Option<&str>,
    repo_path: &Path,
    opts: &ImportOptions,
) -> Result<Imported> {
    let name = ImageRef::Oci {
        dir: dir.to_path_buf(),
        tag: tag.map(str::to_string),
    }
    .to_string();
    let layout = Layout::open(dir)?;
    let image = layout.resolve(tag)?;
    let split = split_layers(&image, &name)?;
    let layers = image.manifest.layers();
    let labels = labels_of(&image);
    let repo = commit::open_repo(repo_path)?;
    let present = match labels.get(LABEL_COMMIT) {
        Some(c) if opts.reuse_base && commit_is_whole(&repo, c) => Some(c.clone()),
        _ => None,
    };
    // Check every blob that will be read before touching the repository.
    let read_from = if present.is_some() {
        split.last_ostree + 1
    } else {
        0
    };
    for l in &layers[read_from..] {
        layout.verify_blob(l)?;
    }

    let txn = repo
        .auto_transaction(gio::Cancellable::NONE)
        .context_with(|| format!("starting a transaction in {}", repo_path.display()))?;

    let base = match present {
        Some(c) => c,
        None => {
            // Chunks first, then the commit layer (layer 0).
            let mut objects = ObjectImporter::new(&repo);
            let check = |i| LayerCheck::of(&image, i, opts.max_expansion);
            for (i, l) in layers
                .iter()
                .enumerate()
                .take(split.last_ostree + 1)
                .skip(1)
            {
                objects.import_layer(&layout, l, check(i), false)?;
            }
            objects.import_layer(&layout, &layers[0], check(0), true)?;
            let base = objects.finish(&layers[0])?;
            verify_complete(&repo, &base)?;
            base
        }
    };
    if let Some(expected) = labels.get(LABEL_COMMIT) {
        if *expected != base {
            return Err(Error::NotOstreeImage {
                image: name,
                reason: format!("label {LABEL_COMMIT} is {expected} but the image carries {base}"),
            });
        }
    }

    let derived = &layers[split.last_ostree + 1..];
    let mut filtered = BTreeMap::new();
    let commit = if derived.is_empty() {
        base.clone()
    } else {
        let started = std::time::Instant::now();
        let mut tree = DerivedTree::new(&repo, &base)?;
        for (i, l) in derived.iter().enumerate() {
            let check = LayerCheck::of(&image, split.last_ostree + 1 + i, opts.max_expansion);
            tree.apply_layer(&layout, l, check)?;
        }
        tracing::debug!(elapsed = ?started.elapsed(), "derived layers applied");
        filtered = std::mem::take(&mut tree.filtered);
        let created = image.config.created().as_deref().and_then(parse_rfc3339);
        tree.commit(
            &base,
            labels.get(LABEL_VERSION).map(String::as_str),
            created,
        )?
    };
    if let Some(r) = &opts.ref_name {
        repo.transaction_set_ref(None, r, Some(&commit));
    }
    let t = std::time::Instant::now();
    txn.commit(gio::Cancellable::NONE)
        .context_with(|| format!("committing the import into {}", repo_path.display()))?;
    tracing::debug!(elapsed = ?t.elapsed(), "transaction committed");
    Ok(Imported {
        commit,
        base_commit: base,
        manifest_digest: image.manifest_digest,
        derived_layers: derived.len(),
        filtered,
    })
}

/// Where [`commit_streamed_layer`] writes, and what [`import`] would take
/// from the finished image's config.
#[derive(Debug, Clone)]
pub(crate) struct StreamedCommit {
    pub repo: PathBuf,
    /// The base commit (`ostree.commit`), whole in `repo`.
    pub base: String,
    /// `org.opencontainers.image.version`.
    pub version: Option<String>,
    /// The config's `created`, in seconds.
    pub created: Option<u64>,
    pub ref_name: Option<String>,
}

/// Builds the commit [`import`] (with `reuse_base`) would build from an
/// image made of the base plus one derived layer, reading that layer's tar
/// stream as it is written: the same [`DerivedTree`], without reading the
/// layer back or decompressing it. The transaction commits only when `go`
/// says true (the image is written); anything else drops it.
pub(crate) fn commit_streamed_layer(
    c: &StreamedCommit,
    tar: Box<dyn Read + Send>,
    go: std::sync::mpsc::Receiver<bool>,
) -> Result<String> {
    let repo = commit::open_repo(&c.repo)?;
    if !commit_is_whole(&repo, &c.base) {
        return Err(Error::BadCommit {
            commit: c.base.clone(),
            reason: format!("not (wholly) in {}", c.repo.display()),
        });
    }
    let txn = repo
        .auto_transaction(gio::Cancellable::NONE)
        .context_with(|| format!("starting a transaction in {}", c.repo.display()))?;
    let mut tree = DerivedTree::new(&repo, &c.base)?;
    // Named in errors: its digest is known only once it is written (and a
    // failure here falls back to importing it, which names the digest).
    let layer = String::from("the derived layer being written");
    tree.apply_tar(tar, &layer)?;
    let commit = tree.commit(&c.base, c.version.as_deref(), c.created)?;
    if go.recv() != Ok(true) {
        return Err(Error::InvalidOption(
            "the image was not written: derived commit dropped".into(),
        ));
    }
    if let Some(r) = &c.ref_name {
        repo.transaction_set_ref(None, r, Some(&commit));
    }
    txn.commit(gio::Cancellable::NONE)
        .context_with(|| format!("committing into {}", c.repo.display()))?;
    Ok(commit)
}

/// True when the repository holds `commit` and libostree does not mark it
/// partial. Objects reach the object store only when their transaction
/// commits (ours write the commit object with the rest), and pulls mark
/// what they leave unfinished, so this is libostree's own test of "every
/// object is here" — without reading the whole tree, whose cost would grow
/// with the base on every derive ([`verify_complete`] does that, once,
/// after an import).
fn commit_is_whole(repo: &ostree::Repo, commit: &str) -> bool {
    matches!(
        repo.load_commit(commit),
        Ok((_, state)) if !state.contains(ostree::RepoCommitState::PARTIAL)
    )
}

/// Reads every object of the commit, failing on the first one missing.
fn verify_complete(repo: &ostree::Repo, commit: &str) -> Result<()> {
    let incomplete = |reason: String| Error::BadCommit {
        commit: commit.to_string(),
        reason: format!("the image is incomplete: {reason}"),
    };
    let v = repo
        .load_variant(ostree::ObjectType::Commit, commit)
        .map_err(|e| incomplete(e.to_string()))?;
    let (_, tree, meta) = commit::parse_commit_info(&v)?;
    let mut stack = vec![(tree, meta)];
    let mut seen = std::collections::BTreeSet::new();
    while let Some((tree, meta)) = stack.pop() {
        for (kind, c) in [
            (ostree::ObjectType::DirMeta, &meta),
            (ostree::ObjectType::DirTree, &tree),
        ] {
            if !repo
                .has_object(kind, c, gio::Cancellable::NONE)
                .context_with(|| format!("checking object {c}"))?
            {
                return Err(incomplete(format!("{kind:?} object {c} is missing")));
            }
        }
        if !seen.insert(tree.clone()) {
            continue;
        }
        let tv = repo
            .load_variant(ostree::ObjectType::DirTree, &tree)
            .map_err(|e| incomplete(e.to_string()))?;
        let (files, dirs) = tv
            .try_get::<ostree::TreeVariantType>()
            .map_err(|e| incomplete(format!("dirtree {tree}: {e}")))?;
        for (name, csum) in files {
            let csum = hex_checksum(&csum)
                .ok_or_else(|| incomplete(format!("bad checksum for {name}")))?;
            if !repo
                .has_object(ostree::ObjectType::File, &csum, gio::Cancellable::NONE)
                .context_with(|| format!("checking object {csum}"))?
            {
                return Err(incomplete(format!(
                    "content object {csum} ({name}) is missing"
                )));
            }
        }
        for (name, t, m) in dirs {
            let bad = || incomplete(format!("bad checksum for directory {name}"));
            stack.push((
                hex_checksum(&t).ok_or_else(bad)?,
                hex_checksum(&m).ok_or_else(bad)?,
            ));
        }
    }
    Ok(())
}

/// Parses `xx/<62 hex>.<ext>` under the objects directory.
fn parse_object_path(rest: &str) -> Option<(String, &str)> {
    let (shard, name) = rest.split_once('/')?;
    let (hash, ext) = name.split_once('.')?;
    let checksum = format!("{shard}{hash}");
    let valid = shard.len() == 2
        && checksum.len() == 64
        && checksum
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    valid.then_some((checksum, ext))
}

/// How errors name a layer: by digest, or, for a layer still being
/// written, in words.
pub(crate) trait LayerName {
    fn layer_name(&self) -> String;
}

impl LayerName for Descriptor {
    fn layer_name(&self) -> String {
        self.digest().to_string()
    }
}

impl LayerName for String {
    fn layer_name(&self) -> String {
        self.clone()
    }
}

/// The normalized path of a tar entry of layer `desc`; one that would
/// leave the tree is refused, naming the layer.
fn entry_path<R: Read>(entry: &tar::Entry<R>, desc: &dyn LayerName) -> Result<String> {
    let raw = entry.path_bytes();
    normalize_entry_path(&raw).map_err(|reason| Error::UnsafeEntry {
        digest: desc.layer_name(),
        path: String::from_utf8_lossy(&raw).into_owned(),
        reason: reason.to_string(),
    })
}

fn bad_layer(desc: &dyn LayerName, reason: impl std::fmt::Display) -> Error {
    Error::BadLayer {
        digest: desc.layer_name(),
        reason: reason.to_string(),
    }
}

fn read_limited(
    entry: &mut impl Read,
    size: u64,
    limit: u64,
    desc: &Descriptor,
    what: &str,
) -> Result<Vec<u8>> {
    if size > limit {
        return Err(bad_layer(
            desc,
            format!("{what}: {size} bytes exceeds the limit of {limit}"),
        ));
    }
    let mut buf = Vec::with_capacity(size as usize);
    entry
        .read_to_end(&mut buf)
        .map_err(|e| bad_layer(desc, format!("reading {what}: {e}")))?;
    if buf.len() as u64 != size {
        return Err(bad_layer(desc, format!("{what}: truncated")));
    }
    Ok(buf)
}

/// Imports the objects of ostree layers.
struct ObjectImporter<'r> {
    repo: &'r ostree::Repo,
    /// xattrs by their sha256, per layer.
    xattrs: HashMap<String, glib::Variant>,
    /// The `.file-xattrs-link` seen last: (object, xattrs checksum).
    pending: Option<(String, String)>,
    commit: Option<String>,
    commitmeta: Option<(String, glib::Variant)>,
}

impl<'r> ObjectImporter<'r> {
    fn new(repo: &'r ostree::Repo) -> Self {
        Self {
            repo,
            xattrs: HashMap::new(),
            pending: None,
            commit: None,
            commitmeta: None,
        }
    }

    fn import_layer(
        &mut self,
        layout: &Layout,
        desc: &Descriptor,
        check: LayerCheck,
        commit_layer: bool,
    ) -> Result<()> {
        self.xattrs.clear();
        self.pending = None;
        let reader = layout.open_layer(desc, check)?;
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries().map_err(|e| bad_layer(desc, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad_layer(desc, format!("reading tar: {e}")))?;
            let path = entry_path(&entry, desc)?;
            let kind = entry.header().entry_type();
            if kind.is_dir() {
                continue;
            }
            let Some(rest) = path.strip_prefix(OBJECTS_PREFIX) else {
                // Checkout hard links, the repo config, refs: not objects.
                continue;
            };
            let (checksum, ext) = parse_object_path(rest)
                .ok_or_else(|| bad_layer(desc, format!("invalid object path {path}")))?;
            self.object(&mut entry, desc, &checksum, ext, commit_layer)
                .map_err(|e| match e {
                    Error::Ostree { context, source } => Error::Ostree {
                        context: format!("layer {}: {context}", desc.digest()),
                        source,
                    },
                    e => e,
                })?;
        }
        // Reading to the end also checks the compression trailer (CRC).
        let mut rest = archive.into_inner();
        std::io::copy(&mut rest, &mut std::io::sink())
            .map_err(|e| bad_layer(desc, format!("reading to the end: {e}")))?;
        if let Some((obj, _)) = &self.pending {
            return Err(bad_layer(
                desc,
                format!("xattrs link for {obj} without the object"),
            ));
        }
        Ok(())
    }

    fn object<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        desc: &Descriptor,
        checksum: &str,
        ext: &str,
        commit_layer: bool,
    ) -> Result<()> {
        let header = entry.header().clone();
        let size = entry.size();
        let kind = header.entry_type();
        let metadata = |entry: &mut tar::Entry<R>, what: &str| -> Result<Vec<u8>> {
            if kind != tar::EntryType::Regular {
                return Err(bad_layer(
                    desc,
                    format!("{what} {checksum} is not a regular file"),
                ));
            }
            read_limited(entry, size, MAX_METADATA_SIZE, desc, what)
        };
        match ext {
            "commit" => {
                if !commit_layer {
                    return Err(bad_layer(desc, "a commit object outside the first layer"));
                }
                if self.commit.is_some() {
                    return Err(bad_layer(desc, "more than one commit object"));
                }
                let data = metadata(entry, "commit")?;
                self.write_metadata(ostree::ObjectType::Commit, checksum, &data)?;
                self.commit = Some(checksum.to_string());
            }
            "commitmeta" => {
                let data = metadata(entry, "commitmeta")?;
                let v = glib::Variant::from_data_with_type(data, glib::VariantTy::VARDICT);
                self.commitmeta = Some((checksum.to_string(), v.normal_form()));
            }
            "dirtree" => {
                let data = metadata(entry, "dirtree")?;
                self.write_metadata(ostree::ObjectType::DirTree, checksum, &data)?;
            }
            "dirmeta" => {
                let data = metadata(entry, "dirmeta")?;
                self.write_metadata(ostree::ObjectType::DirMeta, checksum, &data)?;
            }
            "file-xattrs" => {
                if kind != tar::EntryType::Regular {
                    return Err(bad_layer(
                        desc,
                        format!("xattrs {checksum} is not a regular file"),
                    ));
                }
                let data = read_limited(entry, size, MAX_XATTRS_SIZE, desc, "xattrs")?;
                self.cache_xattrs(desc, data, Some(checksum))?;
            }
            "file-xattrs-link" => {
                if let Some((prev, _)) = &self.pending {
                    return Err(bad_layer(
                        desc,
                        format!("xattrs link for {prev} without the object"),
                    ));
                }
                let xattrs = match kind {
                    tar::EntryType::Link => {
                        let target = entry
                            .link_name_bytes()
                            .map(|l| String::from_utf8_lossy(&l).into_owned())
                            .unwrap_or_default();
                        // The target is `…/objects/xx/<rest>.file-xattrs`.
                        let tail: Vec<&str> = target.rsplitn(3, '/').collect();
                        let joined = match tail.as_slice() {
                            [name, shard, ..] => format!("{shard}/{name}"),
                            _ => String::new(),
                        };
                        match parse_object_path(&joined) {
                            Some((x, "file-xattrs")) => x,
                            _ => {
                                return Err(bad_layer(
                                    desc,
                                    format!("bad xattrs link target {target:?}"),
                                ))
                            }
                        }
                    }
                    tar::EntryType::Regular => {
                        let data = read_limited(entry, size, MAX_XATTRS_SIZE, desc, "xattrs")?;
                        self.cache_xattrs(desc, data, None)?
                    }
                    other => return Err(bad_layer(desc, format!("xattrs link of type {other:?}"))),
                };
                self.pending = Some((checksum.to_string(), xattrs));
            }
            "file" => self.content(entry, desc, checksum, &header)?,
            other => return Err(bad_layer(desc, format!("unknown object type .{other}"))),
        }
        Ok(())
    }

    fn cache_xattrs(
        &mut self,
        desc: &Descriptor,
        data: Vec<u8>,
        expected: Option<&str>,
    ) -> Result<String> {
        let sum = hex::encode(Sha256::digest(&data));
        if let Some(e) = expected {
            if e != sum {
                return Err(bad_layer(
                    desc,
                    format!("xattrs object {e} hashes to {sum}"),
                ));
            }
        }
        let ty = glib::VariantTy::new("a(ayay)").map_err(|e| bad_layer(desc, e))?;
        let v = glib::Variant::from_data_with_type(data, ty);
        self.xattrs.insert(sum.clone(), v.normal_form());
        Ok(sum)
    }

    fn write_metadata(&self, kind: ostree::ObjectType, checksum: &str, data: &[u8]) -> Result<()> {
        let ty = ostree::metadata_variant_type(kind);
        let v = glib::Variant::from_data_with_type(data, &ty).normal_form();
        self.repo
            .write_metadata(kind, Some(checksum), &v, gio::Cancellable::NONE)
            .context_with(|| format!("writing {kind:?} object {checksum}"))?;
        Ok(())
    }

    fn content<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        desc: &Descriptor,
        checksum: &str,
        header: &tar::Header,
    ) -> Result<()> {
        let xattrs = match self.pending.take() {
            Some((obj, x)) if obj == checksum => self.xattrs.get(&x).cloned().ok_or_else(|| {
                bad_layer(desc, format!("xattrs {x} of {checksum} not in the layer"))
            })?,
            Some((obj, _)) => {
                return Err(bad_layer(
                    desc,
                    format!("xattrs link for {obj} followed by object {checksum}"),
                ))
            }
            // Not in the format, but a checksum check below catches any
            // object whose xattrs were really lost.
            None => empty_xattrs(),
        };
        if self
            .repo
            .has_object(ostree::ObjectType::File, checksum, gio::Cancellable::NONE)
            .context_with(|| format!("checking object {checksum}"))?
        {
            return Ok(());
        }
        let bad = |e: std::io::Error| bad_layer(desc, format!("tar header of {checksum}: {e}"));
        let uid = u32::try_from(header.uid().map_err(bad)?).map_err(|e| bad_layer(desc, e))?;
        let gid = u32::try_from(header.gid().map_err(bad)?).map_err(|e| bad_layer(desc, e))?;
        let mode = header.mode().map_err(bad)? & 0o7777;
        let ctx = || format!("writing content object {checksum}");
        match header.entry_type() {
            tar::EntryType::Regular => {
                let size = entry.size();
                if size <= SMALL_FILE {
                    let data = read_limited(entry, size, SMALL_FILE, desc, "file")?;
                    self.repo
                        .write_regfile_inline(
                            Some(checksum),
                            uid,
                            gid,
                            libc_s_ifreg() | mode,
                            Some(&xattrs),
                            &data,
                            gio::Cancellable::NONE,
                        )
                        .context_with(ctx)?;
                } else {
                    let w = self
                        .repo
                        .write_regfile(
                            Some(checksum),
                            uid,
                            gid,
                            libc_s_ifreg() | mode,
                            size,
                            Some(&xattrs),
                        )
                        .context_with(ctx)?;
                    stream_content(entry, &w, size, desc, checksum)?;
                    w.finish(gio::Cancellable::NONE).context_with(ctx)?;
                }
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| bad_layer(desc, format!("symlink {checksum} without target")))?;
                let target = std::str::from_utf8(&target)
                    .map_err(|_| bad_layer(desc, format!("symlink {checksum}: target not UTF-8")))?
                    .to_string();
                self.repo
                    .write_symlink(
                        Some(checksum),
                        uid,
                        gid,
                        Some(&xattrs),
                        &target,
                        gio::Cancellable::NONE,
                    )
                    .context_with(ctx)?;
            }
            other => return Err(bad_layer(desc, format!("object {checksum} is a {other:?}"))),
        }
        Ok(())
    }

    /// The commit checksum, after writing its detached metadata.
    fn finish(self, commit_layer: &Descriptor) -> Result<String> {
        let commit = self
            .commit
            .ok_or_else(|| bad_layer(commit_layer, "no commit object in the first layer"))?;
        if let Some((c, meta)) = &self.commitmeta {
            if *c != commit {
                return Err(bad_layer(
                    commit_layer,
                    format!("detached metadata for {c}, not {commit}"),
                ));
            }
            self.repo
                .write_commit_detached_metadata(&commit, Some(meta), gio::Cancellable::NONE)
                .context_with(|| format!("writing detached metadata of {commit}"))?;
        }
        Ok(commit)
    }
}

/// Copies `size` bytes of a tar entry into an ostree content writer.
fn stream_content(
    entry: &mut impl Read,
    w: &ostree::ContentWriter,
    size: u64,
    desc: &dyn LayerName,
    what: &str,
) -> Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut left = size;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = entry
            .read(&mut buf[..want])
            .map_err(|e| bad_layer(desc, format!("reading {what}: {e}")))?;
        if n == 0 {
            return Err(bad_layer(desc, format!("{what}: truncated")));
        }
        w.write_all(&buf[..n], gio::Cancellable::NONE)
            .context_with(|| format!("writing {what}"))?;
        left -= n as u64;
    }
    Ok(())
}

pub(crate) fn libc_s_ifreg() -> u32 {
    0o100000
}
pub(crate) fn libc_s_ifdir() -> u32 {
    0o040000
}
pub(crate) fn libc_s_iflnk() -> u32 {
    0o120000
}

/// Where a derived-layer path lands in the commit, per ostree-ext's rules.
#[derive(Debug, PartialEq, Eq)]
enum Placement {
    /// Into the tree at this path.
    Keep(String),
    /// Dropped, counted under this top-level directory.
    Filtered(String),
}

fn place(path: &str) -> Placement {
    let (top, rest) = match path.split_once('/') {
        Some((t, r)) => (t, Some(r)),
        None => (path, None),
    };
    match top {
        "usr" | "var" => Placement::Keep(path.to_string()),
        "etc" => Placement::Keep(match rest {
            Some(r) => format!("usr/etc/{r}"),
            None => "usr/etc".to_string(),
        }),
        t if EXCLUDED_TOPLEVEL.contains(&t) => match rest {
            None => Placement::Keep(t.to_string()),
            Some(_) => Placement::Filtered(t.to_string()),
        },
        t => Placement::Filtered(t.to_string()),
    }
}

/// The tree of a derived commit being built from a base commit plus layers.
struct DerivedTree<'r> {
    repo: &'r ostree::Repo,
    root: ostree::MutableTree,
    default_dirmeta: String,
    filtered: BTreeMap<String, u32>,
    /// The base commit's metadata (`a{sv}`).
    base_meta: glib::Variant,
    /// The base's SELinux policy, when it has one: layer content is labeled
    /// by it as it is added ([`Self::fix_up`] checks every path at the end).
    policy: Option<ostree::SePolicy>,
    /// Whether a layer added or removed anything under `usr/etc/selinux`
    /// (then the merged tree's policy labels it, not the base's).
    policy_changed: bool,
}

/// Where a tree keeps its SELinux policy.
const POLICY_DIR: &str = "usr/etc/selinux";

/// What is at a path.
enum Node {
    Missing,
    File(String),
    Dir(ostree::MutableTree),
}

impl<'r> DerivedTree<'r> {
    fn new(repo: &'r ostree::Repo, base: &str) -> Result<Self> {
        let root = ostree::MutableTree::from_commit(repo, base)
            .context_with(|| format!("loading the tree of {base}"))?;
        let default_dirmeta = write_dirmeta(repo, 0, 0, 0o755, None)?;
        let (v, _) = repo
            .load_commit(base)
            .context_with(|| format!("loading commit {base}"))?;
        let base_meta = v.child_value(0);
        Ok(Self {
            repo,
            root,
            default_dirmeta,
            filtered: BTreeMap::new(),
            base_meta,
            policy: enabled_policy(repo, base)?,
            policy_changed: false,
        })
    }

    fn lookup(dir: &ostree::MutableTree, name: &str) -> Result<Node> {
        match dir.lookup(name) {
            Ok((_, Some(sub))) => Ok(Node::Dir(sub)),
            Ok((Some(file), None)) => Ok(Node::File(file.to_string())),
            Ok((None, None)) => Ok(Node::Missing),
            Err(e) if e.matches(gio::IOErrorEnum::NotFound) => Ok(Node::Missing),
            Err(e) => Err(e).context_with(|| format!("looking up {name}")),
        }
    }

    /// The directory holding `path`'s last component; with `create`, missing
    /// parents are created (root:root 0755). A parent that is not a
    /// directory (a symlink above all) is refused.
    fn parent(
        &self,
        desc: &dyn LayerName,
        path: &str,
        create: bool,
    ) -> Result<Option<(ostree::MutableTree, String)>> {
        let mut parts: Vec<&str> = path.split('/').collect();
        let name = parts.pop().unwrap_or_default().to_string();
        let mut cur = self.root.clone();
        for (i, part) in parts.iter().enumerate() {
            cur = match Self::lookup(&cur, part)? {
                Node::Dir(d) => d,
                Node::File(_) => {
                    return Err(Error::UnsafeEntry {
                        digest: desc.layer_name(),
                        path: path.to_string(),
                        reason: format!(
                            "{} is not a directory (writing through a symlink?)",
                            parts[..=i].join("/")
                        ),
                    })
                }
                Node::Missing if create => {
                    let d = cur
                        .ensure_dir(part)
                        .context_with(|| format!("creating {part}"))?;
                    d.set_metadata_checksum(&self.default_dirmeta);
                    d
                }
                Node::Missing => return Ok(None),
            };
        }
        Ok(Some((cur, name)))
    }

    /// Applies one layer in a single read of it. Whiteouts hide the layers
    /// below only, wherever they stand in the tar: a whiteout of a path
    /// this layer has already added spares what the layer added (see
    /// [`Self::whiteout`]), which is what applying all whiteouts first and
    /// the content after would give.
    fn apply_layer(&mut self, layout: &Layout, desc: &Descriptor, check: LayerCheck) -> Result<()> {
        self.apply_tar(layout.open_layer(desc, check)?, desc)
    }

    /// [`Self::apply_layer`] of the tar stream `reader` of layer `desc`.
    fn apply_tar(&mut self, reader: Box<dyn Read + Send>, desc: &dyn LayerName) -> Result<()> {
        let mut added = HashSet::new();
        self.each_entry(reader, desc, |tree, entry, path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            if is_policy_path(path) {
                tree.policy_changed = true;
            }
            if name.starts_with(".wh.") {
                tree.whiteout(desc, path, &added)
            } else if let Some(kept) = tree.add(desc, entry, path)? {
                // The path and its parents now hold this layer's content.
                let mut p = kept.as_str();
                while added.insert(p.to_string()) {
                    match p.rsplit_once('/') {
                        Some((parent, _)) => p = parent,
                        None => break,
                    }
                }
                Ok(())
            } else {
                Ok(())
            }
        })
    }

    /// Removes from `dir` (at `path`) everything this layer has not added,
    /// keeping what it has.
    fn keep_only_added(
        dir: &ostree::MutableTree,
        path: &str,
        added: &HashSet<String>,
    ) -> Result<()> {
        let files = dir.copy_files();
        let dirs = dir.copy_subdirs();
        for name in files.keys().chain(dirs.keys()) {
            let child = format!("{path}/{name}");
            if !added.contains(&child) {
                dir.remove(name, true)
                    .context_with(|| format!("removing {child}"))?;
            }
        }
        for (name, sub) in dirs {
            let child = format!("{path}/{name}");
            if added.contains(&child) {
                Self::keep_only_added(&sub, &child, added)?;
            }
        }
        Ok(())
    }

    fn each_entry(
        &mut self,
        reader: Box<dyn Read + Send>,
        desc: &dyn LayerName,
        mut f: impl FnMut(&mut Self, &mut tar::Entry<'_, Box<dyn Read + Send>>, &str) -> Result<()>,
    ) -> Result<()> {
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries().map_err(|e| bad_layer(desc, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad_layer(desc, format!("reading tar: {e}")))?;
            let path = entry_path(&entry, desc)?;
            if path.is_empty() {
                continue;
            }
            f(self, &mut entry, &path)?;
        }
        let mut rest = archive.into_inner();
        std::io::copy(&mut rest, &mut std::io::sink())
            .map_err(|e| bad_layer(desc, format!("reading to the end: {e}")))?;
        Ok(())
    }

    /// Applies the whiteout entry at `path` to the layers below: the
    /// victim goes, except for what this layer has `added` (a directory it
    /// added keeps only its own content).
    fn whiteout(
        &mut self,
        desc: &dyn LayerName,
        path: &str,
        added: &HashSet<String>,
    ) -> Result<()> {
        let (dir, name) = match path.rsplit_once('/') {
            Some((d, n)) => (Some(d), n),
            None => (None, path),
        };
        let Some(target) = name.strip_prefix(".wh.") else {
            return Ok(());
        };
        let opaque = target == ".wh..opq";
        let victim = match (dir, opaque) {
            (Some(d), true) => d.to_string(),
            (None, true) => return Ok(()), // opaque root: nothing sensible to do
            (Some(d), false) => format!("{d}/{target}"),
            (None, false) => target.to_string(),
        };
        if target.is_empty() || target == "." || target == ".." {
            return Err(Error::UnsafeEntry {
                digest: desc.layer_name(),
                path: path.to_string(),
                reason: "invalid whiteout".into(),
            });
        }
        let victim = match place(&victim) {
            Placement::Keep(p) => p,
            Placement::Filtered(_) => return Ok(()),
        };
        let Some((parent, name)) = self.parent(desc, &victim, false)? else {
            return Ok(());
        };
        if opaque || added.contains(&victim) {
            match Self::lookup(&parent, &name)? {
                Node::Dir(d) => Self::keep_only_added(&d, &victim, added)?,
                // A file this layer added stays; an opaque marker in a
                // directory that is not one has nothing to hide.
                Node::File(_) | Node::Missing => {}
            }
        } else {
            parent
                .remove(&name, true)
                .context_with(|| format!("removing {victim}"))?;
        }
        Ok(())
    }

    /// Adds the entry at `path`; the path it went to, unless filtered.
    fn add<R: Read>(
        &mut self,
        desc: &dyn LayerName,
        entry: &mut tar::Entry<R>,
        path: &str,
    ) -> Result<Option<String>> {
        let base = path.rsplit('/').next().unwrap_or(path);
        if base.starts_with(".wh.") {
            return Ok(None);
        }
        let path = match place(path) {
            Placement::Keep(p) => p,
            Placement::Filtered(top) => {
                *self.filtered.entry(top).or_default() += 1;
                return Ok(None);
            }
        };
        let header = entry.header().clone();
        let bad = |e: std::io::Error| bad_layer(desc, format!("tar header of {path}: {e}"));
        let uid = u32::try_from(header.uid().map_err(bad)?).map_err(|e| bad_layer(desc, e))?;
        let gid = u32::try_from(header.gid().map_err(bad)?).map_err(|e| bad_layer(desc, e))?;
        let mode = header.mode().map_err(bad)? & 0o7777;
        let xattrs =
            pax_xattrs(entry).map_err(|e| bad_layer(desc, format!("xattrs of {path}: {e}")))?;
        let (parent, name) = self
            .parent(desc, &path, true)?
            .ok_or_else(|| bad_layer(desc, format!("cannot create the parent of {path}")))?;
        let existing = Self::lookup(&parent, &name)?;
        let ctx = || format!("adding {path}");
        let kind = header.entry_type();
        if kind.is_dir() {
            let xattrs = self.labeled(xattrs, &path, libc_s_ifdir() | mode)?;
            let meta = write_dirmeta(self.repo, uid, gid, mode, xattrs.as_ref())?;
            let dir = match existing {
                Node::Dir(d) => d,
                Node::File(_) => {
                    parent.remove(&name, false).context_with(ctx)?;
                    parent.ensure_dir(&name).context_with(ctx)?
                }
                Node::Missing => parent.ensure_dir(&name).context_with(ctx)?,
            };
            dir.set_metadata_checksum(&meta);
            return Ok(Some(path));
        }
        let type_bits = match kind {
            tar::EntryType::Symlink => libc_s_iflnk(),
            _ => libc_s_ifreg(),
        };
        let xattrs = self
            .labeled(xattrs, &path, type_bits | mode)?
            .unwrap_or_else(empty_xattrs);
        let checksum = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.size();
                let w = self
                    .repo
                    .write_regfile(None, uid, gid, libc_s_ifreg() | mode, size, Some(&xattrs))
                    .context_with(ctx)?;
                stream_content(entry, &w, size, desc, &path)?;
                w.finish(gio::Cancellable::NONE)
                    .context_with(ctx)?
                    .to_string()
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| bad_layer(desc, format!("symlink {path} without target")))?;
                let target = std::str::from_utf8(&target)
                    .map_err(|_| bad_layer(desc, format!("symlink {path}: target not UTF-8")))?
                    .to_string();
                self.repo
                    .write_symlink(
                        None,
                        uid,
                        gid,
                        Some(&xattrs),
                        &target,
                        gio::Cancellable::NONE,
                    )
                    .context_with(ctx)?
                    .to_string()
            }
            tar::EntryType::Link => {
                let raw = entry
                    .link_name_bytes()
                    .ok_or_else(|| bad_layer(desc, format!("hard link {path} without target")))?;
                let unsafe_target = |reason: String| Error::UnsafeEntry {
                    digest: desc.layer_name(),
                    path: format!("{path} -> {}", String::from_utf8_lossy(&raw)),
                    reason,
                };
                let target =
                    normalize_entry_path(&raw).map_err(|r| unsafe_target(r.to_string()))?;
                let target = match place(&target) {
                    Placement::Keep(t) => t,
                    Placement::Filtered(_) => {
                        return Err(unsafe_target(
                            "hard link to content outside the image tree".into(),
                        ))
                    }
                };
                let found = match self.parent(desc, &target, false)? {
                    Some((p, n)) => Self::lookup(&p, &n)?,
                    None => Node::Missing,
                };
                match found {
                    Node::File(c) => c,
                    _ => {
                        return Err(unsafe_target(
                            "hard link target is not a file in the tree".into(),
                        ))
                    }
                }
            }
            other => {
                return Err(bad_layer(
                    desc,
                    format!("{path}: {other:?} entries cannot be stored in ostree"),
                ))
            }
        };
        if let Node::Dir(_) = existing {
            parent.remove(&name, false).context_with(ctx)?;
        }
        parent.replace_file(&name, &checksum).context_with(ctx)?;
        Ok(Some(path))
    }

    /// Writes the tree as it stands (on `base`); its root.
    fn write_root(&self, base: &str) -> Result<ostree::RepoFile> {
        let root = self
            .repo
            .write_mtree(&self.root, gio::Cancellable::NONE)
            .context_with(|| "writing the derived tree".into())?;
        root.downcast::<ostree::RepoFile>()
            .map_err(|_| Error::BadCommit {
                commit: base.to_string(),
                reason: "write_mtree did not return a repository file".into(),
            })
    }

    /// The policy that labels the merged tree, if it has one enabled: the
    /// base's, or, when the layers changed it, the merged tree's own (read
    /// from a commit of the tree as it stands).
    fn policy(&self, base: &str) -> Result<Option<ostree::SePolicy>> {
        if !self.policy_changed {
            return Ok(self.policy.clone());
        }
        let rev = {
            let root = self.write_root(base)?;
            self.repo
                .write_commit_with_time(None, None, None, None, &root, 0, gio::Cancellable::NONE)
                .context_with(|| "writing the merged tree's policy commit".into())?
                .to_string()
        };
        enabled_policy(self.repo, &rev)
    }

    /// `xattrs` of the layer entry at `path` (tar-relative) with `mode`
    /// (type bits included), labeled by the base's policy when it has one.
    fn labeled(
        &self,
        xattrs: Option<glib::Variant>,
        path: &str,
        mode: u32,
    ) -> Result<Option<glib::Variant>> {
        let Some(policy) = &self.policy else {
            return Ok(xattrs);
        };
        let absolute = format!("/{path}");
        let label = policy
            .label(&absolute, mode, gio::Cancellable::NONE)
            .context_with(|| format!("labeling {absolute}"))?;
        let pairs = xattrs
            .as_ref()
            .and_then(|x| x.get::<Vec<(Vec<u8>, Vec<u8>)>>())
            .unwrap_or_default();
        Ok(match relabeled(pairs, label) {
            Some(new) => Some(new.to_variant()),
            None => xattrs,
        })
    }

    /// Brings every file under `dir` (at absolute `path`) to what
    /// ostree-ext's client commits for a merged tree, in one walk:
    /// - the client commits a user-mode checkout of the base with the layers
    ///   on top; a file its checkout cannot hard-link (one its owner may not
    ///   read, like a mode-0000 `/etc/shadow`) comes back with the owner
    ///   read bit set;
    /// - with a `policy` (the merged tree has one), it labels every path by
    ///   the policy, keeping the other xattrs.
    fn fix_up(
        &self,
        dir: &ostree::MutableTree,
        path: &str,
        policy: Option<&ostree::SePolicy>,
    ) -> Result<()> {
        let label = |p: &str, mode: u32| -> Result<Option<glib::GString>> {
            match policy {
                Some(policy) => policy
                    .label(p, mode, gio::Cancellable::NONE)
                    .context_with(|| format!("labeling {p}")),
                None => Ok(None),
            }
        };
        if policy.is_some() {
            let meta = dir.metadata_checksum();
            let v = self
                .repo
                .load_variant(ostree::ObjectType::DirMeta, &meta)
                .context_with(|| format!("loading directory metadata {meta}"))?;
            let (uid, gid, mode, xattrs) = v
                .get::<(u32, u32, u32, Vec<(Vec<u8>, Vec<u8>)>)>()
                .ok_or_else(|| Error::BadCommit {
                    commit: meta.to_string(),
                    reason: "malformed directory metadata".into(),
                })?;
            let (uid, gid, mode) = (u32::from_be(uid), u32::from_be(gid), u32::from_be(mode));
            if let Some(new) = relabeled(xattrs, label(path, mode)?) {
                let c = write_dirmeta(self.repo, uid, gid, mode & 0o7777, Some(&new.to_variant()))?;
                dir.set_metadata_checksum(&c);
            }
        }
        for (name, csum) in dir.copy_files() {
            let child = format!("{}/{name}", path.trim_end_matches('/'));
            let ctx = || format!("rewriting {child}");
            let (stream, info, xattrs) = self
                .repo
                .load_file(&csum, gio::Cancellable::NONE)
                .context_with(ctx)?;
            let mode = info.attribute_uint32("unix::mode");
            let regular = info.file_type() == gio::FileType::Regular;
            let readable = if regular { mode | 0o400 } else { mode };
            let pairs = xattrs.get::<Vec<(Vec<u8>, Vec<u8>)>>().unwrap_or_default();
            let labeled = relabeled(pairs, label(&child, mode)?);
            if readable == mode && labeled.is_none() {
                continue;
            }
            let xattrs = labeled.map(|x| x.to_variant()).unwrap_or(xattrs);
            let (uid, gid) = (
                info.attribute_uint32("unix::uid"),
                info.attribute_uint32("unix::gid"),
            );
            let written = if regular {
                let mut content = Vec::new();
                if let Some(stream) = stream {
                    stream
                        .into_read()
                        .read_to_end(&mut content)
                        .context_with(ctx)?;
                }
                let w = self
                    .repo
                    .write_regfile(
                        None,
                        uid,
                        gid,
                        readable,
                        content.len() as u64,
                        Some(&xattrs),
                    )
                    .context_with(ctx)?;
                w.write_all(&content, gio::Cancellable::NONE)
                    .context_with(ctx)?;
                w.finish(gio::Cancellable::NONE)
                    .context_with(ctx)?
                    .to_string()
            } else {
                let target = info.symlink_target().unwrap_or_default();
                self.repo
                    .write_symlink(
                        None,
                        uid,
                        gid,
                        Some(&xattrs),
                        &target.to_string_lossy(),
                        gio::Cancellable::NONE,
                    )
                    .context_with(ctx)?
                    .to_string()
            };
            dir.replace_file(&name, &written).context_with(ctx)?;
        }
        for (name, sub) in dir.copy_subdirs() {
            self.fix_up(
                &sub,
                &format!("{}/{name}", path.trim_end_matches('/')),
                policy,
            )?;
        }
        Ok(())
    }

    /// Writes the tree ([`Self::fix_up`] first) and a commit on top of
    /// `base`.
    fn commit(&self, base: &str, version: Option<&str>, timestamp: Option<u64>) -> Result<String> {
        let started = std::time::Instant::now();
        let policy = self.policy(base)?;
        self.fix_up(&self.root, "/", policy.as_ref())?;
        tracing::debug!(elapsed = ?started.elapsed(), "modes and labels fixed up");
        let root = self.write_root(base)?;
        tracing::debug!(elapsed = ?started.elapsed(), "derived tree written");
        let meta = glib::VariantDict::new(Some(&self.base_meta));
        let bootable = meta.contains("ostree.bootable");
        // The base's package list does not describe the derived tree.
        for key in [
            "rpmostree.rpmdb.pkglist",
            "strata.packages",
            "ostree.linux",
            "ostree.bootable",
        ] {
            meta.remove(key);
        }
        if let Some(v) = version {
            meta.insert("version", v);
        }
        if bootable {
            ostree::commit_metadata_for_bootable(&root, &meta, gio::Cancellable::NONE)
                .context_with(|| "finding the kernel of the derived tree".into())?;
        }
        let (base_v, _) = self
            .repo
            .load_commit(base)
            .context_with(|| format!("loading commit {base}"))?;
        let time = timestamp.unwrap_or_else(|| ostree::commit_get_timestamp(&base_v));
        let commit = self
            .repo
            .write_commit_with_time(
                Some(base),
                None,
                None,
                Some(&meta.end()),
                &root,
                time,
                gio::Cancellable::NONE,
            )
            .context_with(|| "writing the derived commit".into())?;
        Ok(commit.to_string())
    }
}

/// The SELinux policy of `rev`, if it has one enabled.
fn enabled_policy(repo: &ostree::Repo, rev: &str) -> Result<Option<ostree::SePolicy>> {
    let policy = ostree::SePolicy::from_commit(repo, rev, gio::Cancellable::NONE)
        .context_with(|| format!("loading the SELinux policy of {rev}"))?;
    Ok(policy.name().is_some().then_some(policy))
}

/// True for tar paths that land under the policy dir (a tar's `etc/…`
/// lands in `usr/etc/…`).
fn is_policy_path(path: &str) -> bool {
    match place(path) {
        Placement::Keep(p) => p
            .strip_prefix(POLICY_DIR)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
        Placement::Filtered(_) => false,
    }
}

/// `xattrs` with `security.selinux` set to `label` (NUL-terminated, as
/// stored), or None when that is what they already say (or there is no
/// label to give).
fn relabeled(
    mut xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    label: Option<glib::GString>,
) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let label = label?;
    let mut value = label.as_bytes().to_vec();
    value.push(0);
    let name = b"security.selinux\0".to_vec();
    match xattrs.iter_mut().find(|(n, _)| *n == name) {
        Some((_, v)) if *v == value => return None,
        Some((_, v)) => *v = value,
        None => xattrs.push((name, value)),
    }
    xattrs.sort();
    Some(xattrs)
}

fn empty_xattrs() -> glib::Variant {
    Vec::<(Vec<u8>, Vec<u8>)>::new().to_variant()
}

/// `SCHILY.xattr.*` PAX records of an entry as an ostree xattrs variant.
fn pax_xattrs<R: Read>(entry: &mut tar::Entry<R>) -> std::io::Result<Option<glib::Variant>> {
    let Some(exts) = entry.pax_extensions()? else {
        return Ok(None);
    };
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for ext in exts {
        let ext = ext?;
        if let Some(name) = ext.key_bytes().strip_prefix(b"SCHILY.xattr.") {
            let mut n = name.to_vec();
            n.push(0);
            pairs.push((n, ext.value_bytes().to_vec()));
        }
    }
    if pairs.is_empty() {
        return Ok(None);
    }
    pairs.sort();
    Ok(Some(pairs.to_variant()))
}

fn write_dirmeta(
    repo: &ostree::Repo,
    uid: u32,
    gid: u32,
    mode: u32,
    xattrs: Option<&glib::Variant>,
) -> Result<String> {
    let info = gio::FileInfo::new();
    info.set_attribute_uint32("unix::uid", uid);
    info.set_attribute_uint32("unix::gid", gid);
    info.set_attribute_uint32("unix::mode", libc_s_ifdir() | mode);
    let v = ostree::create_directory_metadata(&info, xattrs);
    let c = repo
        .write_metadata(
            ostree::ObjectType::DirMeta,
            None,
            &v,
            gio::Cancellable::NONE,
        )
        .context_with(|| "writing directory metadata".into())?;
    Ok(c.to_hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_paths() {
        let c = "a86d80a3e9ff77c2e3144c787b7769b300f91ffd770221aac27bab854960b964";
        let rest = format!("{}/{}.file", &c[..2], &c[2..]);
        assert_eq!(parse_object_path(&rest), Some((c.to_string(), "file")));
        let x = format!("{}/{}.file-xattrs-link", &c[..2], &c[2..]);
        assert_eq!(parse_object_path(&x).map(|p| p.1), Some("file-xattrs-link"));
        for bad in [
            "a8/6d.file",
            "a8",
            "zz/6d80a3e9ff77c2e3144c787b7769b300f91ffd770221aac27bab854960b964.file",
        ] {
            assert_eq!(parse_object_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn derived_placement() {
        let cases = [
            ("usr/bin/kubelet", Placement::Keep("usr/bin/kubelet".into())),
            (
                "etc/crio/crio.conf",
                Placement::Keep("usr/etc/crio/crio.conf".into()),
            ),
            ("etc", Placement::Keep("usr/etc".into())),
            ("var/lib/x", Placement::Keep("var/lib/x".into())),
            ("tmp", Placement::Keep("tmp".into())),
            ("tmp/junk", Placement::Filtered("tmp".into())),
            ("opt/app/bin", Placement::Filtered("opt".into())),
            ("boot/vmlinuz", Placement::Filtered("boot".into())),
        ];
        for (p, want) in cases {
            assert_eq!(place(p), want, "{p}");
        }
    }
}
