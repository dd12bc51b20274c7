//! Image references and registry transfer (skopeo).
//!
//! strata names images as `oci:DIR:TAG` (an OCI layout on disk),
//! `docker://HOST/NAME:TAG` (a registry), or a bare tag meaning the workdir's
//! layout. Moving images between a layout and a registry is skopeo's job, as
//! it is for users: `skopeo copy --preserve-digests`, so that a pushed image
//! keeps its manifest digest. This module parses references (pure) and runs
//! skopeo through [`strata_process`]; it does not read layers.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::error::{Error, Result};

/// Where an image is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "transport", rename_all = "lowercase")]
pub enum ImageRef {
    /// `oci:DIR[:TAG]`: an OCI image layout directory.
    Oci {
        /// The layout directory.
        dir: PathBuf,
        /// The tag (`org.opencontainers.image.ref.name`); without one the
        /// layout must hold a single image.
        tag: Option<String>,
    },
    /// `docker://HOST/NAME[:TAG|@DIGEST]`: a registry.
    Docker {
        /// The reference without `docker://`.
        reference: String,
    },
}

impl ImageRef {
    /// Parses `oci:DIR[:TAG]` or `docker://…`; a bare `TAG` (no `:` or `/`
    /// before it) names that tag in `default_layout` when one is given.
    pub fn parse(s: &str, default_layout: Option<&Path>) -> Result<ImageRef> {
        let bad = |reason: &str| Error::BadReference {
            reference: s.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = s.strip_prefix("oci:") {
            let (dir, tag) = match rest.rsplit_once(':') {
                Some((dir, tag)) if !tag.contains('/') => (dir, Some(tag)),
                _ => (rest, None),
            };
            if dir.is_empty() {
                return Err(bad("missing directory"));
            }
            if tag.is_some_and(str::is_empty) {
                return Err(bad("empty tag"));
            }
            return Ok(ImageRef::Oci {
                dir: PathBuf::from(dir),
                tag: tag.map(str::to_string),
            });
        }
        if let Some(rest) = s.strip_prefix("docker://") {
            if rest.is_empty() || rest.starts_with('/') {
                return Err(bad("missing registry reference"));
            }
            return Ok(ImageRef::Docker {
                reference: rest.to_string(),
            });
        }
        match default_layout {
            Some(layout) if valid_tag(s) => Ok(ImageRef::Oci {
                dir: layout.to_path_buf(),
                tag: Some(s.to_string()),
            }),
            _ => Err(bad("expected oci:DIR:TAG, docker://HOST/NAME:TAG or a tag")),
        }
    }

    /// `oci:DIR:TAG` for a tag in a layout.
    pub fn oci(dir: &Path, tag: &str) -> ImageRef {
        ImageRef::Oci {
            dir: dir.to_path_buf(),
            tag: Some(tag.to_string()),
        }
    }
}

fn valid_tag(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !s.starts_with(['.', '-'])
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRef::Oci { dir, tag: Some(t) } => write!(f, "oci:{}:{t}", dir.display()),
            ImageRef::Oci { dir, tag: None } => write!(f, "oci:{}", dir.display()),
            ImageRef::Docker { reference } => write!(f, "docker://{reference}"),
        }
    }
}

/// Options for talking to registries.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TransportOptions {
    /// Verify TLS certificates and require HTTPS (default true).
    pub tls_verify: bool,
    /// A containers-auth.json file with credentials.
    pub authfile: Option<PathBuf>,
}

impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            tls_verify: true,
            authfile: None,
        }
    }
}

/// Copies `src` to `dest` with `skopeo copy --preserve-digests`.
pub fn copy(src: &ImageRef, dest: &ImageRef, opts: &TransportOptions) -> Result<()> {
    if let ImageRef::Oci { dir, .. } = dest {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            context: format!("creating {}", dir.display()),
            source,
        })?;
    }
    let mut cmd = Command::new("skopeo");
    cmd.arg("copy").arg("--quiet").arg("--preserve-digests");
    let tls = format!("--tls-verify={}", opts.tls_verify);
    if matches!(src, ImageRef::Docker { .. }) {
        cmd.arg(format!("--src-{}", &tls[2..]));
    }
    if matches!(dest, ImageRef::Docker { .. }) {
        cmd.arg(format!("--dest-{}", &tls[2..]));
    }
    if let Some(auth) = &opts.authfile {
        cmd.arg("--authfile").arg(auth);
    }
    cmd.arg(src.to_string()).arg(dest.to_string());
    strata_process::run(&mut cmd)?;
    Ok(())
}

