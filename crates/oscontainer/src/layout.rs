//! Reading and writing OCI image layout directories.
//!
//! One layout (the workdir's `W/oci`) holds many images sharing one blob
//! store; images are named by the `org.opencontainers.image.ref.name`
//! annotation in `index.json`. Writing goes through `ocidir` (atomic blob and
//! index writes, canonical JSON). Reading is done here so that every blob is
//! checked against its descriptor — present, right size, right sha256 — before
//! a byte of it is trusted, and so that each failure names the blob.
//!
//! This module knows nothing about ostree.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest, MediaType};
use ocidir::cap_std;
use sha2::{Digest as _, Sha256};

use strata_process::regular::{open_regular, FinalSymlink, NotRegular, Regular};

use crate::error::{Context, Error, Result};
use crate::layer_stream::{decompressor, LayerCheck};

/// The index annotation naming a tag.
pub const TAG_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// The largest manifest or image config read (RHCOS's config, its
/// history and labels included, is well under 1 MiB; a descriptor's own
/// size is the image's word, not a bound).
pub(crate) const MAX_JSON_BLOB: u64 = 4 << 20;

/// The largest `index.json` read: it grows by a few hundred bytes a tag.
pub(crate) const MAX_INDEX: u64 = 16 << 20;

/// An image resolved in a layout: its manifest and config, both verified.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedImage {
    /// The index's descriptor of the manifest.
    pub descriptor: Descriptor,
    pub manifest_digest: String,
    pub manifest: ImageManifest,
    pub config: ImageConfiguration,
}

/// An OCI image layout directory.
#[derive(Debug)]
pub(crate) struct Layout {
    path: PathBuf,
}

