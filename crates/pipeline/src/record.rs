//! release.json: what one pipeline run produced, in the terms an OpenShift
//! release payload needs — each base's digest and version, each release's
//! derived digest and version, the base it was derived from, and its
//! bootimages.
//!
//! Runs are recorded in the build history as the stream
//! `release-<pipeline name>`, numbered 1, 2, …: `W/builds/release-<name>/<n>/release.json`.
//! A run whose record would equal the latest one records nothing new (its
//! `changed` is false), so re-running an unchanged pipeline leaves the
//! history as it was. Paths are relative to `W/builds` and images are
//! named by their tag in `W/oci`, so two workdirs that built the same
//! inputs hold the same release.json.
//!
//! Must not: record anything the stages did not produce.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use strata_oscontainer::ImageRef;
use strata_workdir::{BuildEntry, Workdir};

use crate::{relative_to_builds, ImageResult, ReleaseResult};

/// The file name of the record in its build directory.
pub const FILE_NAME: &str = "release.json";

/// `release.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseJson {
    /// The pipeline's name.
    pub name: String,
    /// By stream (`rhel-9.6`).
    pub bases: BTreeMap<String, ImageEntry>,
    /// By OpenShift release (`4.13`).
    pub releases: BTreeMap<String, ImageEntry>,
}

/// One image of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageEntry {
    pub stream: String,
    pub version: String,
    /// `<stream>/<version>`: its directory under `W/builds`.
    pub build: String,
    /// Its tag in `W/oci`.
    pub tag: String,
    pub digest: String,
    pub ostree_commit: String,
    /// The base a derived image was built on: its stream (a key of
    /// `bases`) and digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_digest: Option<String>,
    /// `HOST/NAME@sha256:…` once pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pullspec: Option<String>,
    /// Disk images by platform.
    #[serde(default)]
    pub bootimages: BTreeMap<String, Bootimage>,
    /// The CoreOS stream metadata of the bootimages, relative to `W/builds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_metadata: Option<String>,
}

/// One disk image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bootimage {
    pub format: String,
    /// Relative to `W/builds`.
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// A run's record, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseRecord {
    /// False when the latest record already said the same.
    pub changed: bool,
    /// `release-<name>/<n>`.
    pub id: String,
    pub path: PathBuf,
    pub release: ReleaseJson,
}

/// `base`: a derived image's base stream and digest.
fn entry(workdir: &Path, image: &ImageResult, base: Option<(&str, &str)>) -> Result<ImageEntry> {
    let tag = match ImageRef::parse(&image.image, None)? {
        ImageRef::Oci { tag: Some(tag), .. } => tag,
        _ => image.image.clone(),
    };
    let mut bootimages = BTreeMap::new();
    let mut stream_metadata = None;
    if let Some(d) = &image.disks {
        for a in &d.artifacts {
            bootimages.insert(
                a.platform.clone(),
                Bootimage {
                    format: a.format.clone(),
                    path: relative_to_builds(workdir, &a.path),
                    size: a.size,
                    sha256: a.sha256.clone(),
                },
            );
        }
        stream_metadata = Some(relative_to_builds(workdir, &d.stream_json));
    }
    Ok(ImageEntry {
        stream: image.stream.clone(),
        version: image.version.clone(),
        build: format!("{}/{}", image.stream, image.version),
        tag,
        digest: image.digest.clone(),
        ostree_commit: image.ostree_commit.clone(),
        base: base.map(|(stream, _)| stream.to_string()),
        base_digest: base.map(|(_, digest)| digest.to_string()),
        pullspec: image.pushed.as_ref().map(|p| p.pullspec.clone()),
        bootimages,
        stream_metadata,
    })
}

/// The record of a run.
pub fn release_json(
    workdir: &Path,
    name: &str,
    bases: &[ImageResult],
    releases: &[ReleaseResult],
) -> Result<ReleaseJson> {
    Ok(ReleaseJson {
        name: name.to_string(),
        bases: bases
            .iter()
            .map(|b| Ok((b.stream.clone(), entry(workdir, b, None)?)))
            .collect::<Result<_>>()?,
        releases: releases
            .iter()
            .map(|r| {
                Ok((
                    r.release.clone(),
                    entry(workdir, &r.image, Some((&r.base_stream, &r.base_digest)))?,
                ))
            })
            .collect::<Result<_>>()?,
    })
}

