//! What is in an image, and what changes between two.
//!
//! `strata inspect` and `strata diff` print these structs (as text or
//! `--json`); they are plain serializable data so that the CLI only formats.
//! Packages come from the ostree commit's metadata (rpm-ostree's
//! `rpmostree.rpmdb.pkglist`, or the same-shaped `strata.packages`, type
//! `a(sssss)`: name, epoch, version, release, arch; a numeric epoch,
//! `a(stsss)`, is accepted too), read from the commit
//! object in the first layer — no repository needed — then updated by the
//! `strata.packages` annotation (a JSON list) of each derived layer. strata
//! puts the commit's whole list on the commit layer's annotation too, so a
//! registry image strata built is inspected from its manifest and config
//! alone (`skopeo inspect --raw`, `--config`); others are pulled.
//!
//! This module only reads images.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use ostree::glib;
use serde::{Deserialize, Serialize};

use crate::chunking::COMPONENTS_ANNOTATION;
use crate::error::{Error, Result};
use crate::import::{labels_of, split_layers};
use crate::labels::{LABEL_COMMIT, LABEL_VERSION};
use crate::layer_stream::{LayerCheck, DEFAULT_MAX_EXPANSION};
use crate::layout::{Layout, ResolvedImage};
use crate::tarball::normalize_entry_path;
use crate::transport::{ImageRef, TransportOptions};

/// Layer annotation of derived layers: JSON list of the [`Package`]s the
/// layer adds or replaces.
pub const PACKAGES_ANNOTATION: &str = "strata.packages";
/// Commit metadata key with the package list (rpm-ostree's).
pub const RPMOSTREE_PKGLIST: &str = "rpmostree.rpmdb.pkglist";
/// Commit metadata key with the package list (strata's, same type).
pub const STRATA_PKGLIST: &str = "strata.packages";

/// An installed package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Package {
    /// Name.
    pub name: String,
    /// `[epoch:]version-release`.
    pub evr: String,
    /// Architecture.
    pub arch: String,
}

/// What a layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// The ostree commit and metadata.
    Commit,
    /// ostree content objects.
    Chunk,
    /// A plain layer on top (derived image).
    Derived,
}

/// One layer as `inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerSummary {
    /// Blob digest.
    pub digest: String,
    /// Compressed size.
    pub size: u64,
    /// Media type.
    pub media_type: String,
    /// Kind.
    pub kind: LayerKind,
    /// Components (`ostree.components`).
    pub components: Vec<String>,
    /// History entry (`created_by`).
    pub description: Option<String>,
}

/// What `inspect` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    /// The reference inspected.
    pub image: String,
    /// Manifest digest.
    pub manifest_digest: String,
    /// Config digest.
    pub config_digest: String,
    /// `org.opencontainers.image.version`.
    pub version: Option<String>,
    /// The base ostree commit (`ostree.commit`).
    pub ostree_commit: Option<String>,
    /// Config `created`.
    pub created: Option<String>,
    /// All config labels.
    pub labels: BTreeMap<String, String>,
    /// Layers, bottom first.
    pub layers: Vec<LayerSummary>,
    /// Sum of layer sizes.
    pub total_size: u64,
    /// Packages, sorted by name and arch.
    pub packages: Vec<Package>,
    /// Whether a registry image's layers were downloaded to learn its
    /// packages (only when its manifest's annotations do not list them).
    pub pulled_layers: bool,
}

/// Inspects an image. A `docker://` image is read from its manifest and
/// config when they say everything (its packages in annotations), and
/// pulled to a temporary layout otherwise.
pub fn inspect(image: &ImageRef, opts: &TransportOptions) -> Result<ImageInfo> {
    match image {
        ImageRef::Oci { dir, tag } => {
            let layout = Layout::open(dir)?;
            let resolved = layout.resolve(tag.as_deref())?;
            // A missing or truncated layer shows here, not when the image
            // is next used (hashing every layer is `verify`'s job).
            for l in resolved.manifest.layers() {
                layout.check_blob_size(l)?;
            }
            info_of(&resolved, &image.to_string(), || {
                commit_packages(&layout, &resolved, Verified::No)
            })
        }
        ImageRef::Docker { .. } => {
            let remote = crate::transport::fetch_manifest_and_config(image, opts)?;
            if listed_in_annotations(&remote) {
                return info_of(&remote, &image.to_string(), || Ok(Vec::new()));
            }
            tracing::info!(
                "{image}: its packages are not in its manifest's annotations, pulling its layers"
            );
            let tmp = tempfile::tempdir().map_err(|source| Error::Io {
                context: "creating a temporary directory".into(),
                source,
            })?;
            let local = crate::transport::pull(image, tmp.path(), "inspect", opts)?;
            let mut info = inspect(&local, opts)?;
            info.image = image.to_string();
            info.pulled_layers = true;
            Ok(info)
        }
    }
}