impl Layout {
    /// Opens an existing layout.
    pub(crate) fn open(path: &Path) -> Result<Layout> {
        if !path.join("oci-layout").is_file() {
            let why = if path.is_dir() {
                "the directory has no oci-layout file"
            } else {
                "no such directory"
            };
            return Err(Error::Io {
                context: format!("{} is not an OCI image layout", path.display()),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, why),
            });
        }
        Ok(Layout {
            path: path.to_path_buf(),
        })
    }

    /// Opens `path` for writing with ocidir, creating the layout if needed.
    pub(crate) fn ocidir(path: &Path) -> Result<ocidir::OciDir> {
        std::fs::create_dir_all(path).context_with(|| format!("creating {}", path.display()))?;
        let dir = cap_std::fs::Dir::open_ambient_dir(path, cap_std::ambient_authority())
            .context_with(|| format!("opening {}", path.display()))?;
        ocidir::OciDir::ensure(dir).map_err(|source| Error::Layout {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The layout's index.
    pub(crate) fn index(&self) -> Result<ImageIndex> {
        let p = self.path.join("index.json");
        if !p.exists() {
            // A layout whose first write never finished: no image yet.
            return empty_index();
        }
        let f = File::open(&p).context_with(|| format!("opening {}", p.display()))?;
        let mut data = Vec::new();
        f.take(MAX_INDEX + 1)
            .read_to_end(&mut data)
            .context_with(|| format!("reading {}", p.display()))?;
        if data.len() as u64 > MAX_INDEX {
            return Err(Error::TooLarge {
                what: p.display().to_string(),
                size: std::fs::metadata(&p).map_or(data.len() as u64, |m| m.len()),
                limit: MAX_INDEX,
            });
        }
        serde_json::from_slice(&data).context_with(|| format!("parsing {}", p.display()))
    }

    /// The manifest descriptor tagged `tag`; without a tag, the only one.
    pub(crate) fn manifest_descriptor(&self, tag: Option<&str>) -> Result<Descriptor> {
        let index = self.index()?;
        let found: Vec<&Descriptor> = index
            .manifests()
            .iter()
            .filter(|d| match tag {
                Some(t) => d
                    .annotations()
                    .as_ref()
                    .and_then(|a| a.get(TAG_ANNOTATION))
                    .is_some_and(|v| v == t),
                None => true,
            })
            .collect();
        match (found.as_slice(), tag) {
            ([one], _) => Ok((*one).clone()),
            // Tags are unique in a layout ocidir writes; take the newest.
            ([.., last], Some(_)) => Ok((*last).clone()),
            ([], _) => Err(Error::TagNotFound {
                layout: self.path.clone(),
                tag: tag.unwrap_or("").to_string(),
            }),
            (_, None) => Err(Error::TagNotFound {
                layout: self.path.clone(),
                tag: "(none given, and the layout holds several images)".into(),
            }),
        }
    }

    /// Resolves `tag` to its verified manifest and config.
    pub(crate) fn resolve(&self, tag: Option<&str>) -> Result<ResolvedImage> {
        let desc = self.manifest_descriptor(tag)?;
        if desc.media_type() != &MediaType::ImageManifest {
            return Err(Error::NotOstreeImage {
                image: format!("{}:{}", self.path.display(), tag.unwrap_or("")),
                reason: format!("{} is not an image manifest", desc.media_type()),
            });
        }
        let manifest: ImageManifest = self.read_json(&desc, "manifest")?;
        let config: ImageConfiguration = self.read_json(manifest.config(), "image config")?;
        Ok(ResolvedImage {
            manifest_digest: desc.digest().to_string(),
            descriptor: desc,
            manifest,
            config,
        })
    }

    /// Where a blob lives; refuses digests that are not sha256 hex.
    pub(crate) fn blob_path(&self, desc: &Descriptor) -> Result<PathBuf> {
        let digest = desc.digest();
        let hex = digest.digest();
        if digest.algorithm().as_ref() != "sha256"
            || hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(Error::BadLayer {
                digest: digest.to_string(),
                reason: "only sha256 digests are supported".into(),
            });
        }
        Ok(self.path.join("blobs/sha256").join(hex))
    }

    /// Opens a blob for reading: a regular file of the descriptor's size.
    /// A symlink is refused without being followed (`O_NOFOLLOW`), and a
    /// FIFO or device is not waited on (`O_NONBLOCK`, then its type
    /// checked on the open file), so nothing outside the layout is read
    /// or reported on through a blob.
    pub(crate) fn open_blob(&self, desc: &Descriptor) -> Result<File> {
        let blob = self.open_regular_blob(desc)?;
        self.check_size(desc, blob.size)?;
        Ok(blob.file)
    }

    /// The blob's own file (never what a symlink names), opened for reading
    /// only when it is a regular file: anything else is refused by kind.
    fn open_regular_blob(&self, desc: &Descriptor) -> Result<Regular> {
        let path = self.blob_path(desc)?;
        open_regular(&path, FinalSymlink::Refuse).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Error::MissingBlob {
                    layout: self.path.clone(),
                    digest: desc.digest().to_string(),
                };
            }
            if let Some(refused) = NotRegular::of(&e) {
                return Error::NotARegularBlob {
                    layout: self.path.clone(),
                    digest: desc.digest().to_string(),
                    kind: refused.kind,
                };
            }
            // ELOOP: the last component is a symlink (O_PATH|O_NOFOLLOW
            // opens the link itself on Linux; kept for other kernels).
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                return Error::NotARegularBlob {
                    layout: self.path.clone(),
                    digest: desc.digest().to_string(),
                    kind: "a symlink",
                };
            }
            Error::Io {
                context: format!("opening {}", path.display()),
                source: e,
            }
        })
    }

    /// That a blob's file has the descriptor's size.
    fn check_size(&self, desc: &Descriptor, found: u64) -> Result<()> {
        if found != desc.size() {
            return Err(Error::SizeMismatch {
                digest: desc.digest().to_string(),
                expected: desc.size(),
                found,
            });
        }
        Ok(())
    }

    /// Checks that a blob exists, has the descriptor's size and hashes to its
    /// digest.
    pub(crate) fn verify_blob(&self, desc: &Descriptor) -> Result<()> {
        let f = self.open_blob(desc)?;
        let mut hasher = Sha256::new();
        std::io::copy(&mut BufReader::with_capacity(1 << 20, f), &mut hasher)
            .context_with(|| format!("reading blob {}", desc.digest()))?;
        check_digest(desc, hasher)
    }

    /// Checks that a blob exists as a regular file with the descriptor's
    /// size, without reading it: the cheap half of [`Layout::verify_blob`].
    pub(crate) fn check_blob_size(&self, desc: &Descriptor) -> Result<()> {
        let blob = self.open_regular_blob(desc)?;
        self.check_size(desc, blob.size)
    }

    /// Reads a JSON blob, read once and hashed as read: what is parsed is
    /// what was verified. One larger than [`MAX_JSON_BLOB`] is refused
    /// before a byte of it is read.
    pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        desc: &Descriptor,
        what: &str,
    ) -> Result<T> {
        if desc.size() > MAX_JSON_BLOB {
            return Err(Error::TooLarge {
                what: format!("{what} {}", desc.digest()),
                size: desc.size(),
                limit: MAX_JSON_BLOB,
            });
        }
        let f = self.open_blob(desc)?;
        let mut data = Vec::new();
        // The size was checked on the open file; a file that grows
        // meanwhile is cut at one byte more, which the hash refuses.
        f.take(desc.size().saturating_add(1))
            .read_to_end(&mut data)
            .context_with(|| format!("reading {what} {}", desc.digest()))?;
        let mut hasher = Sha256::new();
        hasher.update(&data);
        check_digest(desc, hasher)?;
        serde_json::from_slice(&data).context_with(|| format!("parsing {what} {}", desc.digest()))
    }

    /// Opens a layer blob (verify it first) and decompresses it by media
    /// type; a compressed layer's stream is held to `check`.
    pub(crate) fn open_layer(
        &self,
        desc: &Descriptor,
        check: LayerCheck,
    ) -> Result<Box<dyn Read + Send>> {
        let f = self.open_blob(desc)?;
        decompressor(desc, BufReader::with_capacity(1 << 20, f), check)
    }
}

