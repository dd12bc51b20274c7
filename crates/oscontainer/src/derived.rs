//! Derived images: a base image plus plain layers on top.
//!
//! `derive` specialises a base image per OpenShift release by adding layers;
//! the base layers must stay byte-identical (same descriptors), and
//! `ostree.final-diffid` keeps naming the base's last ostree layer, so clients
//! know where ostree content stops. Each derived layer is built from a
//! directory of changes — typically an overlayfs upper directory: 0:0
//! character devices are deletions and become `.wh.NAME` whiteouts, a
//! directory marked opaque (`trusted.overlay.opaque` or
//! `user.overlay.opaque` = `y`) gets `.wh..wh..opq`, hard links inside the
//! directory stay hard links, other xattrs travel as `SCHILY.xattr.*` PAX
//! records, and `usr/etc` is written as `etc` (the container view, as in the
//! base). The tar is canonical: sorted names, numeric owners, mtimes clamped
//! to SOURCE_DATE_EPOCH. Overlay `redirect_dir`/`metacopy` features must be
//! off when producing the directory: their xattrs are not followed.
//!
//! This module must not know what a package is beyond the names and
//! versions the caller puts in annotations.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::BufWriter;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use oci_spec::image::{
    Descriptor, DescriptorBuilder, History, HistoryBuilder, ImageManifestBuilder, MediaType,
};
use rayon::prelude::*;
use serde::Serialize;
use strata_process::gzip::BlockIndex;

use crate::chunking::COMPONENTS_ANNOTATION;
use crate::compress::{Compression, Encoder, GZIP_LEVEL};
use crate::encapsulate::{oci_err, LayerInfo};
use crate::error::{Context, Error, Result};
use crate::gzip_blocks::GzipBlocks;
use crate::import::{commit_streamed_layer, labels_of, split_layers, StreamedCommit};
use crate::inspect::{Package, PACKAGES_ANNOTATION};
use crate::labels::{parse_rfc3339, rfc3339, LABEL_COMMIT, LABEL_VERSION};
use crate::layer_stream::ReadAhead;
use crate::layout::{Layout, ResolvedImage};
use crate::tarball::{Meta, TarWriter};

/// One derived layer to add.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DerivedLayer {
    /// Directory holding the layer's changes (an overlayfs upper dir).
    pub dir: PathBuf,
    /// Names of the components (packages) in the layer; annotated as
    /// `ostree.components`.
    pub components: Vec<String>,
    /// Packages the layer adds or replaces; annotated as `strata.packages`
    /// so that `inspect` lists them.
    pub packages: Vec<Package>,
    /// History entry (`created_by`).
    pub description: String,
}

impl DerivedLayer {
    /// A layer from `dir` with no annotations.
    pub fn new(dir: &Path, description: &str) -> Self {
        Self {
            dir: dir.to_path_buf(),
            components: Vec::new(),
            packages: Vec::new(),
            description: description.to_string(),
        }
    }
}

/// How to write a derived image.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DeriveOptions {
    /// Labels to add or replace (e.g. `org.opencontainers.image.version`,
    /// `com.coreos.openshift-version`, `io.openshift.build.versions`).
    pub labels: BTreeMap<String, String>,
    /// Layer compression.
    pub compression: Compression,
    /// SOURCE_DATE_EPOCH: the config's `created`, history times, and the
    /// upper bound of tar mtimes. Default: the base image's `created`, and
    /// mtimes as found.
    pub source_date_epoch: Option<u64>,
    /// Write the image without tagging it: [`Derived::pending_tag`] tags
    /// it, once the caller has recorded the build.
    pub defer_tag: bool,
    /// Where the gzip blocks of the layers written are listed, so that a
    /// later layer can copy them instead of deflating them again (see
    /// `crate::gzip_blocks`; a cache: the layers' bytes are the same
    /// without it).
    pub gzip_blocks: Option<PathBuf>,
    /// A tag of the same layout (the build before this one) whose added
    /// layers' gzip blocks [`DeriveOptions::gzip_blocks`] may give.
    pub previous: Option<String>,
    /// The ostree commit of the build before this one: building the
    /// derived commit ([`append_layer_committing`]), a file at a path that
    /// commit has a file at is hashed before it is written, and not
    /// written when the repository has it.
    pub previous_commit: Option<String>,
}

