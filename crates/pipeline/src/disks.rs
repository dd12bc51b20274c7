//! The disks of one image: found in its build directory, or built.
//!
//! An image's disks are current when its build record (strata.json) lists
//! every requested platform, each artifact is there with the recorded size,
//! and they were built from the image's commit and name the image's push
//! target, when it has one: disks of an earlier `registry` would send nodes
//! elsewhere for upgrades.
//! A build directory belongs to one version and a version to one image, so
//! that is "the image digest's disks exist".
//!
//! Must not: build disks any other way than the disk stage's own
//! [`strata_disk::build`], nor write the record (the disk stage does).

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;
use strata_disk::Artifact;

use crate::{BuildOptions, ImageResult};

/// How a pipeline's disks are stored and where they will be published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Store {
    pub compress: strata_disk::Compress,
    pub artifact_url: Option<String>,
}

/// The disk images of one image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisksResult {
    /// False when they were already there.
    pub changed: bool,
    pub artifacts: Vec<Artifact>,
    /// The CoreOS stream metadata listing them.
    pub stream_json: PathBuf,
}

/// The disks of `image` for `platforms`, built when missing; they name
/// `target` (the image's push target) as the image nodes follow.
pub fn ensure(
    opts: &BuildOptions,
    image: &ImageResult,
    platforms: &[String],
    target: Option<&str>,
    store: &Store,
) -> Result<DisksResult> {
    if let Some(artifacts) = existing(
        &image.build_dir,
        &image.ostree_commit,
        target,
        platforms,
        store,
    )? {
        return Ok(DisksResult {
            changed: false,
            artifacts,
            stream_json: image.build_dir.join("stream.json"),
        });
    }
    let r = strata_disk::build(
        &strata_disk::DiskOptions::new(
            &opts.workdir,
            image.image.as_str(),
            platforms.to_vec(),
            opts.workers.disk.command(),
        )
        .target_image(target.map(str::to_string))
        .compress(store.compress)
        .artifact_url(store.artifact_url.clone()),
    )?;
    if r.digest != image.digest {
        anyhow::bail!(
            "the disk stage built {} ({}), not {} ({})",
            r.image,
            r.digest,
            image.image,
            image.digest
        );
    }
    Ok(DisksResult {
        changed: true,
        artifacts: r.artifacts,
        stream_json: r.stream_json,
    })
}