/// That what `hasher` hashed is `desc`'s content.
fn check_digest(desc: &Descriptor, hasher: Sha256) -> Result<()> {
    let digest = desc.digest().to_string();
    let found = format!("sha256:{}", hex::encode(hasher.finalize()));
    if found != digest {
        return Err(Error::DigestMismatch { digest, found });
    }
    Ok(())
}

/// A tagged image in a layout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaggedImage {
    /// The tag.
    pub tag: String,
    /// Its manifest digest.
    pub manifest_digest: String,
}

/// A written image whose tag is not in the layout's index yet: the caller
/// records the build first and tags last ([`PendingTag::apply`]), so that
/// an interrupted build leaves no tag behind, only unreferenced blobs for
/// [`prune_abandoned`]. Dropped unapplied, the image stays untagged.
#[derive(Debug, Clone)]
pub struct PendingTag {
    oci: PathBuf,
    tag: String,
    descriptor: Descriptor,
}

impl PendingTag {
    /// The tag it will set.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The same image under another tag.
    pub fn retagged(&self, tag: &str) -> PendingTag {
        let mut descriptor = self.descriptor.clone();
        let mut annotations = descriptor.annotations().clone().unwrap_or_default();
        annotations.insert(TAG_ANNOTATION.to_string(), tag.to_string());
        descriptor.set_annotations(Some(annotations));
        PendingTag {
            oci: self.oci.clone(),
            tag: tag.to_string(),
            descriptor,
        }
    }

    /// Points the tag at the image (replacing what it named), in one
    /// atomic write of `index.json`.
    pub fn apply(self) -> Result<()> {
        let layout = Layout::open(&self.oci)?;
        let mut index = layout.index()?;
        let mut manifests = untagged(&index, &self.tag);
        manifests.push(self.descriptor);
        index.set_manifests(manifests);
        write_index(&self.oci, &index)
    }
}

/// What an image's config and manifest say beyond its layers' blobs.
pub(crate) struct ImageDocs {
    /// RFC 3339: the config's `created`.
    pub(crate) created: String,
    /// What a runtime starts the image with, and its labels.
    pub(crate) run: oci_spec::image::Config,
    pub(crate) diff_ids: Vec<String>,
    pub(crate) history: Vec<oci_spec::image::History>,
    pub(crate) layers: Vec<Descriptor>,
    /// The manifest's annotations.
    pub(crate) annotations: std::collections::HashMap<String, String>,
}

/// Writes an image's config (amd64/linux) and manifest around layers
/// already in the layout, as [`write_manifest`] does; returns the
/// manifest's and the config's descriptors.
pub(crate) fn write_config_and_manifest(
    ocidir: &ocidir::OciDir,
    oci: &Path,
    tag: &str,
    docs: ImageDocs,
    defer: bool,
) -> Result<(Descriptor, Descriptor, Option<PendingTag>)> {
    use oci_spec::image::{ImageManifestBuilder, Platform, RootFsBuilder};
    let oci_err = crate::encapsulate::oci_err;
    let platform = Platform::default();
    let mut config = ImageConfiguration::default();
    config.set_created(Some(docs.created));
    config.set_architecture(platform.architecture().clone());
    config.set_os(platform.os().clone());
    config.set_config(Some(docs.run));
    config.set_rootfs(
        RootFsBuilder::default()
            .typ("layers")
            .diff_ids(docs.diff_ids)
            .build()
            .map_err(oci_err)?,
    );
    config.set_history(Some(docs.history));
    let config_desc = ocidir
        .write_config(config)
        .map_err(|source| Error::Layout {
            path: oci.to_path_buf(),
            source,
        })?;
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config_desc.clone())
        .layers(docs.layers)
        .annotations(docs.annotations)
        .build()
        .map_err(oci_err)?;
    let (desc, pending) = write_manifest(ocidir, oci, manifest, tag, defer)?;
    Ok((desc, config_desc, pending))
}