/// What [`append_layers`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Derived {
    /// `oci:DIR:TAG` of the new image.
    pub image: String,
    /// Manifest digest.
    pub manifest_digest: String,
    /// Config digest.
    pub config_digest: String,
    /// The base image's manifest digest.
    pub base_manifest_digest: String,
    /// `org.opencontainers.image.version`.
    pub version: Option<String>,
    /// The added layers.
    pub layers: Vec<LayerInfo>,
    /// With [`DeriveOptions::defer_tag`]: what tags the image.
    #[serde(skip)]
    pub pending_tag: Option<crate::layout::PendingTag>,
}

/// Writes image `tag` = image `base_tag` of the layout `oci` plus `layers`.
pub fn append_layers(
    oci: &Path,
    base_tag: &str,
    tag: &str,
    layers: &[DerivedLayer],
    opts: &DeriveOptions,
) -> Result<Derived> {
    Ok(append(oci, base_tag, tag, layers, opts, None)?.0)
}

/// The commit of a derived image, built while its layer is written
/// ([`append_layer_committing`]); [`PendingCommit::commit`] ends it.
#[derive(Debug)]
pub struct PendingCommit {
    go: std::sync::mpsc::Sender<bool>,
    builder: std::thread::JoinHandle<Result<String>>,
}

impl PendingCommit {
    /// Commits the repository transaction (and moves the ref): the commit
    /// [`crate::import`] of the image would give. None when building it
    /// failed: then import the image. Dropped instead, nothing is written.
    pub fn commit(self) -> Option<String> {
        let _ = self.go.send(true);
        match self.builder.join() {
            Ok(Ok(commit)) => Some(commit),
            Ok(Err(e)) => {
                tracing::debug!("the streamed derived commit failed: {e}");
                None
            }
            Err(_) => None,
        }
    }
}

/// [`append_layers`] of one layer, which also builds the image's commit in
/// the ostree repository `repo` (whose base commit must be whole) from the
/// layer's tar stream as it is written, on a thread of its own: what
/// [`crate::import`] with `reuse_base` gives, without reading the layer
/// back. The commit is pending until [`PendingCommit::commit`]; there is
/// none when the base image has derived layers of its own or no
/// `ostree.commit` label.
pub fn append_layer_committing(
    oci: &Path,
    base_tag: &str,
    tag: &str,
    layer: &DerivedLayer,
    opts: &DeriveOptions,
    repo: &Path,
    ref_name: Option<&str>,
) -> Result<(Derived, Option<PendingCommit>)> {
    append(
        oci,
        base_tag,
        tag,
        std::slice::from_ref(layer),
        opts,
        Some((repo, ref_name)),
    )
}

