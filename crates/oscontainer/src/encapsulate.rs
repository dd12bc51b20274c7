//! ostree commit → OCI image in the ostree-ext container format.
//!
//! The format is what ostree-ext (bootc, rpm-ostree) imports — facts taken
//! from ostree-rs-ext 0.15 (`lib/src/tar/export.rs`, `container/encapsulate.rs`,
//! `tar/import.rs`, `container/store.rs`):
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
//!   The image config label `ostree.final-diffid` names the diff ID of the last
//!   ostree layer; layers after it are not ostree content (derived layers).
//! - Chunk layers carry the annotation `ostree.components` (sorted names joined
//!   by `,`); labels `ostree.commit`, `ostree.bootable` + `containers.bootc=1`,
//!   `ostree.linux`, `org.opencontainers.image.version` come from the commit.
//!
//! The layers' tar streams are written by [`crate::commit_tar`]; this
//! module plans them (which objects in which layer), writes them in
//! parallel (reusing chunks written before, [`crate::layer_cache`]) and
//! builds the config and manifest around them. Output is deterministic:
//! the config's `created` and history times from the caller's
//! SOURCE_DATE_EPOCH (else the commit timestamp), canonical JSON (ocidir).
//!
//! This module must not decide chunking (see [`crate::chunking`]) nor read
//! images back (see [`crate::import`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use oci_spec::image::{ConfigBuilder, DescriptorBuilder, Digest, HistoryBuilder, MediaType};
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::chunking::{self, Component, LayerMap, COMPONENTS_ANNOTATION};
use crate::commit::{self, CommitTree, ContentObject};
use crate::commit_tar::write_layer;
use crate::compress::Compression;
use crate::error::{Error, Result};
use crate::layer_cache::{LayerCache, WrittenLayer};
use crate::layout::{write_config_and_manifest, ImageDocs, Layout, PendingTag};

use crate::labels::rfc3339;
pub use crate::labels::{
    LABEL_BOOTABLE, LABEL_BOOTC, LABEL_COMMIT, LABEL_FINAL_DIFFID, LABEL_LINUX, LABEL_VERSION,
};
/// The component of content the caller did not assign.
pub const UNPACKAGED: &str = "unpackaged";

/// Which component owns which content, for chunking.
///
/// Paths are as the caller knows them: `/usr/bin/bash`, `usr/bin/bash`, and
/// `/etc/...` (which the commit stores as `usr/etc/...`) all work. Content no
/// path maps belongs to [`UNPACKAGED`], and so does a file whose size differs
/// from the size its component declared for it ([`ContentMap::assign_sized`]):
/// content changed after installation (a rewritten config, os-release) would
/// otherwise make its component's layer change with every build.
#[derive(Debug, Clone, Default)]
pub struct ContentMap {
    frequencies: BTreeMap<String, u32>,
    paths: BTreeMap<String, (String, Option<u64>)>,
}

impl ContentMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a component and how often it changes (higher: more often).
    pub fn add_component(&mut self, name: &str, change_frequency: u32) {
        self.frequencies.insert(name.to_string(), change_frequency);
    }

    /// Says that the file at `path` belongs to `component`.
    pub fn assign(&mut self, path: &str, component: &str) {
        self.insert(path, component, None);
    }

    /// Says that the file at `path` belongs to `component` as long as it has
    /// `size` bytes (a symlink: the length of its target); otherwise it is
    /// [`UNPACKAGED`].
    pub fn assign_sized(&mut self, path: &str, component: &str, size: u64) {
        self.insert(path, component, Some(size));
    }

    fn insert(&mut self, path: &str, component: &str, size: Option<u64>) {
        self.paths
            .insert(commit_path(path), (component.to_string(), size));
        self.frequencies.entry(component.to_string()).or_insert(0);
    }

    /// The component owning `path` when the object there has `size` bytes.
    fn owner(&self, path: &str, size: u64) -> Option<&str> {
        match self.paths.get(path) {
            Some((c, expected)) if expected.is_none_or(|e| e == size) => Some(c),
            _ => None,
        }
    }

    /// The change frequency of `component` as the chunker sees it (the
    /// unassigned content's is the highest).
    pub fn change_frequency(&self, component: &str) -> u32 {
        match self.frequencies.get(component) {
            Some(f) => *f,
            // Unassigned content (rpmdb, generated files) changes every build.
            None if component == UNPACKAGED => u32::MAX,
            None => 0,
        }
    }
}