/// Writes `manifest` into the layout as the image `tag`: tagged at once,
/// or with `defer`, written as a blob only and tagged by the returned
/// [`PendingTag`].
pub(crate) fn write_manifest(
    ocidir: &ocidir::OciDir,
    oci: &Path,
    manifest: ImageManifest,
    tag: &str,
    defer: bool,
) -> Result<(Descriptor, Option<PendingTag>)> {
    let layout_err = |source| Error::Layout {
        path: oci.to_path_buf(),
        source,
    };
    let platform = oci_spec::image::Platform::default();
    if !defer {
        let desc = ocidir
            .insert_manifest(manifest, Some(tag), platform)
            .map_err(layout_err)?;
        return Ok((desc, None));
    }
    let mut desc = ocidir
        .write_json_blob(&manifest, MediaType::ImageManifest)
        .map_err(layout_err)?
        .platform(platform)
        .build()
        .map_err(|e| Error::InvalidOption(format!("building OCI document: {e}")))?;
    let mut annotations = desc.annotations().clone().unwrap_or_default();
    annotations.insert(TAG_ANNOTATION.to_string(), tag.to_string());
    desc.set_annotations(Some(annotations));
    let pending = PendingTag {
        oci: oci.to_path_buf(),
        tag: tag.to_string(),
        descriptor: desc.clone(),
    };
    Ok((desc, Some(pending)))
}

/// What [`prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    /// Blobs deleted.
    pub blobs: usize,
    /// Bytes freed.
    pub bytes: u64,
}

/// The manifest digest of an image of an OCI layout once its manifest and
/// config are verified and every layer blob is present at its size. No
/// layer is read: what a no-op check or an inspect can afford.
pub fn check_present(image: &crate::ImageRef) -> Result<String> {
    let (layout, resolved) = open_image(image)?;
    for l in resolved.manifest.layers() {
        layout.check_blob_size(l)?;
    }
    Ok(resolved.manifest_digest)
}

/// The manifest digest of an image of an OCI layout once every blob it
/// names is present and hashes to its digest (the layers in parallel).
pub fn verify(image: &crate::ImageRef) -> Result<String> {
    use rayon::prelude::*;
    let (layout, resolved) = open_image(image)?;
    resolved
        .manifest
        .layers()
        .par_iter()
        .try_for_each(|l| layout.verify_blob(l))?;
    Ok(resolved.manifest_digest)
}

/// The layout of an `oci:` image and the image resolved in it; a
/// registry image is refused.
pub(crate) fn open_image(image: &crate::ImageRef) -> Result<(Layout, ResolvedImage)> {
    match image {
        crate::ImageRef::Oci { dir, tag } => {
            let layout = Layout::open(dir)?;
            let resolved = layout.resolve(tag.as_deref())?;
            Ok((layout, resolved))
        }
        crate::ImageRef::Docker { .. } => Err(Error::InvalidOption(format!(
            "{image}: only images of an OCI layout are checked in place"
        ))),
    }
}

/// The bytes an image of a layout stores: its manifest, config and layers
/// (present at their sizes; nothing is hashed).
pub fn stored_size(image: &crate::ImageRef) -> Result<u64> {
    let (layout, resolved) = open_image(image)?;
    let mut size = resolved.descriptor.size() + resolved.manifest.config().size();
    for l in resolved.manifest.layers() {
        layout.check_blob_size(l)?;
        size += l.size();
    }
    Ok(size)
}