fn append(
    oci: &Path,
    base_tag: &str,
    tag: &str,
    layers: &[DerivedLayer],
    opts: &DeriveOptions,
    committing: Option<(&Path, Option<&str>)>,
) -> Result<(Derived, Option<PendingCommit>)> {
    if tag.is_empty() || tag.contains('/') || tag.contains(':') {
        return Err(Error::InvalidOption(format!(
            "tag {tag:?} must be non-empty and contain no '/' or ':'"
        )));
    }
    let layout = Layout::open(oci)?;
    let base = layout.resolve(Some(base_tag))?;
    let split = split_layers(&base, &format!("oci:{}:{base_tag}", oci.display()))?;
    // The base's layers are referenced, not read: each must be present at
    // its size. Their digests were checked when they entered the layout
    // (written by strata as they were hashed, or copied in by a pull that
    // verifies them); a push or an archive checks them again as it copies.
    // Hashing them here (a gigabyte at RHCOS size) was most of a kubelet
    // override rebuild.
    for l in base.manifest.layers() {
        layout.check_blob_size(l)?;
    }
    for l in layers {
        for c in &l.components {
            if c.is_empty() || c.contains(',') {
                return Err(Error::InvalidOption(format!("component name {c:?}")));
            }
        }
    }
    let ocidir = Layout::ocidir(oci)?;
    let created = match opts.source_date_epoch {
        Some(t) => Some(rfc3339(t)),
        None => base.config.created().clone(),
    };
    let mut labels = labels_of(&base);
    // The image republishes the base's labels: none leaves unchecked.
    // (The caller's own, `opts.labels`, are the caller's word.)
    crate::labels::check_all(&labels.clone().into_iter().collect())?;
    labels.extend(opts.labels.clone());
    // The commit import would build: the base commit (the label names it)
    // plus this one layer, when the base has no derived layers of its own.
    let streamed = match (committing, labels.get(LABEL_COMMIT)) {
        (Some((repo, ref_name)), Some(base_commit))
            if layers.len() == 1 && split.last_ostree + 1 == base.manifest.layers().len() =>
        {
            let job = StreamedCommit {
                repo: repo.to_path_buf(),
                base: base_commit.clone(),
                version: labels.get(LABEL_VERSION).cloned(),
                created: created.as_deref().and_then(parse_rfc3339),
                ref_name: ref_name.map(str::to_string),
                previous: opts.previous_commit.clone(),
            };
            let (tar, chunks) = std::sync::mpsc::sync_channel(4);
            let (go, going) = std::sync::mpsc::channel();
            let builder = std::thread::spawn(move || {
                commit_streamed_layer(&job, Box::new(ReadAhead::from_channel(chunks)), going)
            });
            Some((tar, PendingCommit { go, builder }))
        }
        _ => None,
    };
    let (tee, pending) = streamed.unzip();
    let blocks = opts.gzip_blocks.as_ref().map(|dir| BlockReuse {
        cache: GzipBlocks::new(dir, oci),
        earlier: previous_layers(&layout, opts.previous.as_deref(), &base),
    });
    let written: Vec<Result<ocidir::Layer>> = if let [layer] = layers {
        vec![write_dir_layer(
            &ocidir,
            layer,
            opts.into(),
            tee,
            blocks.as_ref(),
        )]
    } else {
        layers
            .par_iter()
            .map(|l| write_dir_layer(&ocidir, l, opts.into(), None, blocks.as_ref()))
            .collect()
    };

    let mut manifest_layers = base.manifest.layers().clone();
    let mut config = base.config.clone();
    let mut infos = Vec::new();
    for (l, w) in layers.iter().zip(written) {
        let (desc, info) = layer_entry(l, w?)?;
        config
            .rootfs_mut()
            .diff_ids_mut()
            .push(info.diff_id.clone());
        config
            .history_mut()
            .get_or_insert_with(Vec::new)
            .push(history(l, created.as_deref())?);
        infos.push(info);
        manifest_layers.push(desc);
    }
    config.set_created(created);
    let mut ctr = config.config().clone().unwrap_or_default();
    ctr.set_labels(Some(labels.clone()));
    config.set_config(Some(ctr));

    let layout_err = |source| Error::Layout {
        path: oci.to_path_buf(),
        source,
    };
    let config_desc = ocidir.write_config(config).map_err(layout_err)?;
    let mut annotations = base.manifest.annotations().clone().unwrap_or_default();
    annotations.extend(opts.labels.clone());
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config_desc.clone())
        .layers(manifest_layers)
        .annotations(annotations)
        .build()
        .map_err(oci_err)?;
    let (desc, pending_tag) =
        crate::layout::write_manifest(&ocidir, oci, manifest, tag, opts.defer_tag)?;
    Ok((
        Derived {
            image: format!("oci:{}:{tag}", oci.display()),
            manifest_digest: desc.digest().to_string(),
            config_digest: config_desc.digest().to_string(),
            base_manifest_digest: base.manifest_digest,
            version: labels.get(LABEL_VERSION).cloned(),
            layers: infos,
            pending_tag,
        },
        pending,
    ))
}