/// For each content object of commit `rev` in the repository at `repo`,
/// the component that owns it according to `content` (checksum ->
/// component): what [`encapsulate`] chunks by, for tools that need the same
/// assignment (e.g. to compare with another encapsulator).
pub fn object_components(
    repo: &Path,
    rev: &str,
    content: &ContentMap,
) -> Result<BTreeMap<String, String>> {
    let r = commit::open_repo(repo)?;
    let tree = commit::read_commit(&r, rev)?;
    Ok(assign_objects(&tree, content)
        .into_iter()
        .map(|(csum, owner)| (csum.to_string(), owner))
        .collect())
}

/// A path as the commit stores it: relative, `/etc` under `usr/etc`.
fn commit_path(path: &str) -> String {
    let p = path.trim_start_matches('/').trim_start_matches("./");
    if p == "etc" || p.starts_with("etc/") {
        format!("usr/{p}")
    } else {
        p.to_string()
    }
}

/// How to encapsulate.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EncapsulateOptions {
    /// Extra labels (e.g. `com.coreos.osname`, `strata.inputhash`); they win
    /// over labels derived from the commit.
    pub labels: BTreeMap<String, String>,
    /// At most this many layers, the commit layer included (default 64).
    pub max_layers: Option<u32>,
    /// Layer compression.
    pub compression: Compression,
    /// SOURCE_DATE_EPOCH for `created` timestamps; default: the commit's
    /// timestamp.
    pub source_date_epoch: Option<u64>,
    /// Content → component mapping; without it all content is one component.
    pub content: Option<ContentMap>,
    /// The previous build's layer map, to keep components in their layers.
    pub prior: Option<LayerMap>,
    /// Write the image without tagging it: [`Encapsulated::pending_tag`]
    /// tags it, once the caller has recorded the build.
    pub defer_tag: bool,
    /// A directory recording the chunk layers written into this layout
    /// (see [`crate::layer_cache`]): a chunk whose content was written
    /// before is not written again, its blob is reused.
    pub layer_cache: Option<PathBuf>,
}

/// One layer of a written image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerInfo {
    /// Blob digest (`sha256:…`).
    pub digest: String,
    /// Compressed size in bytes.
    pub size: u64,
    /// Digest of the uncompressed tar.
    pub diff_id: String,
    /// Components in this layer (empty for the commit layer).
    pub components: Vec<String>,
    /// The history description.
    pub description: String,
}

/// What [`encapsulate`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Encapsulated {
    /// `oci:DIR:TAG` of the image.
    pub image: String,
    /// Manifest digest.
    pub manifest_digest: String,
    /// Config digest.
    pub config_digest: String,
    /// The ostree commit.
    pub commit: String,
    /// `org.opencontainers.image.version`, when the commit has a version.
    pub version: Option<String>,
    /// The layers, commit layer first.
    pub layers: Vec<LayerInfo>,
    /// The layer map to keep for the next build.
    pub layer_map: LayerMap,
    /// How many chunk layers [`EncapsulateOptions::layer_cache`] gave (not
    /// written again).
    pub reused_layers: usize,
    /// With [`EncapsulateOptions::defer_tag`]: what tags the image.
    #[serde(skip)]
    pub pending_tag: Option<PendingTag>,
}

