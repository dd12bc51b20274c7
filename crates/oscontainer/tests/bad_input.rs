//! Bad input is refused with a clear error, and nothing is written: no ref,
//! no object in the target repository, no file anywhere else.

mod common;

use std::path::Path;

use common::*;
use strata_oscontainer::{encapsulate, import, EncapsulateOptions, Error, ImageRef, ImportOptions};

struct Setup {
    fx: Fixture,
    oci: std::path::PathBuf,
    target: std::path::PathBuf,
}

fn setup() -> Setup {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    encapsulate(&fx.repo, "base", &oci, "base", &o).unwrap();
    let target = fresh_repo(fx.dir.path(), "target");
    Setup { fx, oci, target }
}

impl Setup {
    fn import(&self, tag: &str) -> Result<strata_oscontainer::Imported, Error> {
        let mut o = ImportOptions::default();
        o.ref_name = Some("imported".into());
        import(&ImageRef::oci(&self.oci, tag), &self.target, &o)
    }

    fn layer_blob(&self, tag: &str, i: usize) -> std::path::PathBuf {
        let (m, _) = manifest_and_config(&self.oci, tag);
        self.oci
            .join("blobs/sha256")
            .join(m.layers()[i].digest().digest())
    }

    /// Nothing of the failed import is visible.
    fn assert_untouched(&self) {
        assert_eq!(refs(&self.target).trim(), "");
        assert_eq!(object_count(&self.target), 0, "objects written");
        assert!(!self.fx.path("escape").exists());
        assert!(!Path::new("/escape").exists());
    }
}

#[test]
fn corrupt_blob_is_refused_before_writing() {
    let s = setup();
    let blob = s.layer_blob("base", 1);
    let mut data = std::fs::read(&blob).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&blob, &data).unwrap();
    let err = s.import("base").unwrap_err();
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err}");
    assert!(err.to_string().contains("is corrupt"), "{err}");
    s.assert_untouched();
}

#[test]
fn truncated_blob_file_is_refused() {
    let s = setup();
    let blob = s.layer_blob("base", 2);
    let data = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &data[..data.len() / 2]).unwrap();
    let err = s.import("base").unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { .. }), "{err}");
    s.assert_untouched();
}

#[test]
fn missing_blob_is_refused() {
    let s = setup();
    std::fs::remove_file(s.layer_blob("base", 3)).unwrap();
    let err = s.import("base").unwrap_err();
    assert!(matches!(err, Error::MissingBlob { .. }), "{err}");
    assert!(err.to_string().contains("missing from"), "{err}");
    s.assert_untouched();

    // A missing config too.
    let s = setup();
    let (m, _) = manifest_and_config(&s.oci, "base");
    std::fs::remove_file(
        s.oci
            .join("blobs/sha256")
            .join(m.config().digest().digest()),
    )
    .unwrap();
    let err = s.import("base").unwrap_err();
    assert!(matches!(err, Error::MissingBlob { .. }), "{err}");
    s.assert_untouched();
}

#[test]
fn truncated_layer_stream_is_refused_and_rolled_back() {
    // A blob whose digest matches its descriptor but whose gzip/tar stream
    // ends early: detected while importing, the transaction is aborted.
    let s = setup();
    let (mut manifest, config) = manifest_and_config(&s.oci, "base");
    let blob = std::fs::read(s.layer_blob("base", 1)).unwrap();
    let cut = &blob[..blob.len() * 2 / 3];
    let hex = write_blob(&s.oci, cut);
    let desc = oci_spec::image::DescriptorBuilder::default()
        .media_type(oci_spec::image::MediaType::ImageLayerGzip)
        .digest(oci_spec::image::Digest::try_from(format!("sha256:{hex}")).unwrap())
        .size(cut.len() as u64)
        .build()
        .unwrap();
    manifest.layers_mut()[1] = desc;
    retag(&s.oci, "truncated", &mut manifest, &config);
    let err = s.import("truncated").unwrap_err();
    assert!(matches!(err, Error::BadLayer { .. }), "{err}");
    s.assert_untouched();
}

#[test]
fn image_without_ostree_labels_is_refused() {
    let s = setup();
    let (mut manifest, mut config) = manifest_and_config(&s.oci, "base");
    let mut c = config.config().clone().unwrap();
    let mut labels = c.labels().clone().unwrap();
    labels.remove("ostree.final-diffid");
    c.set_labels(Some(labels));
    config.set_config(Some(c));
    retag(&s.oci, "plain", &mut manifest, &config);
    let err = s.import("plain").unwrap_err();
    assert!(matches!(err, Error::NotOstreeImage { .. }), "{err}");
    assert!(err.to_string().contains("ostree.final-diffid"), "{err}");
    s.assert_untouched();
}