/// A written layer's manifest descriptor (annotated with its components
/// and packages) and what the caller reports of it.
pub(crate) fn layer_entry(l: &DerivedLayer, w: ocidir::Layer) -> Result<(Descriptor, LayerInfo)> {
    let mut annotations = HashMap::new();
    let mut components = l.components.clone();
    components.sort();
    components.dedup();
    annotations.insert(COMPONENTS_ANNOTATION.to_string(), components.join(","));
    if !l.packages.is_empty() {
        let mut p = l.packages.clone();
        p.sort();
        annotations.insert(
            PACKAGES_ANNOTATION.to_string(),
            serde_json::to_string(&p).context_with(|| "serializing packages".into())?,
        );
    }
    let desc = DescriptorBuilder::default()
        .media_type(w.media_type.clone())
        .digest(w.blob.sha256().clone())
        .size(w.blob.size())
        .annotations(annotations)
        .build()
        .map_err(oci_err)?;
    let info = LayerInfo {
        digest: desc.digest().to_string(),
        size: desc.size(),
        diff_id: format!("sha256:{}", w.uncompressed_sha256.digest()),
        components,
        description: l.description.clone(),
    };
    Ok((desc, info))
}

/// The config's history entry of a layer.
pub(crate) fn history(l: &DerivedLayer, created: Option<&str>) -> Result<History> {
    let mut h = HistoryBuilder::default().created_by(l.description.clone());
    if let Some(c) = created {
        h = h.created(c.to_string());
    }
    h.build().map_err(oci_err)
}

/// The layer writer, also sending a copy of every byte to `copy` (until
/// its reader is gone).
struct Tee<W> {
    inner: W,
    copy: Option<TarCopy>,
}

/// Where a copy of a layer's tar stream goes ([`ReadAhead::from_channel`]).
pub(crate) type TarCopy = std::sync::mpsc::SyncSender<std::io::Result<Vec<u8>>>;

