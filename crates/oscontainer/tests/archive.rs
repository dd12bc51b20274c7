//! OCI archives of encapsulated images: the same bytes every time, and
//! real consumers read them as the image they came from: skopeo (inspect,
//! copy into a layout), ostree-ext (imports the same commit) and ocidir's
//! archive reader.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use strata_oscontainer::{
    encapsulate, verify, write_oci_archive, ArchiveInfo, EncapsulateOptions, ImageRef,
    ARCHIVE_REF_NAME,
};

const MTIME: u64 = 1_796_212_800;

/// `program` on PATH, or a failure naming the Debian package to install.
fn tool(program: &str, package: &str) -> PathBuf {
    strata_process::require(program)
        .unwrap_or_else(|_| panic!("`{program}` not found: install the Debian package {package}"))
}

/// The fixture's commit encapsulated into the layout `oci` as `base`.
fn image(fx: &Fixture, oci: &Path) -> (ImageRef, String) {
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    opts.source_date_epoch = Some(MTIME);
    let out = encapsulate(&fx.repo, "base", oci, "base", &opts).unwrap();
    (ImageRef::oci(oci, "base"), out.manifest_digest)
}

fn archive(image: &ImageRef, dest: &Path) -> ArchiveInfo {
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    write_oci_archive(image, dest, MTIME).unwrap()
}

#[test]
fn exporting_twice_gives_identical_bytes_and_their_hash() {
    let fx = Fixture::new();
    let (a_image, digest) = image(&fx, &fx.path("a/oci"));
    // Another layout holding the same image, with another image beside it.
    let (b_image, _) = image(&fx, &fx.path("b/oci"));
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(true));
    encapsulate(&fx.repo, "base", &fx.path("b/oci"), "other", &opts).unwrap();

    let a = archive(&a_image, &fx.path("out-a/rhcos.ociarchive"));
    let b = archive(&b_image, &fx.path("out-b/rhcos.ociarchive"));
    assert_eq!(a, b);
    assert_eq!(a.manifest_digest, digest);
    let bytes = std::fs::read(fx.path("out-a/rhcos.ociarchive")).unwrap();
    assert!(bytes == std::fs::read(fx.path("out-b/rhcos.ociarchive")).unwrap());
    assert_eq!(a.size, bytes.len() as u64);

    let sum =
        run(Command::new(tool("sha256sum", "coreutils")).arg(fx.path("out-a/rhcos.ociarchive")));
    assert_eq!(sum.split_whitespace().next(), Some(a.sha256.as_str()));

    // Exactly the image's blobs, byte for byte.
    let (manifest, _) = manifest_and_config(&fx.path("a/oci"), "base");
    let mut want: Vec<String> = std::iter::once(digest.clone())
        .chain(std::iter::once(manifest.config().digest().to_string()))
        .chain(manifest.layers().iter().map(|l| l.digest().to_string()))
        .map(|d| format!("blobs/sha256/{}", d.strip_prefix("sha256:").unwrap()))
        .collect();
    want.sort();
    want.dedup();
    let names = tar_names(&bytes);
    let blobs: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("blobs/sha256/") && n.len() > "blobs/sha256/".len())
        .cloned()
        .collect();
    assert_eq!(blobs, want);
    let mut entries = tar::Archive::new(&bytes[..]);
    for e in entries.entries().unwrap() {
        let mut e = e.unwrap();
        let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
        if let Some(hex) = name.strip_prefix("blobs/sha256/").filter(|h| !h.is_empty()) {
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).unwrap();
            let layout_blob = std::fs::read(fx.path("a/oci/blobs/sha256").join(hex)).unwrap();
            assert!(data == layout_blob, "{name} differs from the layout's blob");
        }
    }
}

#[test]
fn skopeo_reads_the_archive_as_the_image() {
    let fx = Fixture::new();
    let skopeo = tool("skopeo", "skopeo");
    let (image, digest) = image(&fx, &fx.path("oci"));
    let file = fx.path("out/rhcos.ociarchive");
    let info = archive(&image, &file);
    assert_eq!(info.manifest_digest, digest);

    // With no name (the only image) and with the archive's name.
    for reference in [
        format!("oci-archive:{}", file.display()),
        format!("oci-archive:{}:{ARCHIVE_REF_NAME}", file.display()),
    ] {
        let inspect = run(Command::new(&skopeo).arg("inspect").arg(&reference));
        let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
        assert_eq!(inspect["Digest"], digest.as_str(), "{reference}");
        assert_eq!(inspect["Labels"]["ostree.commit"], fx.commit.as_str());
    }

    // Copied into a layout, it is the same image, every blob intact.
    let copied = fx.path("copied");
    run(Command::new(&skopeo)
        .arg("copy")
        .arg("--quiet")
        .arg(format!("oci-archive:{}", file.display()))
        .arg(format!("oci:{}:copied", copied.display())));
    assert_eq!(verify(&ImageRef::oci(&copied, "copied")).unwrap(), digest);
    let inspect = run(Command::new(&skopeo)
        .arg("inspect")
        .arg(format!("oci:{}:copied", copied.display())));
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(inspect["Digest"], digest.as_str());
}

#[test]
fn ocidir_reads_the_archive_and_every_blob_checks_out() {
    use ocidir::OciRead;
    let fx = Fixture::new();
    let (image, digest) = image(&fx, &fx.path("oci"));
    let file = fx.path("out/rhcos.ociarchive");
    archive(&image, &file);
    let a = ocidir::OciArchive::open(&file).unwrap();
    let index = a.read_index().unwrap();
    assert_eq!(index.manifests().len(), 1);
    let found = a.find_manifest_with_tag(ARCHIVE_REF_NAME).unwrap().unwrap();
    assert_eq!(found.config().digest().to_string(), {
        let (m, _) = manifest_and_config(&fx.path("oci"), "base");
        m.config().digest().to_string()
    });
    assert_eq!(index.manifests()[0].digest().to_string(), digest);
    // manifest + config + layers, each hashed against its digest.
    let (manifest, _) = manifest_and_config(&fx.path("oci"), "base");
    assert_eq!(a.fsck().unwrap() as usize, 2 + manifest.layers().len());
}

#[test]
fn ostree_ext_imports_the_archive_with_the_same_commit() {
    let fx = Fixture::new();
    tool("skopeo", "skopeo");
    let (image, digest) = image(&fx, &fx.path("oci"));
    let file = fx.path("out/rhcos.ociarchive");
    archive(&image, &file);
    let got = client_import(
        fx.dir.path(),
        "client",
        &format!("oci-archive:{}", file.display()),
        false,
    );
    assert_eq!(got.base_commit, fx.commit, "{}", got.json);
    assert_eq!(got.json["manifest_digest"], digest.as_str());
}