/// `skopeo inspect --raw` of a registry image (`config`: its config
/// instead): the registry's bytes, as they hash to their digests.
fn skopeo_raw(reference: &str, config: bool, opts: &TransportOptions) -> Result<Vec<u8>> {
    let mut cmd = Command::new("skopeo");
    cmd.arg("inspect")
        .arg("--raw")
        .arg(format!("--tls-verify={}", opts.tls_verify));
    if config {
        cmd.arg("--config");
    }
    if let Some(auth) = &opts.authfile {
        cmd.arg("--authfile").arg(auth);
    }
    cmd.arg(format!("docker://{reference}"));
    Ok(strata_process::run(&mut cmd)?.stdout)
}

/// A registry image's manifest and config, without its layers: the
/// manifest as the registry serves it (for a manifest list, the
/// linux/amd64 image's), the config checked against the manifest's digest.
pub(crate) fn fetch_manifest_and_config(
    image: &ImageRef,
    opts: &TransportOptions,
) -> Result<crate::layout::ResolvedImage> {
    use oci_spec::image::{
        DescriptorBuilder, ImageConfiguration, ImageIndex, ImageManifest, MediaType,
    };
    use sha2::{Digest as _, Sha256};
    let ImageRef::Docker { reference } = image else {
        return Err(Error::BadReference {
            reference: image.to_string(),
            reason: "not a registry image".into(),
        });
    };
    let json_err = |context: String| move |source| Error::Json { context, source };
    let mut reference = reference.clone();
    let mut raw = skopeo_raw(&reference, false, opts)?;
    let probe: serde_json::Value =
        serde_json::from_slice(&raw).map_err(json_err(format!("the manifest of {image}")))?;
    let media = probe["mediaType"].as_str().unwrap_or_default();
    if media.contains("index") || media.contains("manifest.list") {
        let index: ImageIndex = serde_json::from_slice(&raw)
            .map_err(json_err(format!("the manifest list of {image}")))?;
        let chosen = index
            .manifests()
            .iter()
            .find(|m| {
                m.platform().as_ref().is_some_and(|p| {
                    p.architecture().to_string() == "amd64" && p.os().to_string() == "linux"
                })
            })
            .ok_or_else(|| Error::NotOstreeImage {
                image: image.to_string(),
                reason: "its manifest list has no linux/amd64 image".into(),
            })?;
        reference = format!("{}@{}", repository_of(&reference), chosen.digest());
        raw = skopeo_raw(&reference, false, opts)?;
    }
    let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&raw)));
    let manifest: ImageManifest =
        serde_json::from_slice(&raw).map_err(json_err(format!("the manifest of {image}")))?;
    let config_raw = skopeo_raw(&reference, true, opts)?;
    let found = format!("sha256:{}", hex::encode(Sha256::digest(&config_raw)));
    if found != manifest.config().digest().to_string() {
        return Err(Error::DigestMismatch {
            digest: manifest.config().digest().to_string(),
            found,
        });
    }
    let config: ImageConfiguration =
        serde_json::from_slice(&config_raw).map_err(json_err(format!("the config of {image}")))?;
    let descriptor = DescriptorBuilder::default()
        .media_type(MediaType::ImageManifest)
        .digest(
            manifest_digest
                .parse::<oci_spec::image::Digest>()
                .map_err(|e| Error::InvalidOption(format!("digest {manifest_digest}: {e}")))?,
        )
        .size(raw.len() as u64)
        .build()
        .map_err(crate::encapsulate::oci_err)?;
    Ok(crate::layout::ResolvedImage {
        descriptor,
        manifest_digest,
        manifest,
        config,
    })
}

/// A push to a registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pushed {
    /// `docker://HOST/NAME:TAG`.
    pub destination: String,
    /// `HOST/NAME@sha256:…`: what a release payload references.
    pub pullspec: String,
    /// False when the registry already had this digest under that name.
    pub changed: bool,
}

/// The digest of the manifest a registry serves for `image` (its bytes'
/// sha256), without reading anything else.
pub fn remote_digest(image: &ImageRef, opts: &TransportOptions) -> Result<String> {
    use sha2::{Digest as _, Sha256};
    let ImageRef::Docker { reference } = image else {
        return Err(Error::BadReference {
            reference: image.to_string(),
            reason: "not a registry image".into(),
        });
    };
    let raw = skopeo_raw(reference, false, opts)?;
    Ok(format!("sha256:{}", hex::encode(Sha256::digest(&raw))))
}

/// Copies `src` (whose manifest digest is `digest`) to `dest`, a
/// `docker://` reference, unless the registry already serves that digest
/// there (asked with one manifest request).
pub fn push_unless_present(
    src: &ImageRef,
    digest: &str,
    dest: &ImageRef,
    opts: &TransportOptions,
) -> Result<Pushed> {
    let ImageRef::Docker { reference } = dest else {
        return Err(Error::BadReference {
            reference: dest.to_string(),
            reason: "push needs a docker:// destination".into(),
        });
    };
    let pullspec = format!("{}@{digest}", repository_of(reference));
    let current = remote_digest(dest, opts).is_ok_and(|d| d == digest);
    if !current {
        push(src, dest, opts)?;
    }
    Ok(Pushed {
        destination: dest.to_string(),
        pullspec,
        changed: !current,
    })
}