impl<W: std::io::Write> std::io::Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        // (An empty chunk would end the copy.)
        if let (Some(copy), true) = (&self.copy, n > 0) {
            if copy.send(Ok(buf[..n].to_vec())).is_err() {
                self.copy = None;
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// How a directory becomes a layer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerWriting {
    pub compression: Compression,
    /// Upper bound of mtimes (SOURCE_DATE_EPOCH).
    pub clamp: Option<u64>,
    /// Whether `usr/etc` is written as `etc`: the container view of an
    /// ostree tree, which derived layers are changes to. A plain image's
    /// paths are written as they are.
    pub container_view: bool,
}

impl From<&DeriveOptions> for LayerWriting {
    fn from(opts: &DeriveOptions) -> Self {
        Self {
            compression: opts.compression,
            clamp: opts.source_date_epoch,
            container_view: true,
        }
    }
}

/// The gzip blocks a layer may copy (those of `earlier` blobs), and where
/// its own are listed.
pub(crate) struct BlockReuse {
    cache: GzipBlocks,
    earlier: Vec<String>,
}

/// The digests of the layers image `previous` adds to `base`: what the
/// build before this one wrote; none when there is no such image.
fn previous_layers(layout: &Layout, previous: Option<&str>, base: &ResolvedImage) -> Vec<String> {
    let Some(image) = previous.and_then(|tag| layout.resolve(Some(tag)).ok()) else {
        return Vec::new();
    };
    let in_base: std::collections::HashSet<String> = base
        .manifest
        .layers()
        .iter()
        .map(|l| l.digest().to_string())
        .collect();
    image
        .manifest
        .layers()
        .iter()
        .map(|l| l.digest().to_string())
        .filter(|d| !in_base.contains(d))
        .collect()
}

/// Writes `layer` into the layout; a copy of its tar stream goes to
/// `copy`, ended by an empty chunk once the tar is complete. With
/// `blocks` and gzip, the layer's gzip blocks start at its large files,
/// are copied from earlier layers where they can be, and are listed.
pub(crate) fn write_dir_layer(
    ocidir: &ocidir::OciDir,
    layer: &DerivedLayer,
    how: LayerWriting,
    copy: Option<TarCopy>,
    blocks: Option<&BlockReuse>,
) -> Result<ocidir::Layer> {
    let c = how.compression;
    let blocks = blocks.filter(|_| c == Compression::Gzip);
    let index = blocks.map(|_| BlockIndex::default());
    let lw = ocidir
        .create_custom_layer(
            |bw| match (blocks, &index) {
                (Some(b), Some(index)) => Encoder::gzip_indexed(
                    bw,
                    index.clone(),
                    b.cache.earlier(&b.earlier, GZIP_LEVEL),
                ),
                _ => Encoder::new(c, bw),
            },
            c.media_type(),
        )
        .map_err(|source| Error::Layout {
            path: layer.dir.clone(),
            source,
        })?;
    let tee = Tee { inner: lw, copy };
    let mut t = TarWriter::new(BufWriter::with_capacity(256 * 1024, tee), 0);
    if let Some(index) = &index {
        t.cut_at_large_files(index.clone());
    }
    let mut w = DirWalker {
        root: &layer.dir,
        clamp: how.clamp,
        container_view: how.container_view,
        links: HashMap::new(),
    };
    w.dir(&mut t, &layer.dir, "")?;
    let io = |source| Error::Io {
        context: format!("writing the layer from {}", layer.dir.display()),
        source,
    };
    let tee = t
        .finish()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    if let Some(copy) = tee.copy {
        let _ = copy.send(Ok(Vec::new()));
    }
    let written = tee.inner.complete().map_err(|source| Error::Layout {
        path: layer.dir.clone(),
        source,
    })?;
    if let (Some(b), Some(index)) = (blocks, index) {
        let digest = format!("sha256:{}", written.blob.sha256().digest());
        let listed = index.blocks();
        tracing::debug!(
            "{digest}: {} of {} gzip blocks copied from the layers before",
            index.copied(),
            listed.len()
        );
        // A cache: the layer is whole without its entry.
        if let Err(e) = b
            .cache
            .put(&digest, written.blob.size(), GZIP_LEVEL, &listed)
        {
            tracing::warn!("{e}");
        }
    }
    Ok(written)
}

struct DirWalker<'a> {
    root: &'a Path,
    clamp: Option<u64>,
    container_view: bool,
    /// (dev, ino) of multiply-linked files → their first tar path.
    links: HashMap<(u64, u64), String>,
}

/// The container-view name of a path relative to the layer root.
fn tar_name(rel: &str) -> String {
    if rel == "usr/etc" || rel.starts_with("usr/etc/") {
        rel[4..].to_string()
    } else {
        rel.to_string()
    }
}