/// Whether the manifest alone gives the image's packages: an ostree image
/// whose commit layer lists them (or no ostree image at all).
fn listed_in_annotations(image: &ResolvedImage) -> bool {
    split_layers(image, "").is_err()
        || image.manifest.layers().first().is_some_and(|l| {
            l.annotations()
                .as_ref()
                .is_some_and(|a| a.contains_key(PACKAGES_ANNOTATION))
        })
}

/// `commit_packages` gives the commit's package list when the commit
/// layer's annotation does not.
fn info_of(
    image: &ResolvedImage,
    name: &str,
    commit_packages: impl FnOnce() -> Result<Vec<Package>>,
) -> Result<ImageInfo> {
    let labels: BTreeMap<String, String> = labels_of(image).into_iter().collect();
    let split = split_layers(image, name).ok();
    let history: Vec<Option<String>> = image
        .config
        .history()
        .as_ref()
        .map(|h| {
            h.iter()
                .filter(|e| !e.empty_layer().unwrap_or(false))
                .map(|e| e.created_by().clone())
                .collect()
        })
        .unwrap_or_default();
    let layers: Vec<LayerSummary> = image
        .manifest
        .layers()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let kind = match split {
                Some(_) if i == 0 => LayerKind::Commit,
                Some(s) if i <= s.last_ostree => LayerKind::Chunk,
                _ => LayerKind::Derived,
            };
            let components = l
                .annotations()
                .as_ref()
                .and_then(|a| a.get(COMPONENTS_ANNOTATION))
                .map(|c| {
                    c.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            LayerSummary {
                digest: l.digest().to_string(),
                size: l.size(),
                media_type: l.media_type().to_string(),
                kind,
                components,
                description: history.get(i).cloned().flatten(),
            }
        })
        .collect();

    let mut packages: BTreeMap<(String, String), Package> = BTreeMap::new();
    if split.is_some() && !listed_in_annotations(image) {
        for p in commit_packages()? {
            packages.insert((p.name.clone(), p.arch.clone()), p);
        }
    }
    for l in image.manifest.layers() {
        if let Some(json) = l
            .annotations()
            .as_ref()
            .and_then(|a| a.get(PACKAGES_ANNOTATION))
        {
            let list: Vec<Package> = serde_json::from_str(json).map_err(|source| Error::Json {
                context: format!("{PACKAGES_ANNOTATION} annotation of layer {}", l.digest()),
                source,
            })?;
            for p in list {
                // A newer build of a package replaces any arch of the old one.
                packages.retain(|(n, a), _| {
                    !(n == &p.name && (a == &p.arch || p.arch == "noarch" || a == "noarch"))
                });
                packages.insert((p.name.clone(), p.arch.clone()), p);
            }
        }
    }
    Ok(ImageInfo {
        image: name.to_string(),
        manifest_digest: image.manifest_digest.clone(),
        config_digest: image.manifest.config().digest().to_string(),
        version: labels.get(LABEL_VERSION).cloned(),
        ostree_commit: labels.get(LABEL_COMMIT).cloned(),
        created: image.config.created().clone(),
        total_size: layers.iter().map(|l| l.size).sum(),
        labels,
        layers,
        packages: packages.into_values().collect(),
        pulled_layers: false,
    })
}

/// The package list in the commit object of a commit layer.
fn commit_packages(
    layout: &Layout,
    image: &ResolvedImage,
    verified: Verified,
) -> Result<Vec<Package>> {
    let Some(desc) = image.manifest.layers().first() else {
        return Ok(Vec::new());
    };
    if verified == Verified::No {
        layout.verify_blob(desc)?;
    }
    let bad = |reason: String| Error::BadLayer {
        digest: desc.digest().to_string(),
        reason,
    };
    let check = LayerCheck::of(image, 0, DEFAULT_MAX_EXPANSION);
    let mut archive = tar::Archive::new(layout.open_layer(desc, check)?);
    for entry in archive.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(format!("reading tar: {e}")))?;
        let Ok(path) = normalize_entry_path(&entry.path_bytes()) else {
            continue;
        };
        if !(path.starts_with("sysroot/ostree/repo/objects/") && path.ends_with(".commit")) {
            continue;
        }
        if entry.size() > 10 * 1024 * 1024 {
            return Err(bad("commit object too large".into()));
        }
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("reading the commit object: {e}")))?;
        return packages_in_commit_object(&data).map_err(bad);
    }
    Err(bad("no commit object in the first layer".into()))
}

/// The package list in a serialized commit object's metadata.
pub(crate) fn packages_in_commit_object(commit: &[u8]) -> Result<Vec<Package>, String> {
    let v = glib::Variant::from_data_with_type(
        commit,
        &ostree::metadata_variant_type(ostree::ObjectType::Commit),
    );
    packages_of_commit(&v)
}