/// `HOST/NAME:TAG` or `HOST/NAME@DIGEST` -> `HOST/NAME`.
pub(crate) fn repository_of(reference: &str) -> &str {
    if let Some((repo, _)) = reference.split_once('@') {
        return repo;
    }
    match reference.rfind(':') {
        Some(i) if !reference[i..].contains('/') => &reference[..i],
        _ => reference,
    }
}

/// Pushes an image to a registry; `dest` must be `docker://`.
pub fn push(src: &ImageRef, dest: &ImageRef, opts: &TransportOptions) -> Result<()> {
    if !matches!(dest, ImageRef::Docker { .. }) {
        return Err(Error::BadReference {
            reference: dest.to_string(),
            reason: "push needs a docker:// destination".into(),
        });
    }
    copy(src, dest, opts)
}

/// Pulls `src` into the layout `dir` as `tag`; returns the local reference.
pub fn pull(src: &ImageRef, dir: &Path, tag: &str, opts: &TransportOptions) -> Result<ImageRef> {
    // skopeo writes blobs before the index: into a layout that exists, a
    // failed copy leaves only unreferenced blobs (for `prune`), never a
    // directory of blobs that is no layout at all.
    crate::layout::Layout::ocidir(dir)?;
    let dest = ImageRef::oci(dir, tag);
    copy(src, &dest, opts)?;
    Ok(dest)
}

/// [`pull`] of the image `src` was when its manifest digest was `digest`
/// (the image a caller inspected and checked): a registry image is pulled
/// by that digest, not by its tag, so a tag moved since brings nothing
/// unchecked; and a copy whose digest is another (a layout retagged
/// meanwhile) is refused, its tag removed. What is pulled is what was
/// checked.
pub fn pull_pinned(
    src: &ImageRef,
    digest: &str,
    dir: &Path,
    tag: &str,
    opts: &TransportOptions,
) -> Result<ImageRef> {
    let pinned = match src {
        ImageRef::Docker { reference } => ImageRef::Docker {
            reference: format!("{}@{digest}", repository_of(reference)),
        },
        other => other.clone(),
    };
    let dest = pull(&pinned, dir, tag, opts)?;
    let same = crate::layout::open_image(&dest)
        .and_then(|(_, r)| same_image(src, digest, &r.manifest_digest));
    if same.is_err() {
        let _ = crate::layout::remove_tag(dir, tag);
    }
    same.map(|()| dest)
}

/// That the image found as `found` (a manifest digest) is the one checked
/// as `checked`: an [`Error::ImageChanged`] naming `image` when not.
pub fn same_image(image: &ImageRef, checked: &str, found: &str) -> Result<()> {
    if checked == found {
        return Ok(());
    }
    Err(Error::ImageChanged {
        image: image.to_string(),
        checked: checked.to_string(),
        found: found.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_of_references() {
        assert_eq!(
            repository_of("127.0.0.1:5000/strata/rhcos:4.13"),
            "127.0.0.1:5000/strata/rhcos"
        );
        assert_eq!(repository_of("quay.io/x/rhcos"), "quay.io/x/rhcos");
        assert_eq!(repository_of("localhost:5000/x"), "localhost:5000/x");
        assert_eq!(repository_of("quay.io/x/y@sha256:ab"), "quay.io/x/y");
    }

    #[test]
    fn parses_references() {
        let w = Path::new("/w/oci");
        let ok: &[(&str, ImageRef)] = &[
            (
                "oci:/x/oci:base",
                ImageRef::oci(Path::new("/x/oci"), "base"),
            ),
            (
                "oci:relative",
                ImageRef::Oci {
                    dir: "relative".into(),
                    tag: None,
                },
            ),
            (
                "docker://127.0.0.1:5000/rhcos:4.13",
                ImageRef::Docker {
                    reference: "127.0.0.1:5000/rhcos:4.13".into(),
                },
            ),
            (
                "rhel-coreos-base-8.6",
                ImageRef::oci(w, "rhel-coreos-base-8.6"),
            ),
        ];
        for (s, want) in ok {
            let got = ImageRef::parse(s, Some(w)).unwrap();
            assert_eq!(&got, want, "{s}");
        }
        assert_eq!(
            ImageRef::parse("oci:/x/oci:base", None)
                .unwrap()
                .to_string(),
            "oci:/x/oci:base"
        );
        for bad in ["oci:", "oci:/x:", "docker://", "quay.io/x:y", "tag"] {
            let default = if bad == "tag" { None } else { Some(w) };
            assert!(ImageRef::parse(bad, default).is_err(), "{bad}");
        }
    }
}
