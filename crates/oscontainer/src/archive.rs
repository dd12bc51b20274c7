//! One image of an OCI layout as one file: an OCI archive.
//!
//! An OCI archive (`oci-archive:FILE` to skopeo, podman and ostree-ext; the
//! `ostree` artifact `*.ociarchive` of a coreos-assembler build) is a plain,
//! uncompressed tar of an OCI image layout. The one written here holds
//! exactly one image: `oci-layout`, an `index.json` with the image's
//! manifest descriptor alone, and under `blobs/sha256/` the manifest, the
//! config and every layer, copied byte for byte from the layout, so the
//! image keeps its manifest digest.
//!
//! The manifest descriptor carries `org.opencontainers.image.ref.name` =
//! [`ARCHIVE_REF_NAME`] (`latest`), as `skopeo copy … oci-archive:FILE:latest`
//! writes it (given no name, skopeo writes none). containers/image (skopeo,
//! podman, and ostree-ext through skopeo's image proxy) given
//! `oci-archive:FILE` with no name takes an index's only manifest whatever
//! its annotations, and given `oci-archive:FILE:latest` looks for the
//! annotation: with it both spellings work, without it only the first.
//! ocidir's archive reader (bootc's direct path) resolves the same way.
//!
//! The bytes depend only on the image and `mtime`: GNU tar headers from
//! `tarball`; entries in byte order of their paths, which is what a lexical
//! walk of the layout gives and how skopeo orders its archives (`blobs/`,
//! `blobs/sha256/`, the blobs by digest, `index.json`, `oci-layout`); every
//! entry stamped `mtime`, owned by 0:0 with no user or group names, mode
//! 0755 for directories and 0644 for files; index.json canonical JSON.
//! Blobs are streamed from the layout into the archive, each held to its
//! digest on the way: a corrupt blob fails the write, and the destination
//! is replaced only by a complete archive (`artifact`).
//!
//! This module reads layouts through `layout`; it knows nothing about
//! ostree.

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::Path;

use oci_spec::image::{Descriptor, DescriptorBuilder, ImageIndexBuilder, MediaType};
use sha2::{Digest as _, Sha256};

use crate::artifact::ArtifactFile;
use crate::error::{Context, Error, Result};
use crate::layout::{canonical_json, open_image, Layout, TAG_ANNOTATION};
use crate::tarball::{Meta, TarWriter};
use crate::ImageRef;

/// The `org.opencontainers.image.ref.name` of the image in an archive.
pub const ARCHIVE_REF_NAME: &str = "latest";

/// The `oci-layout` file, as ocidir writes it.
const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// What [`write_oci_archive`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveInfo {
    /// Size of the archive file in bytes.
    pub size: u64,
    /// sha256 of the archive file: lowercase hex, no `sha256:` prefix (as
    /// meta.json records artifacts).
    pub sha256: String,
    /// The image's manifest digest (`sha256:…`), the same in the archive
    /// as in the layout.
    pub manifest_digest: String,
}