/// The artifacts of `platforms` recorded in `build_dir`'s record for
/// `commit` (and naming `target`, when given), stored as `store` says, if
/// every one is there.
pub fn existing(
    build_dir: &Path,
    commit: &str,
    target: Option<&str>,
    platforms: &[String],
    store: &Store,
) -> Result<Option<Vec<Artifact>>> {
    let Some(disks) = strata_workdir::record::read(build_dir)?.and_then(|m| m.disks) else {
        return Ok(None);
    };
    if disks.ostree_commit != commit
        || target.is_some_and(|t| disks.image_reference != t)
        || disks.artifact_url != store.artifact_url
    {
        return Ok(None);
    }
    if !build_dir.join("stream.json").exists() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (p, gzip) in strata_disk::recorded_artifacts(platforms, store.compress) {
        let Some(img) = disks.images.get(p) else {
            return Ok(None);
        };
        if img.uncompressed_sha256.is_some() != gzip {
            return Ok(None);
        }
        let artifact = build_dir.join(&img.path);
        match std::fs::metadata(&artifact) {
            Ok(m) if m.len() == img.size && !img.path.contains('/') => {}
            _ => return Ok(None),
        }
        out.push(Artifact {
            platform: p.to_string(),
            format: img.format.clone(),
            path: artifact,
            size: img.size,
            sha256: img.sha256.clone(),
            uncompressed: img
                .uncompressed_sha256
                .clone()
                .zip(img.uncompressed_size)
                .map(|(sha256, size)| strata_disk::Uncompressed { size, sha256 }),
        });
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(dir: &Path, commit: &str) {
        std::fs::write(dir.join("rhcos-1-qemu.x86_64.qcow2"), b"disk").unwrap();
        std::fs::write(dir.join("stream.json"), b"{}").unwrap();
        let m = serde_json::json!({
            "stream": "ocp-4.13", "version": "1", "name": "rhcos", "summary": "s",
            "inputhash": "", "ostree_commit": commit, "source_date_epoch": 0,
            "disks": {"ostree_commit": commit, "image_reference": "docker://r1/os:1",
                "images": {"qemu": {"path": "rhcos-1-qemu.x86_64.qcow2", "size": 4, "sha256": "ab", "format": "qcow2"}}},
        });
        std::fs::write(dir.join("strata.json"), m.to_string()).unwrap();
    }

    #[test]
    fn disks_exist_only_for_their_commit_and_every_platform() {
        let d = tempfile::tempdir().unwrap();
        let qemu = vec!["qemu".to_string()];
        let plain = Store::default();
        let existing = |dir: &Path, commit: &str, target: Option<&str>, p: &[String]| {
            existing(dir, commit, target, p, &plain)
        };
        assert_eq!(existing(d.path(), "c1", None, &qemu).unwrap(), None);
        meta(d.path(), "c1");
        let found = existing(d.path(), "c1", None, &qemu).unwrap().unwrap();
        assert_eq!(found[0].sha256, "ab");
        assert_eq!(found[0].path, d.path().join("rhcos-1-qemu.x86_64.qcow2"));
        assert_eq!(existing(d.path(), "c2", None, &qemu).unwrap(), None);
        // Disks naming another image for upgrades are not this target's.
        let r1 = Some("docker://r1/os:1");
        assert!(existing(d.path(), "c1", r1, &qemu).unwrap().is_some());
        let r2 = Some("docker://r2/os:1");
        assert_eq!(existing(d.path(), "c1", r2, &qemu).unwrap(), None);
        let both = vec!["qemu".to_string(), "metal".to_string()];
        assert_eq!(existing(d.path(), "c1", None, &both).unwrap(), None);
        // Disks stored otherwise, or published elsewhere, are not these.
        let gzip = Store {
            compress: strata_disk::Compress::Gzip,
            artifact_url: None,
        };
        assert_eq!(
            super::existing(d.path(), "c1", None, &qemu, &gzip).unwrap(),
            None
        );
        let url = Store {
            compress: strata_disk::Compress::None,
            artifact_url: Some("https://m.example/rhcos".into()),
        };
        assert_eq!(
            super::existing(d.path(), "c1", None, &qemu, &url).unwrap(),
            None
        );
        // A truncated artifact is not a disk.
        std::fs::write(d.path().join("rhcos-1-qemu.x86_64.qcow2"), b"di").unwrap();
        assert_eq!(existing(d.path(), "c1", None, &qemu).unwrap(), None);
    }

    /// `live` is the live media's four files, after the disks, stored as
    /// they are when the disks are gzipped.
    #[test]
    fn live_media_exist_when_all_four_files_do() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("stream.json"), b"{}").unwrap();
        let mut images = serde_json::Map::new();
        std::fs::write(d.path().join("q.qcow2.gz"), b"gz").unwrap();
        images.insert(
            "qemu".into(),
            serde_json::json!({"path": "q.qcow2.gz", "size": 2, "sha256": "q", "format": "qcow2",
                "uncompressed-sha256": "u", "uncompressed-size": 9}),
        );
        for name in strata_disk::live::IMAGES {
            std::fs::write(d.path().join(name), b"live").unwrap();
            images.insert(
                name.into(),
                serde_json::json!({"path": name, "size": 4, "sha256": name, "format": "x"}),
            );
        }
        let m = serde_json::json!({
            "stream": "ocp-4.13", "version": "1", "name": "rhcos", "summary": "s",
            "inputhash": "", "ostree_commit": "c1", "source_date_epoch": 0,
            "disks": {"ostree_commit": "c1", "image_reference": "docker://r1/os:1", "images": images},
        });
        std::fs::write(d.path().join("strata.json"), m.to_string()).unwrap();
        let gzip = Store {
            compress: strata_disk::Compress::Gzip,
            artifact_url: None,
        };
        let platforms = ["live", "qemu"].map(String::from);
        let found = existing(d.path(), "c1", None, &platforms, &gzip)
            .unwrap()
            .unwrap();
        let names: Vec<&str> = found.iter().map(|a| a.platform.as_str()).collect();
        assert_eq!(
            names,
            [
                "qemu",
                "live-iso",
                "live-kernel",
                "live-initramfs",
                "live-rootfs"
            ]
        );
        std::fs::remove_file(d.path().join("live-rootfs")).unwrap();
        assert_eq!(
            existing(d.path(), "c1", None, &platforms, &gzip).unwrap(),
            None
        );
    }
}
