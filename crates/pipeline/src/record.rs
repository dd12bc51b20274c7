//! run.json: what one pipeline run produced, in the terms an OpenShift
//! release payload needs — each base's digest and version, each release's
//! derived digest and version, the base it was derived from, and its
//! bootimages. (Not `release.json`: that is plume's release metadata, a
//! different format.)
//!
//! Runs are recorded in the history as runs of the pipeline, numbered 1,
//! 2, …: `W/runs/<name>/<n>/run.json`. A run whose record would equal an
//! earlier one still in the workdir records nothing new (its `changed` is
//! false): that run is handed back and becomes the pipeline's newest again,
//! as a no-op build does. So re-running an unchanged pipeline leaves the
//! history as it was, and runs of snapshot A, B and A again give A's run
//! back. A number is never given twice, a pruned run's included. Paths are relative
//! to `W/builds` and images are named by their tag in `W/oci`, so two
//! workdirs that built the same inputs hold the same run.json.
//!
//! Must not: record anything the stages did not produce.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use strata_oscontainer::ImageRef;
use strata_workdir::{BuildEntry, EntryKind, Workdir};

use crate::{relative_to_builds, ImageResult, ReleaseResult};

/// The file name of the record in its build directory.
pub const FILE_NAME: &str = "run.json";

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunJson {
    /// The pipeline's name.
    pub name: String,
    /// By stream (`rhel-9.6`).
    pub bases: BTreeMap<String, ImageEntry>,
    /// By stream (`ocp-4.19`, `okd-4.19`): OpenShift and OKD of one
    /// release number are two entries.
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
    /// A derived image's OpenShift release (`4.19`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
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
    /// A release's bootimages as the installer takes them: its stream
    /// (`rhcos-4.19`, merged from the release's builds) and the
    /// `coreos-bootimages` ConfigMap holding it, files of the run's
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer_stream: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootimages_configmap: Option<String>,
}

/// A file of a run's directory: name and content.
type RunFile = (String, Vec<u8>);

/// A release's files for the installer: its stream metadata and the
/// ConfigMap, named by the installer's stream name.
fn installer_files(image: &ImageResult) -> Result<Option<[RunFile; 2]>> {
    let Some(d) = &image.disks else {
        return Ok(None);
    };
    let text = std::fs::read(&d.stream_json)
        .with_context(|| format!("reading {}", d.stream_json.display()))?;
    let one: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("parsing {}", d.stream_json.display()))?;
    let stream = strata_disk::meta::merge_streams(&[one])?;
    let name = stream["stream"].as_str().unwrap_or_default().to_string();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        anyhow::bail!("{}: stream name {name:?}", d.stream_json.display());
    }
    Ok(Some([
        (
            format!("stream-{name}.json"),
            strata_workdir::pretty(&stream)?,
        ),
        (
            format!("coreos-bootimages-{name}.yaml"),
            strata_disk::meta::bootimages_configmap(
                &stream,
                strata_disk::meta::RELEASE_VERSION_PLACEHOLDER,
            )?
            .into_bytes(),
        ),
    ]))
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
pub struct RunRecord {
    /// False when an earlier record, still in the workdir, said the same:
    /// that run.
    pub changed: bool,
    /// `<name>/<n>`.
    pub id: String,
    pub path: PathBuf,
    pub run: RunJson,
}

/// `base`: a derived image's base stream and digest.
fn entry(
    workdir: &Path,
    image: &ImageResult,
    release: Option<&str>,
    base: Option<(&str, &str)>,
) -> Result<ImageEntry> {
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
        release: release.map(str::to_string),
        base: base.map(|(stream, _)| stream.to_string()),
        base_digest: base.map(|(_, digest)| digest.to_string()),
        pullspec: image.pushed.as_ref().map(|p| p.pullspec.clone()),
        bootimages,
        stream_metadata,
        installer_stream: None,
        bootimages_configmap: None,
    })
}

/// The record of a run.
pub fn run_json(
    workdir: &Path,
    name: &str,
    bases: &[ImageResult],
    releases: &[ReleaseResult],
) -> Result<RunJson> {
    Ok(run_and_files(workdir, name, bases, releases)?.0)
}