#[test]
fn hostile_derived_layers_are_refused() {
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        ("parent directory", vec![Entry::File("../escape", b"x")]),
        ("parent inside", vec![Entry::File("usr/../../escape", b"x")]),
        ("absolute path", vec![Entry::File("/escape", b"x")]),
        (
            "through a symlink of the base",
            vec![Entry::File("usr/bin/sh/escape", b"x")],
        ),
        (
            "through a symlink of the same layer",
            vec![
                Entry::Symlink("usr/lib/evil", "/"),
                Entry::File("usr/lib/evil/escape", b"x"),
            ],
        ),
        (
            "hard link out of the root",
            vec![Entry::Hardlink("usr/lib/shadow", "../../etc/shadow")],
        ),
        (
            "hard link to an absolute path",
            vec![Entry::Hardlink("usr/lib/shadow", "/etc/shadow")],
        ),
        (
            "whiteout through a symlink",
            vec![Entry::File("usr/bin/sh/.wh.x", b"")],
        ),
    ];
    for (name, entries) in cases {
        let s = setup();
        append_raw_layer(&s.oci, "base", "evil", &raw_tar(&entries), None);
        let err = s.import("evil").unwrap_err();
        assert!(
            matches!(err, Error::UnsafeEntry { .. }),
            "{name}: unexpected error {err}"
        );
        assert!(err.to_string().contains("refusing entry"), "{name}: {err}");
        s.assert_untouched();
    }
}

/// The config's diff_ids were never checked: a layer whose uncompressed
/// content is not what the config says imported as if it were.
#[test]
fn a_layer_whose_content_is_not_its_diff_id_is_refused() {
    let s = setup();
    let (mut manifest, mut config) = manifest_and_config(&s.oci, "base");
    let ids = config.rootfs_mut().diff_ids_mut();
    ids[2] = format!("sha256:{}", "0".repeat(64));
    retag(&s.oci, "wrong-diffid", &mut manifest, &config);
    let err = s.import("wrong-diffid").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::BadLayer { .. }), "{text}");
    assert!(text.contains("diff_ids"), "{text}");
    s.assert_untouched();

    // A derived layer too (the base reused from the repository).
    let s = setup();
    let tar = raw_tar(&[Entry::Dir("usr/"), Entry::File("usr/x", b"x")]);
    append_raw_layer(&s.oci, "base", "derived", &tar, None);
    let (mut manifest, mut config) = manifest_and_config(&s.oci, "derived");
    let last = config.rootfs().diff_ids().len() - 1;
    config.rootfs_mut().diff_ids_mut()[last] = format!("sha256:{}", "1".repeat(64));
    retag(&s.oci, "derived-wrong", &mut manifest, &config);
    let err = s.import("derived-wrong").unwrap_err();
    assert!(err.to_string().contains("diff_ids"), "{err}");
}

/// A 2 MB layer wrote 2.4 GB into the workdir: how far a layer may expand
/// is bounded by its compressed size (`max_expansion`).
#[test]
fn a_layer_that_expands_beyond_its_bound_is_refused() {
    let s = setup();
    // 80 MiB of zeros: about 80 KiB of gzip, allowed 64 MiB + 100 x 80 KiB.
    let zeros = vec![0u8; 80 << 20];
    let tar = raw_tar(&[Entry::Dir("usr/"), Entry::File("usr/zeros", &zeros)]);
    append_raw_layer(&s.oci, "base", "bomb", &tar, None);
    let err = s.import("bomb").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("expands beyond"), "{text}");
    s.assert_untouched();

    // Allowed when the caller says so.
    let mut o = ImportOptions::default();
    o.max_expansion = 2000;
    import(&ImageRef::oci(&s.oci, "bomb"), &s.target, &o).unwrap();
}