/// Writes the run's release.json unless the latest record is the same.
pub fn write(
    workdir: &Path,
    name: &str,
    bases: &[ImageResult],
    releases: &[ReleaseResult],
) -> Result<ReleaseRecord> {
    let release = release_json(workdir, name, bases, releases)?;
    let mut bytes = serde_json::to_vec_pretty(&release)?;
    bytes.push(b'\n');
    let hash = hex::encode(Sha256::digest(&bytes));
    let wd = Workdir::open(workdir)?;
    let _lock = wd.lock()?;
    let stream = format!("release-{name}");
    let latest = wd.latest(&stream)?;
    if let Some(l) = latest.as_ref().filter(|l| l.inputhash == hash) {
        let path = wd.build_dir(&stream, &l.version).join(FILE_NAME);
        if path.exists() {
            return Ok(ReleaseRecord {
                changed: false,
                id: l.id.clone(),
                path,
                release,
            });
        }
    }
    let serial = wd
        .history()?
        .iter()
        .filter(|b| b.stream == stream)
        .filter_map(|b| b.version.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let version = serial.to_string();
    let e = BuildEntry {
        stream: stream.clone(),
        version: version.clone(),
        id: format!("{stream}/{version}"),
        inputhash: hash,
        ostree_commit: bases
            .first()
            .map(|b| b.ostree_commit.clone())
            .unwrap_or_default(),
        image_digest: None,
        image_tag: None,
    };
    wd.record(&e, &[(FILE_NAME, bytes)])
        .with_context(|| format!("recording {}", e.id))?;
    Ok(ReleaseRecord {
        changed: true,
        id: e.id,
        path: wd.build_dir(&stream, &version).join(FILE_NAME),
        release,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(stream: &str, digest: &str) -> ImageResult {
        ImageResult {
            changed: true,
            stream: stream.into(),
            version: "1".into(),
            image: format!("oci:/w/oci:{stream}-1"),
            digest: digest.into(),
            ostree_commit: "c".into(),
            build_dir: PathBuf::from("/w/builds").join(stream).join("1"),
            disks: None,
            pushed: None,
        }
    }

    #[test]
    fn a_run_is_recorded_once_per_content() {
        let d = tempfile::tempdir().unwrap();
        let base = image("rhel-8.6", "sha256:b1");
        let rel = |digest: &str| ReleaseResult {
            release: "4.13".into(),
            base_stream: "rhel-8.6".into(),
            base_digest: "sha256:b1".into(),
            image: image("ocp-4.13", digest),
        };
        let first = write(
            d.path(),
            "demo",
            std::slice::from_ref(&base),
            &[rel("sha256:d1")],
        )
        .unwrap();
        assert!(first.changed);
        assert_eq!(first.id, "release-demo/1");
        assert_eq!(first.release.releases["4.13"].tag, "ocp-4.13-1");
        assert_eq!(
            first.release.releases["4.13"].base.as_deref(),
            Some("rhel-8.6")
        );
        assert_eq!(first.release.bases["rhel-8.6"].digest, "sha256:b1");
        let again = write(
            d.path(),
            "demo",
            std::slice::from_ref(&base),
            &[rel("sha256:d1")],
        )
        .unwrap();
        assert!(!again.changed);
        assert_eq!(again.id, first.id);
        let next = write(
            d.path(),
            "demo",
            std::slice::from_ref(&base),
            &[rel("sha256:d2")],
        )
        .unwrap();
        assert!(next.changed);
        assert_eq!(next.id, "release-demo/2");
        let on_disk: ReleaseJson =
            serde_json::from_slice(&std::fs::read(&next.path).unwrap()).unwrap();
        assert_eq!(on_disk, next.release);
        assert_eq!(on_disk.releases["4.13"].digest, "sha256:d2");
    }
}