/// The record of a run and the files beside it.
fn run_and_files(
    workdir: &Path,
    name: &str,
    bases: &[ImageResult],
    releases: &[ReleaseResult],
) -> Result<(RunJson, Vec<RunFile>)> {
    let mut files = Vec::new();
    let mut entries = BTreeMap::new();
    for r in releases {
        let mut e = entry(
            workdir,
            &r.image,
            Some(&r.release),
            Some((&r.base_stream, &r.base_digest)),
        )?;
        if let Some([stream, configmap]) = installer_files(&r.image)? {
            e.installer_stream = Some(stream.0.clone());
            e.bootimages_configmap = Some(configmap.0.clone());
            files.extend([stream, configmap]);
        }
        entries.insert(r.image.stream.clone(), e);
    }
    let run = RunJson {
        name: name.to_string(),
        bases: bases
            .iter()
            .map(|b| Ok((b.stream.clone(), entry(workdir, b, None, None)?)))
            .collect::<Result<_>>()?,
        releases: entries,
    };
    Ok((run, files))
}

/// Writes the run's run.json unless an earlier record says the same.
pub fn write(
    workdir: &Path,
    name: &str,
    bases: &[ImageResult],
    releases: &[ReleaseResult],
) -> Result<RunRecord> {
    let (run, mut files) = run_and_files(workdir, name, bases, releases)?;
    let bytes = strata_workdir::pretty(&run)?;
    let hash = hex::encode(Sha256::digest(&bytes));
    let wd = Workdir::open(workdir)?;
    let _lock = wd.lock()?;
    // The newest earlier run with this record whose run.json is still
    // that record.
    let same = wd.history()?.into_iter().rev().find(|b| {
        b.kind == EntryKind::Run
            && b.stream == name
            && b.inputhash == hash
            && std::fs::read(wd.entry_dir(b).join(FILE_NAME)).is_ok_and(|on_disk| on_disk == bytes)
    });
    if let Some(earlier) = same {
        wd.make_latest(&earlier)?;
        return Ok(RunRecord {
            changed: false,
            id: earlier.id.clone(),
            path: wd.entry_dir(&earlier).join(FILE_NAME),
            run,
        });
    }
    let serial = wd
        .versions_used(EntryKind::Run, name)?
        .iter()
        .filter_map(|v| v.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let version = serial.to_string();
    let e = BuildEntry {
        stream: name.to_string(),
        version: version.clone(),
        id: format!("{name}/{version}"),
        kind: EntryKind::Run,
        inputhash: hash,
        ostree_commit: bases
            .first()
            .map(|b| b.ostree_commit.clone())
            .unwrap_or_default(),
        image_digest: None,
        image_tag: None,
    };
    files.push((FILE_NAME.to_string(), bytes));
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    wd.record(&e, None, &files)
        .with_context(|| format!("recording run {}", e.id))?;
    Ok(RunRecord {
        changed: true,
        path: wd.entry_dir(&e).join(FILE_NAME),
        id: e.id,
        run,
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
        assert_eq!(first.id, "demo/1");
        assert_eq!(first.run.releases["ocp-4.13"].tag, "ocp-4.13-1");
        assert_eq!(
            first.run.releases["ocp-4.13"].base.as_deref(),
            Some("rhel-8.6")
        );
        assert_eq!(first.run.bases["rhel-8.6"].digest, "sha256:b1");
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
        assert_eq!(next.id, "demo/2");
        assert!(next.path.ends_with("runs/demo/2/run.json"));
        let on_disk: RunJson = serde_json::from_slice(&std::fs::read(&next.path).unwrap()).unwrap();
        assert_eq!(on_disk, next.run);
        assert_eq!(on_disk.releases["ocp-4.13"].digest, "sha256:d2");
        assert_eq!(
            on_disk.releases["ocp-4.13"].release.as_deref(),
            Some("4.13")
        );
        // The first record again (snapshot A, B, A): the first run, made
        // the newest again, not a third.
        let back = write(
            d.path(),
            "demo",
            std::slice::from_ref(&base),
            &[rel("sha256:d1")],
        )
        .unwrap();
        assert!(!back.changed, "A, B, A recorded a third run");
        assert_eq!(back.id, first.id);
        let history = strata_workdir::history_of(d.path()).unwrap();
        assert_eq!(history.last().unwrap().id, "demo/1");
        // The run dropped by a prune keeping the newest leaves its number
        // used: the next new record is the third.
        Workdir::open(d.path())
            .unwrap()
            .forget(&history[..1])
            .unwrap();
        let third = write(
            d.path(),
            "demo",
            std::slice::from_ref(&base),
            &[rel("sha256:d3")],
        )
        .unwrap();
        assert_eq!(third.id, "demo/3");
    }
}