impl DirWalker<'_> {
    fn meta(&self, m: &fs::Metadata) -> Meta {
        Meta {
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode() & 0o7777,
        }
    }

    fn with_mtime<W: std::io::Write>(&self, t: &mut TarWriter<W>, m: &fs::Metadata) {
        let mtime = u64::try_from(m.mtime()).unwrap_or(0);
        t.set_mtime(self.clamp.map_or(mtime, |c| mtime.min(c)));
    }

    fn dir<W: std::io::Write>(
        &mut self,
        t: &mut TarWriter<W>,
        dir: &Path,
        rel: &str,
    ) -> Result<()> {
        let ctx = |p: &Path| format!("reading {}", p.display());
        let mut names: Vec<std::ffi::OsString> = fs::read_dir(dir)
            .context_with(|| ctx(dir))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()
            .context_with(|| ctx(dir))?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let name = name.into_string().map_err(|n| {
                Error::InvalidOption(format!(
                    "{}: non-UTF-8 file name {n:?}",
                    self.root.display()
                ))
            })?;
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let tname = if self.container_view {
                tar_name(&child)
            } else {
                child.clone()
            };
            let m = fs::symlink_metadata(&path).context_with(|| ctx(&path))?;
            let ft = m.file_type();
            let err = |source| Error::Io {
                context: format!("writing {tname} from {}", self.root.display()),
                source,
            };
            self.with_mtime(t, &m);
            if ft.is_char_device() && m.rdev() == 0 {
                // overlayfs whiteout.
                let parent = tname
                    .rsplit_once('/')
                    .map(|(p, _)| format!("{p}/"))
                    .unwrap_or_default();
                t.data(&format!("{parent}.wh.{name}"), Meta::root(0o644), b"")
                    .map_err(err)?;
            } else if ft.is_dir() {
                t.pax(&xattrs(&path)?).map_err(err)?;
                t.dir(&tname, self.meta(&m)).map_err(err)?;
                if is_opaque(&path)? {
                    t.data(&format!("{tname}/.wh..wh..opq"), Meta::root(0o644), b"")
                        .map_err(err)?;
                }
                self.dir(t, &path, &child)?;
            } else if ft.is_symlink() {
                let target = fs::read_link(&path).context_with(|| ctx(&path))?;
                let target = target.to_str().ok_or_else(|| {
                    Error::InvalidOption(format!("{}: non-UTF-8 symlink target", path.display()))
                })?;
                t.pax(&xattrs(&path)?).map_err(err)?;
                t.symlink(&tname, self.meta(&m), target).map_err(err)?;
            } else if ft.is_file() {
                if m.nlink() > 1 {
                    if let Some(first) = self.links.get(&(m.dev(), m.ino())) {
                        t.hardlink(&tname, self.meta(&m), first).map_err(err)?;
                        continue;
                    }
                    self.links.insert((m.dev(), m.ino()), tname.clone());
                }
                let mut f = fs::File::open(&path).context_with(|| ctx(&path))?;
                t.pax(&xattrs(&path)?).map_err(err)?;
                t.file(&tname, self.meta(&m), m.len(), &mut f)
                    .map_err(err)?;
            } else {
                return Err(Error::InvalidOption(format!(
                    "{}: sockets, FIFOs and device nodes are not written into layers",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

/// xattr names that describe the overlay or the store a file came from,
/// not the file: overlay bookkeeping, and the `user.ostreemeta` that files
/// copied up from a checkout of a bare-user repository carry.
fn is_overlay_xattr(name: &str) -> bool {
    name.starts_with("trusted.overlay.")
        || name.starts_with("user.overlay.")
        || name == "user.ostreemeta"
}

fn is_opaque(path: &Path) -> Result<bool> {
    strata_process::xattr::overlay_opaque(path)
        .context_with(|| "reading the overlay's upper dir".to_string())
}

/// The xattrs of a file as PAX records, overlay bookkeeping excluded.
fn xattrs(path: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out: Vec<(String, Vec<u8>)> = strata_process::xattr::all(path)
        .context_with(|| "copying xattrs into the derived layer".to_string())?
        .into_iter()
        .map(|(name, value)| (name.to_string_lossy().into_owned(), value))
        .filter(|(name, _)| !is_overlay_xattr(name))
        .map(|(name, value)| (format!("SCHILY.xattr.{name}"), value))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_use_the_container_view() {
        assert_eq!(tar_name("usr/etc/crio/crio.conf"), "etc/crio/crio.conf");
        assert_eq!(tar_name("usr/etc"), "etc");
        assert_eq!(tar_name("usr/bin/kubelet"), "usr/bin/kubelet");
        assert!(is_overlay_xattr("trusted.overlay.opaque"));
        assert!(is_overlay_xattr("user.ostreemeta"));
        assert!(!is_overlay_xattr("security.capability"));
    }
}