/// inspect of a layout image whose layer blob is gone or cut said nothing
/// until the image was next used; a corrupt index.json printed its parse
/// error twice in the chain.
#[test]
fn inspect_notices_a_missing_layer_and_a_bad_index_says_its_cause_once() {
    let s = setup();
    let image = ImageRef::oci(&s.oci, "base");
    std::fs::remove_file(s.layer_blob("base", 2)).unwrap();
    let err = strata_oscontainer::inspect(&image, &Default::default()).unwrap_err();
    assert!(matches!(err, Error::MissingBlob { .. }), "{err}");

    std::fs::write(s.oci.join("index.json"), b"{not json").unwrap();
    let err = strata_oscontainer::inspect(&image, &Default::default()).unwrap_err();
    let mut chain = vec![err.to_string()];
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        chain.push(c.to_string());
        cause = c.source();
    }
    let whole = chain.join(": ");
    assert!(whole.contains("index.json"), "{whole}");
    assert_eq!(whole.matches("key must be a string").count(), 1, "{whole}");
}

/// A failed pull into an empty directory left blobs and no index.json or
/// oci-layout: a directory that was no layout at all. The layout exists
/// before skopeo writes, so a failure leaves only what prune removes.
#[test]
fn a_failed_pull_leaves_a_layout() {
    let d = tempfile::tempdir().unwrap();
    let dest = d.path().join("oci");
    let src = ImageRef::oci(&d.path().join("nonexistent"), "x");
    strata_oscontainer::pull(&src, &dest, "x", &Default::default()).unwrap_err();
    assert!(dest.join("oci-layout").is_file());
    assert!(strata_oscontainer::list_tags(&dest).unwrap().is_empty());
    assert_eq!(strata_oscontainer::prune_abandoned(&dest).unwrap().blobs, 0);
}

/// `inspect` and `diff` of an image with a corrupt layer (its size right)
/// reported the image and exited 0: they hash what they report on.
#[test]
fn inspect_and_diff_of_a_corrupt_layer_fail() {
    let s = setup();
    let image = ImageRef::oci(&s.oci, "base");
    let t = strata_oscontainer::TransportOptions::default();
    strata_oscontainer::inspect_verified(&image, &t).unwrap();
    let blob = s.layer_blob("base", 2);
    let mut data = std::fs::read(&blob).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&blob, &data).unwrap();
    let err = strata_oscontainer::inspect_verified(&image, &t).unwrap_err();
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err}");
    let err = strata_oscontainer::diff(&image, &image, &t).unwrap_err();
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err}");
}

/// A layer blob that was a symlink to a host file was followed: the size
/// check reported the host file's size (`/etc/shadow`'s, as root), and
/// the digest check read it. Every blob's file is now refused unfollowed
/// unless it is a regular file, and a FIFO is not waited on.
#[test]
fn a_blob_that_is_a_symlink_or_a_fifo_is_refused_unfollowed() {
    let s = setup();
    let image = ImageRef::oci(&s.oci, "base");
    let t = strata_oscontainer::TransportOptions::default();
    let secret = s.fx.path("secret");
    std::fs::write(&secret, "x".repeat(12345)).unwrap();
    let (m, _) = manifest_and_config(&s.oci, "base");
    let config = s
        .oci
        .join("blobs/sha256")
        .join(m.config().digest().digest());
    for blob in [s.layer_blob("base", 1), config] {
        let saved = std::fs::read(&blob).unwrap();
        std::fs::remove_file(&blob).unwrap();
        std::os::unix::fs::symlink(&secret, &blob).unwrap();
        for err in [
            strata_oscontainer::inspect(&image, &t).unwrap_err(),
            strata_oscontainer::inspect_verified(&image, &t).unwrap_err(),
            strata_oscontainer::verify(&image).unwrap_err(),
            s.import("base").unwrap_err(),
        ] {
            assert!(matches!(err, Error::NotARegularBlob { .. }), "{err}");
            let text = err.to_string();
            assert!(text.contains("is a symlink, not a regular file"), "{text}");
            assert!(!text.contains("12345"), "{text}");
        }
        s.assert_untouched();

        std::fs::remove_file(&blob).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&blob)
            .status()
            .unwrap();
        assert!(made.success());
        let err = strata_oscontainer::inspect_verified(&image, &t).unwrap_err();
        assert!(err.to_string().contains("is a FIFO"), "{err}");
        std::fs::remove_file(&blob).unwrap();
        std::fs::write(&blob, saved).unwrap();
    }
    strata_oscontainer::inspect_verified(&image, &t).unwrap();
}

