//! OCI image → ostree commit: the import flow and its public API.
//!
//! Reads an image in the ostree-ext container format (ours or any other
//! writer's) back into a repository. The ostree layers — the first layer up
//! to the one named by `ostree.final-diffid` — carry objects; importing them
//! (`objects`) reproduces the exact commit, which is then checked to be
//! complete. Layers after that are derived layers, merged onto the commit's
//! tree as ostree-ext's client merges them (`derived_tree`); the result
//! is a new commit whose parent is the base commit. `entries` holds what
//! those two readers of layer tars share.
//!
//! Input is untrusted until proven otherwise: every blob is checked against
//! its descriptor before the repository is touched, every object is written
//! with its expected checksum (libostree verifies), tar paths that are
//! absolute, contain `..`, or lead through a symlink are refused, and all
//! writes happen in one repository transaction that is aborted on error.
//! Nothing is written outside the repository. This module opens and commits
//! that transaction; it does not read tar entries itself.

mod base_fixes;
mod derived_tree;
mod entries;
mod objects;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use ostree::gio;
use serde::Serialize;

use crate::commit::{self, hex_checksum};
use crate::error::{Context, Error, Result};
use crate::labels::{parse_rfc3339, LABEL_COMMIT, LABEL_FINAL_DIFFID, LABEL_VERSION};
use crate::layer_stream::{LayerCheck, DEFAULT_MAX_EXPANSION};
use crate::layout::{Layout, ResolvedImage};
use crate::transport::{ImageRef, TransportOptions};
use derived_tree::DerivedTree;
use objects::ObjectImporter;

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
    let mut tree_done = None;
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
        let commit = tree.commit(
            &base,
            labels.get(LABEL_VERSION).map(String::as_str),
            created,
        )?;
        tree_done = Some(tree);
        commit
    };
    if let Some(r) = &opts.ref_name {
        repo.transaction_set_ref(None, r, Some(&commit));
    }
    let t = std::time::Instant::now();
    txn.commit(gio::Cancellable::NONE)
        .context_with(|| format!("committing the import into {}", repo_path.display()))?;
    tracing::debug!(elapsed = ?t.elapsed(), "transaction committed");
    if let Some(tree) = tree_done {
        tree.save_base_fixes(&base);
    }
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
    /// The commit of the build before this one, if any (see
    /// [`DerivedTree::previous`]).
    pub previous: Option<String>,
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
    if let Some(previous) = &c.previous {
        tree.previous(previous);
    }
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
    tree.save_base_fixes(&c.base);
    Ok(commit)
}

/// Removes what `repo` keeps for derived trees of base commits it no
/// longer holds (run after pruning it); how many records.
pub fn prune_derived_records(repo: &ostree::Repo) -> usize {
    base_fixes::prune(repo)
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