/// The tagged images of the layout `oci`, sorted by tag.
pub fn list_tags(oci: &Path) -> Result<Vec<TaggedImage>> {
    let layout = Layout::open(oci)?;
    let mut out: Vec<TaggedImage> = layout
        .index()?
        .manifests()
        .iter()
        .filter_map(|d| {
            let tag = d.annotations().as_ref()?.get(TAG_ANNOTATION)?.clone();
            Some(TaggedImage {
                tag,
                manifest_digest: d.digest().to_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.tag.cmp(&b.tag));
    Ok(out)
}

/// The index of a layout that has no image yet.
fn empty_index() -> Result<ImageIndex> {
    oci_spec::image::ImageIndexBuilder::default()
        .schema_version(2u32)
        .manifests(Vec::new())
        .build()
        .map_err(|e| Error::InvalidOption(format!("building OCI document: {e}")))
}

/// The index's manifests but the one tagged `tag`.
fn untagged(index: &ImageIndex, tag: &str) -> Vec<Descriptor> {
    index
        .manifests()
        .iter()
        .filter(|d| {
            d.annotations()
                .as_ref()
                .and_then(|a| a.get(TAG_ANNOTATION))
                .is_none_or(|t| t != tag)
        })
        .cloned()
        .collect()
}

/// Removes `tag` from the layout's index; its blobs stay until [`prune`].
/// Returns whether the tag existed.
pub fn remove_tag(oci: &Path, tag: &str) -> Result<bool> {
    let layout = Layout::open(oci)?;
    let mut index = layout.index()?;
    let before = index.manifests().len();
    let kept = untagged(&index, tag);
    if kept.len() == before {
        return Ok(false);
    }
    index.set_manifests(kept);
    write_index(oci, &index)?;
    Ok(true)
}

/// [`prune`] for a store that may not exist yet: what a workdir's next
/// writer does first, so that blobs a killed or failed write left
/// (a pull, a derive on a full disk) do not stay.
pub fn prune_abandoned(oci: &Path) -> Result<Pruned> {
    if !oci.join("oci-layout").is_file() {
        return Ok(Pruned::default());
    }
    // A store that cannot be read whole (a manifest blob corrupt) is left
    // as it is: the image that needs it will say what is wrong.
    let pruned = match prune(oci) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("not removing abandoned blobs: {}", crate::error::chain(&e));
            return Ok(Pruned::default());
        }
    };
    if pruned.blobs > 0 {
        tracing::info!(
            "removed {} abandoned blobs ({} bytes) from {}",
            pruned.blobs,
            pruned.bytes,
            oci.display()
        );
    }
    Ok(pruned)
}

/// Deletes the blobs of the layout `oci` that no image in its index uses.
pub fn prune(oci: &Path) -> Result<Pruned> {
    let layout = Layout::open(oci)?;
    let mut keep = std::collections::BTreeSet::new();
    for d in layout.index()?.manifests() {
        keep.insert(d.digest().digest().to_string());
        if d.media_type() == &MediaType::ImageIndex {
            return Err(Error::InvalidOption(format!(
                "{}: nested image indexes are not supported by prune",
                oci.display()
            )));
        }
        let manifest: ImageManifest = layout.read_json(d, "manifest")?;
        keep.insert(manifest.config().digest().digest().to_string());
        for l in manifest.layers() {
            keep.insert(l.digest().digest().to_string());
        }
    }
    let dir = oci.join("blobs/sha256");
    let mut pruned = Pruned::default();
    for e in std::fs::read_dir(&dir).context_with(|| format!("reading {}", dir.display()))? {
        let e = e.context_with(|| format!("reading {}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if keep.contains(&name) {
            continue;
        }
        let size = e.metadata().map(|m| m.len()).unwrap_or(0);
        std::fs::remove_file(e.path())
            .context_with(|| format!("removing {}", e.path().display()))?;
        pruned.blobs += 1;
        pruned.bytes += size;
    }
    Ok(pruned)
}

/// Writes index.json atomically with sorted keys (as ocidir does).
fn write_index(oci: &Path, index: &ImageIndex) -> Result<()> {
    let data = canonical_json(index, "index.json")?;
    let tmp = oci.join(".index.json.tmp");
    std::fs::write(&tmp, data).context_with(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, oci.join("index.json"))
        .context_with(|| format!("replacing {}/index.json", oci.display()))
}

/// `value` as canonical JSON (RFC 8785: keys sorted at every level, no
/// whitespace, one form per number and string), whatever the field order
/// of its type: the bytes of an index or manifest depend on its content
/// only, and are the ones ocidir writes.
pub(crate) fn canonical_json<T: serde::Serialize>(value: &T, what: &str) -> Result<Vec<u8>> {
    use canon_json::CanonJsonSerialize as _;
    value
        .to_canon_json_vec()
        .context_with(|| format!("serializing {what}"))
}