/// Writes commit `rev` of the ostree repository at `repo` as an image tagged
/// `tag` in the OCI layout `oci` (created if missing; other images in it are
/// kept and share blobs).
pub fn encapsulate(
    repo: &Path,
    rev: &str,
    oci: &Path,
    tag: &str,
    opts: &EncapsulateOptions,
) -> Result<Encapsulated> {
    if tag.is_empty() || tag.contains('/') || tag.contains(':') {
        return Err(Error::InvalidOption(format!(
            "tag {tag:?} must be non-empty and contain no '/' or ':'"
        )));
    }
    let max_layers = opts.max_layers.unwrap_or(chunking::DEFAULT_MAX_LAYERS);
    let tree = {
        let r = commit::open_repo(repo)?;
        commit::read_commit(&r, rev)?
    };
    let created = rfc3339(opts.source_date_epoch.unwrap_or(tree.info.timestamp));

    // Content → component, then the plan.
    let default_map = ContentMap::new();
    let content = opts.content.as_ref().unwrap_or(&default_map);
    let owners = assign_objects(&tree, content);
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    // What a component's layer holds: its objects and their paths.
    let mut fingerprints: BTreeMap<&str, Sha256> = BTreeMap::new();
    for (csum, owner) in &owners {
        let obj = &tree.objects[*csum];
        *sizes.entry(owner).or_default() += obj.size();
        let h = fingerprints.entry(owner).or_default();
        h.update(csum.as_bytes());
        for p in &obj.paths {
            h.update(b"\0");
            h.update(p.as_bytes());
        }
        h.update(b"\n");
    }
    let components: Vec<Component> = sizes
        .iter()
        .map(|(name, size)| Component {
            name: name.to_string(),
            size: *size,
            change_frequency: content.change_frequency(name),
            fingerprint: fingerprints
                .remove(name)
                .map(|h| hex::encode(h.finalize()))
                .unwrap_or_default(),
        })
        .collect();
    let layer_map = LayerMap::plan(&components, max_layers, opts.prior.as_ref())?;
    let bin_of = layer_map.bin_of();

    // Objects per layer: index 0 is the commit layer.
    let mut per_layer: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); layer_map.bins.len() + 1];
    for (csum, owner) in &owners {
        let layer = bin_of.get(owner.as_str()).map_or(0, |b| b + 1);
        per_layer[layer].insert(csum);
    }
    let packages = crate::inspect::packages_in_commit_object(&tree.commit)
        .map_err(|reason| Error::InvalidOption(format!("commit {}: {reason}", tree.checksum)))?;
    let mut jobs: Vec<Job> = vec![Job {
        kind: JobKind::Commit,
        objects: std::mem::take(&mut per_layer[0]),
        components: Vec::new(),
        packages: (!packages.is_empty())
            .then(|| serde_json::to_string(&packages))
            .transpose()
            .map_err(|source| Error::Json {
                context: "the package list".into(),
                source,
            })?,
        description: if tree.info.subject.is_empty() {
            format!("ostree export of commit {}", tree.checksum)
        } else {
            tree.info.subject.clone()
        },
    }];
    for (i, objects) in per_layer.into_iter().enumerate().skip(1) {
        let bin = &layer_map.bins[i - 1];
        if objects.is_empty() {
            continue;
        }
        // Components that own no content (size 0) have no objects; list only
        // those present so the annotation describes the layer.
        let components: Vec<String> = bin
            .components
            .iter()
            .filter(|c| sizes.contains_key(c.as_str()))
            .cloned()
            .collect();
        jobs.push(Job {
            kind: JobKind::Chunk,
            description: chunking::describe(&bin.components),
            objects,
            components,
            packages: None,
        });
    }

    let ocidir = Layout::ocidir(oci)?;
    let repo_path = repo.to_path_buf();
    let size_of = |job: &Job| -> u64 {
        job.objects
            .iter()
            .filter_map(|c| tree.objects.get(*c))
            .map(ContentObject::size)
            .sum()
    };
    let meter = std::sync::Mutex::new(strata_process::progress::Meter::new(
        format!("compressing {} layers", jobs.len()),
        jobs.iter().map(size_of).sum(),
    ));
    let cache = opts
        .layer_cache
        .as_deref()
        .map(|dir| LayerCache::new(dir, oci));
    let reused = std::sync::atomic::AtomicUsize::new(0);
    let written: Vec<Result<WrittenLayer>> = jobs
        .par_iter()
        .map(|job| {
            let write = || write_layer(&ocidir, &repo_path, &tree, job, opts.compression);
            let cached = cache
                .as_ref()
                .filter(|_| job.kind == JobKind::Chunk)
                .map(|c| (c, LayerCache::key(&tree, &job.objects, opts.compression)));
            let layer = match cached {
                Some((c, key)) => match c.get(&key) {
                    Some(hit) => {
                        reused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        Ok(hit)
                    }
                    None => write().and_then(|l| c.put(&key, &l).map(|()| l)),
                },
                None => write(),
            };
            meter
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(size_of(job));
            layer
        })
        .collect();
    drop(meter);
    let reused_layers = reused.into_inner();
    if cache.is_some() {
        tracing::debug!("{reused_layers} of {} chunk layers reused", jobs.len() - 1);
    }
    let mut layers = Vec::with_capacity(written.len());
    for w in written {
        layers.push(w?);
    }

    // Labels: from the commit, then the caller's.
    let final_diffid = format!(
        "sha256:{}",
        layers
            .last()
            .map(|l| l.diff_id.trim_start_matches("sha256:").to_string())
            .unwrap_or_default()
    );
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    labels.insert(LABEL_COMMIT.into(), tree.checksum.clone());
    labels.insert(LABEL_FINAL_DIFFID.into(), final_diffid);
    if let Some(b) = tree.info.bootable {
        labels.insert(LABEL_BOOTABLE.into(), b.to_string());
        labels.insert(LABEL_BOOTC.into(), "1".into());
    }
    if let Some(k) = &tree.info.linux {
        labels.insert(LABEL_LINUX.into(), k.clone());
    }
    if let Some(v) = &tree.info.version {
        labels.insert(LABEL_VERSION.into(), v.clone());
    }
    labels.extend(opts.labels.clone());

    let out = write_image(
        &ocidir,
        oci,
        tag,
        &created,
        &labels,
        jobs.iter().zip(layers),
        opts.defer_tag,
    )?;
    Ok(Encapsulated {
        image: format!("oci:{}:{tag}", oci.display()),
        manifest_digest: out.0,
        config_digest: out.1,
        commit: tree.checksum.clone(),
        version: labels.get(LABEL_VERSION).cloned(),
        layers: out.2,
        layer_map,
        reused_layers,
        pending_tag: out.3,
    })
}