/// The package list in a commit object's metadata (empty if it has none).
fn packages_of_commit(v: &glib::Variant) -> Result<Vec<Package>, String> {
    let (meta, ..) = v
        .try_get::<ostree::CommitVariantType>()
        .map_err(|e| format!("bad commit object: {e}"))?;
    // rpm-ostree writes `a(sssss)` (epoch as a string); accept a numeric
    // epoch (`a(stsss)`) too.
    type PkgList = Vec<(String, String, String, String, String)>;
    type PkgListNumericEpoch = Vec<(String, u64, String, String, String)>;
    let list = [RPMOSTREE_PKGLIST, STRATA_PKGLIST]
        .iter()
        .find_map(|k| {
            meta.lookup::<PkgList>(k).ok().flatten().or_else(|| {
                meta.lookup::<PkgListNumericEpoch>(k)
                    .ok()
                    .flatten()
                    .map(|l| {
                        l.into_iter()
                            .map(|(n, e, v, r, a)| (n, e.to_string(), v, r, a))
                            .collect()
                    })
            })
        })
        .unwrap_or_default();
    Ok(list
        .into_iter()
        .map(|(name, epoch, version, release, arch)| Package {
            name,
            evr: if epoch.is_empty() || epoch == "0" {
                format!("{version}-{release}")
            } else {
                format!("{epoch}:{version}-{release}")
            },
            arch,
        })
        .collect())
}

/// A package in both images with another version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageChange {
    /// Name.
    pub name: String,
    /// Architecture.
    pub arch: String,
    /// `evr` in the first image.
    pub from: String,
    /// `evr` in the second image.
    pub to: String,
}

/// What `diff` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageDiff {
    /// The first image.
    pub from: String,
    /// The second image.
    pub to: String,
    /// Packages only in the second image.
    pub packages_added: Vec<Package>,
    /// Packages only in the first image.
    pub packages_removed: Vec<Package>,
    /// Packages whose version changed.
    pub packages_changed: Vec<PackageChange>,
    /// Layer digests in both.
    pub layers_shared: Vec<String>,
    /// Layers of the second image a client holding the first must fetch.
    pub layers_added: Vec<LayerSummary>,
    /// Layers of the first image the second no longer has.
    pub layers_removed: Vec<LayerSummary>,
    /// Bytes a client holding the first image downloads for the second.
    pub download_bytes: u64,
}

impl ImageDiff {
    /// Compares two inspected images.
    pub fn between(a: &ImageInfo, b: &ImageInfo) -> ImageDiff {
        let key = |p: &Package| (p.name.clone(), p.arch.clone());
        let pa: BTreeMap<_, _> = a.packages.iter().map(|p| (key(p), p)).collect();
        let pb: BTreeMap<_, _> = b.packages.iter().map(|p| (key(p), p)).collect();
        let mut packages_changed = Vec::new();
        for (k, old) in &pa {
            if let Some(new) = pb.get(k) {
                if old.evr != new.evr {
                    packages_changed.push(PackageChange {
                        name: k.0.clone(),
                        arch: k.1.clone(),
                        from: old.evr.clone(),
                        to: new.evr.clone(),
                    });
                }
            }
        }
        let da: BTreeSet<&str> = a.layers.iter().map(|l| l.digest.as_str()).collect();
        let db: BTreeSet<&str> = b.layers.iter().map(|l| l.digest.as_str()).collect();
        let mut seen = BTreeSet::new();
        let layers_added: Vec<LayerSummary> = b
            .layers
            .iter()
            .filter(|l| !da.contains(l.digest.as_str()) && seen.insert(l.digest.clone()))
            .cloned()
            .collect();
        ImageDiff {
            from: a.image.clone(),
            to: b.image.clone(),
            packages_added: pb
                .iter()
                .filter(|(k, _)| !pa.contains_key(*k))
                .map(|(_, p)| (*p).clone())
                .collect(),
            packages_removed: pa
                .iter()
                .filter(|(k, _)| !pb.contains_key(*k))
                .map(|(_, p)| (*p).clone())
                .collect(),
            packages_changed,
            layers_shared: b
                .layers
                .iter()
                .filter(|l| da.contains(l.digest.as_str()))
                .map(|l| l.digest.clone())
                .collect(),
            download_bytes: layers_added.iter().map(|l| l.size).sum(),
            layers_added,
            layers_removed: a
                .layers
                .iter()
                .filter(|l| !db.contains(l.digest.as_str()))
                .cloned()
                .collect(),
        }
    }
}