/// derive inspected a base, then pulled it by its tag: a tag moved in
/// between brought an image whose labels were never checked. The pull is
/// pinned to the digest that was checked, and a copy that is another image
/// is refused, its tag gone.
#[test]
fn a_base_retagged_between_its_check_and_its_pull_is_refused() {
    let s = setup();
    let src = ImageRef::oci(&s.oci, "base");
    let t = strata_oscontainer::TransportOptions::default();
    let checked = strata_oscontainer::inspect(&src, &t)
        .unwrap()
        .manifest_digest;
    append_raw_layer(
        &s.oci,
        "base",
        "base",
        &raw_tar(&[Entry::File("etc/moved", b"x")]),
        None,
    );
    let dest = s.fx.path("store");
    let err = strata_oscontainer::pull_pinned(&src, &checked, &dest, "copy", &t).unwrap_err();
    assert!(matches!(err, Error::ImageChanged { .. }), "{err}");
    assert!(err.to_string().contains(&checked), "{err}");
    assert!(strata_oscontainer::list_tags(&dest).unwrap().is_empty());

    let now = strata_oscontainer::inspect(&src, &t)
        .unwrap()
        .manifest_digest;
    let copy = strata_oscontainer::pull_pinned(&src, &now, &dest, "copy", &t).unwrap();
    assert_eq!(strata_oscontainer::verify(&copy).unwrap(), now);
}

/// A manifest or config was read up to the size its descriptor claimed,
/// and index.json whole: a few MiB is all any of them needs.
#[test]
fn an_oversized_manifest_config_or_index_is_refused_unread() {
    let s = setup();
    let image = ImageRef::oci(&s.oci, "base");
    let t = strata_oscontainer::TransportOptions::default();

    // A config of 5 MiB (one huge label), hashing right.
    let (mut m, mut c) = manifest_and_config(&s.oci, "base");
    let mut run = c.config().clone().unwrap_or_default();
    let mut labels = run.labels().clone().unwrap_or_default();
    labels.insert("padding".into(), "x".repeat(5 << 20));
    run.set_labels(Some(labels));
    c.set_config(Some(run));
    retag(&s.oci, "big-config", &mut m, &c);
    let err = strata_oscontainer::inspect(&ImageRef::oci(&s.oci, "big-config"), &t).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert!(err.to_string().starts_with("image config sha256:"), "{err}");

    // A manifest whose descriptor claims 5 MiB.
    let index_path = s.oci.join("index.json");
    let saved = std::fs::read(&index_path).unwrap();
    let mut index: serde_json::Value = serde_json::from_slice(&saved).unwrap();
    for d in index["manifests"].as_array_mut().unwrap() {
        d["size"] = serde_json::json!(5u64 << 20);
    }
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    let err = strata_oscontainer::inspect(&image, &t).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert!(err.to_string().starts_with("manifest sha256:"), "{err}");

    // An index.json of 17 MiB.
    let mut big = saved.clone();
    big.extend(std::iter::repeat_n(b' ', 17 << 20));
    std::fs::write(&index_path, big).unwrap();
    let err = strata_oscontainer::inspect(&image, &t).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("index.json"), "{err}");

    std::fs::write(&index_path, saved).unwrap();
    strata_oscontainer::inspect_verified(&image, &t).unwrap();
}

/// A base's labels were republished by a derived image as found: a
/// control character or a megabyte value went out in the new image.
#[test]
fn a_derived_image_never_republishes_an_unfit_base_label() {
    let s = setup();
    let (mut m, mut c) = manifest_and_config(&s.oci, "base");
    let mut run = c.config().clone().unwrap_or_default();
    let mut labels = run.labels().clone().unwrap_or_default();
    labels.insert("description".into(), "RHCOS\n\x1b[2Jowned".into());
    run.set_labels(Some(labels));
    c.set_config(Some(run));
    retag(&s.oci, "unfit", &mut m, &c);
    let upper = s.fx.path("upper");
    std::fs::create_dir_all(upper.join("etc")).unwrap();
    std::fs::write(upper.join("etc/added"), "x").unwrap();
    let err = strata_oscontainer::append_layers(
        &s.oci,
        "unfit",
        "derived",
        &[strata_oscontainer::DerivedLayer::new(&upper, "added")],
        &Default::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnfitLabel(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("\"description\""), "{text}");
    assert!(!text.chars().any(char::is_control), "{text}");
    assert!(!strata_oscontainer::list_tags(&s.oci)
        .unwrap()
        .iter()
        .any(|t| t.tag == "derived"));
}