/// Writes the image `image` (an `oci:` reference) as an OCI archive at
/// `dest` (see the module documentation), every entry stamped `mtime`
/// (seconds since the epoch). `dest`'s directory must exist; a file at
/// `dest` is replaced once the archive is complete.
pub fn write_oci_archive(image: &ImageRef, dest: &Path, mtime: u64) -> Result<ArchiveInfo> {
    if let ImageRef::Docker { .. } = image {
        return Err(Error::InvalidOption(format!(
            "{image}: only an image of an OCI layout is written as an archive (pull it first)"
        )));
    }
    let (layout, resolved) = open_image(image)?;
    // Manifest and config are verified; every layer must be present at its
    // size before anything is written (its digest is checked as it is
    // copied).
    for l in resolved.manifest.layers() {
        layout.check_blob_size(l)?;
    }
    let mut blobs: BTreeMap<String, &Descriptor> = BTreeMap::new();
    for d in std::iter::once(&resolved.descriptor)
        .chain(std::iter::once(resolved.manifest.config()))
        .chain(resolved.manifest.layers())
    {
        blobs.insert(d.digest().digest().to_string(), d);
    }
    let index = index_json(&resolved.descriptor)?;
    tracing::debug!(
        "writing {image} ({} blobs) as an OCI archive at {}",
        blobs.len(),
        dest.display()
    );

    let writing = || format!("writing {}", dest.display());
    let mut out = ArtifactFile::create(dest)?;
    let mut tar = TarWriter::new(&mut out, mtime);
    let dir = Meta::root(0o755);
    let file = Meta::root(0o644);
    tar.dir("blobs", dir).context_with(writing)?;
    tar.dir("blobs/sha256", dir).context_with(writing)?;
    for (hex, desc) in &blobs {
        copy_blob(&layout, &mut tar, hex, desc, dest)?;
    }
    tar.data("index.json", file, &index).context_with(writing)?;
    tar.data("oci-layout", file, OCI_LAYOUT)
        .context_with(writing)?;
    tar.finish().context_with(writing)?;
    let written = out.finish()?;
    Ok(ArchiveInfo {
        size: written.size,
        sha256: written.sha256,
        manifest_digest: resolved.manifest_digest,
    })
}

/// The archive's index.json: the manifest's media type, digest and size,
/// named [`ARCHIVE_REF_NAME`]. Nothing else of the layout's descriptor is
/// kept (its platform is the one of the machine that wrote the layout;
/// readers take the image's from its config).
fn index_json(manifest: &Descriptor) -> Result<Vec<u8>> {
    let built = |e: oci_spec::OciSpecError| {
        Error::InvalidOption(format!("building the archive's index.json: {e}"))
    };
    let descriptor = DescriptorBuilder::default()
        .media_type(MediaType::ImageManifest)
        .digest(manifest.digest().clone())
        .size(manifest.size())
        .annotations([(TAG_ANNOTATION.to_string(), ARCHIVE_REF_NAME.to_string())])
        .build()
        .map_err(built)?;
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![descriptor])
        .build()
        .map_err(built)?;
    canonical_json(&index, "the archive's index.json")
}

/// Streams one blob of the layout into the archive as
/// `blobs/sha256/<hex>`, checking its digest on the way.
fn copy_blob<W: std::io::Write>(
    layout: &Layout,
    tar: &mut TarWriter<W>,
    hex: &str,
    desc: &Descriptor,
    dest: &Path,
) -> Result<()> {
    let path = layout.blob_path(desc)?;
    let f = layout.open_blob(desc)?;
    let mut r = Hashing {
        inner: BufReader::with_capacity(1 << 20, f),
        hash: Sha256::new(),
    };
    tar.file(
        &format!("blobs/sha256/{hex}"),
        Meta::root(0o644),
        desc.size(),
        &mut r,
    )
    .context_with(|| {
        format!(
            "copying blob {} from {} into {}",
            desc.digest(),
            path.display(),
            dest.display()
        )
    })?;
    let found = format!("sha256:{}", hex::encode(r.hash.finalize()));
    if found != desc.digest().to_string() {
        return Err(Error::DigestMismatch {
            digest: desc.digest().to_string(),
            found,
        });
    }
    Ok(())
}