/// For each content object, its component: the owner of its first mapped
/// path, else [`UNPACKAGED`].
fn assign_objects<'t>(tree: &'t CommitTree, content: &ContentMap) -> BTreeMap<&'t str, String> {
    tree.objects
        .iter()
        .map(|(csum, obj)| {
            let owner = obj
                .paths
                .iter()
                .find_map(|p| content.owner(p, obj.size()))
                .unwrap_or(UNPACKAGED);
            (csum.as_str(), owner.to_string())
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    Commit,
    Chunk,
}

/// One layer to write.
#[derive(Debug)]
pub(crate) struct Job<'t> {
    pub(crate) kind: JobKind,
    pub(crate) objects: BTreeSet<&'t str>,
    pub(crate) components: Vec<String>,
    pub(crate) description: String,
    /// The commit layer's `strata.packages` annotation: every package of
    /// the commit (JSON), so that a registry image's packages are read
    /// from its manifest alone.
    packages: Option<String>,
}

/// Builds config and manifest around written layers and tags the image.
pub(crate) fn write_image<'j, 't: 'j>(
    ocidir: &ocidir::OciDir,
    oci: &Path,
    tag: &str,
    created: &str,
    labels: &BTreeMap<String, String>,
    layers: impl Iterator<Item = (&'j Job<'t>, WrittenLayer)>,
    defer_tag: bool,
) -> Result<(String, String, Vec<LayerInfo>, Option<PendingTag>)> {
    let mut descriptors = Vec::new();
    let mut diff_ids = Vec::new();
    let mut history = Vec::new();
    let mut infos = Vec::new();
    for (job, layer) in layers {
        let mut d = DescriptorBuilder::default()
            .media_type(MediaType::from(layer.media_type.as_str()))
            .digest(Digest::from_str(&layer.digest).map_err(oci_err)?)
            .size(layer.size);
        if job.kind == JobKind::Chunk {
            d = d.annotations(HashMap::from([(
                COMPONENTS_ANNOTATION.to_string(),
                job.components.join(","),
            )]));
        }
        if let Some(list) = &job.packages {
            d = d.annotations(HashMap::from([(
                crate::inspect::PACKAGES_ANNOTATION.to_string(),
                list.clone(),
            )]));
        }
        let desc = d.build().map_err(oci_err)?;
        let diff_id = layer.diff_id;
        history.push(
            HistoryBuilder::default()
                .created(created.to_string())
                .created_by(job.description.clone())
                .build()
                .map_err(oci_err)?,
        );
        infos.push(LayerInfo {
            digest: desc.digest().to_string(),
            size: desc.size(),
            diff_id: diff_id.clone(),
            components: job.components.clone(),
            description: job.description.clone(),
        });
        diff_ids.push(diff_id);
        descriptors.push(desc);
    }
    let labels: HashMap<String, String> = labels.clone().into_iter().collect();
    let docs = ImageDocs {
        created: created.to_string(),
        run: ConfigBuilder::default()
            .labels(labels.clone())
            .build()
            .map_err(oci_err)?,
        diff_ids,
        history,
        layers: descriptors,
        annotations: labels,
    };
    let (desc, config_desc, pending) =
        write_config_and_manifest(ocidir, oci, tag, docs, defer_tag)?;
    Ok((
        desc.digest().to_string(),
        config_desc.digest().to_string(),
        infos,
        pending,
    ))
}

pub(crate) fn oci_err(e: oci_spec::OciSpecError) -> Error {
    Error::InvalidOption(format!("building OCI document: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_paths() {
        assert_eq!(commit_path("/etc/passwd"), "usr/etc/passwd");
        assert_eq!(commit_path("/usr/bin/bash"), "usr/bin/bash");
        assert_eq!(commit_path("etc"), "usr/etc");
        assert_eq!(commit_path("/etcetera"), "etcetera");
    }
}