/// [`inspect`], once every layer of an image of a layout hashes to its
/// digest (the layers in parallel): what `strata inspect` and `strata
/// diff` show is then the image's content, not only its manifest's word
/// about it (a corrupt layer of the right size fails here, where plain
/// [`inspect`], the stages' cheap look at an image, would pass it). A
/// registry image's layers are verified as they are pulled, when they
/// are.
///
/// The tag is resolved once: the layers hashed are the ones reported on,
/// and the commit layer's package list is read from the layer just
/// hashed, not hashed again.
pub fn inspect_verified(image: &ImageRef, opts: &TransportOptions) -> Result<ImageInfo> {
    use rayon::prelude::*;
    let ImageRef::Oci { .. } = image else {
        return inspect(image, opts);
    };
    let (layout, resolved) = crate::layout::open_image(image)?;
    resolved
        .manifest
        .layers()
        .par_iter()
        .try_for_each(|l| layout.verify_blob(l))?;
    info_of(&resolved, &image.to_string(), || {
        commit_packages(&layout, &resolved, Verified::Already)
    })
}

/// Whether a layer was hashed before it is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verified {
    Already,
    No,
}

/// Inspects both images, verified ([`inspect_verified`]), and compares
/// them.
pub fn diff(a: &ImageRef, b: &ImageRef, opts: &TransportOptions) -> Result<ImageDiff> {
    Ok(ImageDiff::between(
        &inspect_verified(a, opts)?,
        &inspect_verified(b, opts)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str, evr: &str) -> Package {
        Package {
            name: name.into(),
            evr: evr.into(),
            arch: "x86_64".into(),
        }
    }

    fn layer(d: &str, size: u64) -> LayerSummary {
        LayerSummary {
            digest: d.into(),
            size,
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip".into(),
            kind: LayerKind::Chunk,
            components: vec![],
            description: None,
        }
    }

    fn info(name: &str, packages: Vec<Package>, layers: Vec<LayerSummary>) -> ImageInfo {
        ImageInfo {
            image: name.into(),
            manifest_digest: String::new(),
            config_digest: String::new(),
            version: None,
            ostree_commit: None,
            created: None,
            labels: BTreeMap::new(),
            total_size: layers.iter().map(|l| l.size).sum(),
            layers,
            packages,
            pulled_layers: false,
        }
    }

    fn commit_with(key: &str, list: glib::Variant) -> glib::Variant {
        use glib::prelude::*;
        let meta = glib::VariantDict::new(None);
        meta.insert_value(key, &list);
        glib::Variant::tuple_from_iter([
            meta.end(),
            Vec::<u8>::new().to_variant(),
            Vec::<(String, Vec<u8>)>::new().to_variant(),
            "subject".to_variant(),
            "".to_variant(),
            0u64.to_variant(),
            vec![0u8; 32].to_variant(),
            vec![0u8; 32].to_variant(),
        ])
    }

    #[test]
    fn package_lists_with_string_or_numeric_epochs() {
        use glib::prelude::*;
        let s = vec![("bash", "1", "5.1", "2.el8", "x86_64")].to_variant();
        let t = vec![("bash", 1u64, "5.1", "2.el8", "x86_64")].to_variant();
        let want = vec![Package {
            name: "bash".into(),
            evr: "1:5.1-2.el8".into(),
            arch: "x86_64".into(),
        }];
        for (key, list) in [
            (RPMOSTREE_PKGLIST, s.clone()),
            (RPMOSTREE_PKGLIST, t),
            (STRATA_PKGLIST, s),
        ] {
            assert_eq!(packages_of_commit(&commit_with(key, list)).unwrap(), want);
        }
        assert!(packages_of_commit(&commit_with("other", true.to_variant()))
            .unwrap()
            .is_empty());
        assert!(packages_of_commit(&true.to_variant()).is_err());
    }

    #[test]
    fn diff_of_two_images() {
        let a = info(
            "a",
            vec![
                pkg("bash", "5.1-1"),
                pkg("glibc", "2.28-1"),
                pkg("old", "1-1"),
            ],
            vec![layer("c1", 10), layer("l1", 100), layer("l2", 200)],
        );
        let b = info(
            "b",
            vec![
                pkg("bash", "5.1-1"),
                pkg("glibc", "2.28-2"),
                pkg("new", "1-1"),
            ],
            vec![layer("c2", 11), layer("l1", 100), layer("l3", 300)],
        );
        let d = ImageDiff::between(&a, &b);
        assert_eq!(d.packages_added, vec![pkg("new", "1-1")]);
        assert_eq!(d.packages_removed, vec![pkg("old", "1-1")]);
        assert_eq!(
            d.packages_changed,
            vec![PackageChange {
                name: "glibc".into(),
                arch: "x86_64".into(),
                from: "2.28-1".into(),
                to: "2.28-2".into()
            }]
        );
        assert_eq!(d.layers_shared, vec!["l1".to_string()]);
        assert_eq!(d.download_bytes, 311);
        assert_eq!(d.layers_removed.len(), 2);
    }
}