/// A reader that hashes what is read through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::path::PathBuf;

    const MTIME: u64 = 1_796_212_800;

    /// Writes `data` as a blob of the layout at `oci`; returns its
    /// descriptor's JSON.
    fn blob(oci: &Path, media_type: &str, data: &[u8]) -> serde_json::Value {
        let hex = hex::encode(Sha256::digest(data));
        std::fs::write(oci.join("blobs/sha256").join(&hex), data).unwrap();
        serde_json::json!({
            "mediaType": media_type,
            "digest": format!("sha256:{hex}"),
            "size": data.len(),
        })
    }

    /// A layout at `oci` with one image tagged `img`: a config and two
    /// layers that are the same blob. Every byte is fixed. Returns the
    /// layout's descriptors of manifest, config and layer.
    fn layout(oci: &Path) -> [serde_json::Value; 3] {
        std::fs::create_dir_all(oci.join("blobs/sha256")).unwrap();
        std::fs::write(oci.join("oci-layout"), OCI_LAYOUT).unwrap();
        let mut tar = TarWriter::new(Vec::new(), 0);
        tar.data("etc/motd", Meta::root(0o644), b"hello\n").unwrap();
        let tar = tar.finish().unwrap();
        let layer = blob(oci, "application/vnd.oci.image.layer.v1.tar", &tar);
        let diff_id = layer["digest"].clone();
        let config = serde_json::json!({
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [diff_id, diff_id]},
        });
        let config = blob(
            oci,
            "application/vnd.oci.image.config.v1+json",
            &serde_json::to_vec(&config).unwrap(),
        );
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config,
            "layers": [layer, layer],
        });
        let mut manifest = blob(
            oci,
            "application/vnd.oci.image.manifest.v1+json",
            &serde_json::to_vec(&manifest).unwrap(),
        );
        // What the layout's index says beyond the archive's: a platform and
        // the layout's own tag.
        let mut in_index = manifest.clone();
        in_index["platform"] = serde_json::json!({"architecture": "arm64", "os": "linux"});
        in_index["annotations"] = serde_json::json!({TAG_ANNOTATION: "img"});
        let index = serde_json::json!({"schemaVersion": 2, "manifests": [in_index]});
        std::fs::write(oci.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
        manifest["annotations"] = serde_json::json!({TAG_ANNOTATION: ARCHIVE_REF_NAME});
        [manifest, config, layer]
    }

    fn image(oci: &Path) -> ImageRef {
        ImageRef::oci(oci, "img")
    }

    /// Name, kind, mode, uid, gid, user and group name, mtime and content
    /// of every entry.
    type Entry = (String, u8, u32, u64, u64, Vec<u8>, Vec<u8>, u64, Vec<u8>);

    fn entries(archive: &[u8]) -> Vec<Entry> {
        let mut a = tar::Archive::new(archive);
        a.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let h = e.header().clone();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (
                    String::from_utf8(e.path_bytes().into_owned()).unwrap(),
                    h.entry_type().as_byte(),
                    h.mode().unwrap(),
                    h.uid().unwrap(),
                    h.gid().unwrap(),
                    h.username_bytes().unwrap().to_vec(),
                    h.groupname_bytes().unwrap().to_vec(),
                    h.mtime().unwrap(),
                    data,
                )
            })
            .collect()
    }

    #[test]
    fn the_archive_is_the_image_and_nothing_else_in_fixed_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let oci = dir.path().join("oci");
        let [manifest, config, layer] = layout(&oci);
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        std::fs::create_dir_all(dir.path().join("b")).unwrap();
        let a = dir.path().join("a/image.ociarchive");
        let b = dir.path().join("b/other-name.tar");
        let info = write_oci_archive(&image(&oci), &a, MTIME).unwrap();
        assert_eq!(write_oci_archive(&image(&oci), &b, MTIME).unwrap(), info);
        let bytes = std::fs::read(&a).unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), bytes);
        assert_eq!(info.size, bytes.len() as u64);
        assert_eq!(info.sha256, hex::encode(Sha256::digest(&bytes)));
        assert_eq!(info.manifest_digest, manifest["digest"]);

        let blob_entry = |d: &serde_json::Value| {
            let hex = d["digest"]
                .as_str()
                .unwrap()
                .strip_prefix("sha256:")
                .unwrap();
            let data = std::fs::read(oci.join("blobs/sha256").join(hex)).unwrap();
            (format!("blobs/sha256/{hex}"), data)
        };
        let mut blobs: Vec<(String, Vec<u8>)> = [&manifest, &config, &layer]
            .into_iter()
            .map(blob_entry)
            .collect();
        blobs.sort();
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [manifest],
        });
        let file = |(name, data): (String, Vec<u8>)| {
            (name, b'0', 0o644, 0, 0, vec![], vec![], MTIME, data)
        };
        let dir_entry = |name: &str| {
            (
                name.to_string(),
                b'5',
                0o755,
                0,
                0,
                vec![],
                vec![],
                MTIME,
                vec![],
            )
        };
        let mut want = vec![dir_entry("blobs/"), dir_entry("blobs/sha256/")];
        want.extend(blobs.into_iter().map(file));
        want.push(file((
            "index.json".into(),
            serde_json::to_vec(&index).unwrap(),
        )));
        want.push(file(("oci-layout".into(), OCI_LAYOUT.to_vec())));
        assert_eq!(entries(&bytes), want);
        // GNU headers.
        assert_eq!(&bytes[257..265], b"ustar  \0");

        // The bytes are pinned: a change to them is a change of format.
        assert_eq!(
            info.sha256,
            "6ffc39b9c14331332998d37258faf7381c6ab49f2aaa230685877090536c7c94"
        );

        // Another time, the same entries otherwise.
        let c = dir.path().join("c.tar");
        let other = write_oci_archive(&image(&oci), &c, 0).unwrap();
        assert_ne!(other.sha256, info.sha256);
        let stamped = |mut e: Entry| {
            e.7 = MTIME;
            e
        };
        let c = entries(&std::fs::read(&c).unwrap());
        assert!(c.iter().all(|e| e.7 == 0));
        assert_eq!(c.into_iter().map(stamped).collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_corrupt_or_missing_blob_fails_and_leaves_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let oci = dir.path().join("oci");
        let [_, _, layer] = layout(&oci);
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let dest = out.join("image.ociarchive");
        std::fs::write(&dest, b"the previous archive").unwrap();
        let hex = layer["digest"]
            .as_str()
            .unwrap()
            .strip_prefix("sha256:")
            .unwrap();
        let path = oci.join("blobs/sha256").join(hex);
        let left = || {
            let names: Vec<PathBuf> = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert_eq!(names, [dest.as_path()], "only the destination is left");
            assert_eq!(std::fs::read(&dest).unwrap(), b"the previous archive");
        };

        // Same size, other bytes: caught while copying.
        let mut data = std::fs::read(&path).unwrap();
        data[600] ^= 1;
        std::fs::write(&path, &data).unwrap();
        let err = write_oci_archive(&image(&oci), &dest, MTIME).unwrap_err();
        assert!(
            matches!(&err, Error::DigestMismatch { digest, .. } if digest == &layer["digest"]),
            "{err:?}"
        );
        left();

        // Truncated: caught before anything is written.
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data[..100])
            .unwrap();
        let err = write_oci_archive(&image(&oci), &dest, MTIME).unwrap_err();
        assert!(matches!(err, Error::SizeMismatch { .. }), "{err:?}");
        left();

        std::fs::remove_file(&path).unwrap();
        let err = write_oci_archive(&image(&oci), &dest, MTIME).unwrap_err();
        assert!(matches!(err, Error::MissingBlob { .. }), "{err:?}");
        left();
    }

    #[test]
    fn only_images_of_a_layout_are_archived() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.ociarchive");
        let remote = ImageRef::parse("docker://127.0.0.1:5000/rhcos:4.19", None).unwrap();
        let err = write_oci_archive(&remote, &dest, 0).unwrap_err();
        assert!(matches!(err, Error::InvalidOption(_)), "{err:?}");
        let err = write_oci_archive(&ImageRef::oci(dir.path(), "img"), &dest, 0).unwrap_err();
        assert!(err.to_string().contains("not an OCI image layout"), "{err}");
        assert!(!dest.exists());
    }
}
