//! Encapsulate → import round trips on a synthetic commit, checked with
//! `ostree fsck` and by comparing commit checksums.

mod common;

use common::*;
use strata_oscontainer::{
    encapsulate, import, Compression, EncapsulateOptions, ImageRef, ImportOptions,
};

#[test]
fn import_of_our_image_reproduces_the_commit() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    opts.labels
        .insert("com.coreos.osname".into(), "rhcos".into());
    let out = encapsulate(&fx.repo, "base", &oci, "base", &opts).unwrap();
    assert_eq!(out.commit, fx.commit);
    assert_eq!(out.version.as_deref(), Some("8.6.20261202-0"));
    assert!(out.layers.len() >= 8, "{:#?}", out.layers);

    let target = fresh_repo(fx.dir.path(), "target");
    let mut iopts = ImportOptions::default();
    iopts.ref_name = Some("imported".into());
    let imported = import(&ImageRef::oci(&oci, "base"), &target, &iopts).unwrap();
    assert_eq!(imported.commit, fx.commit);
    assert_eq!(imported.base_commit, fx.commit);
    assert_eq!(imported.manifest_digest, out.manifest_digest);
    fsck(&target);
    assert!(refs(&target).contains("imported"));
}

#[test]
fn zstd_and_uncompressed_images_import_too() {
    let fx = Fixture::new();
    for (i, c) in [Compression::Zstd, Compression::None]
        .into_iter()
        .enumerate()
    {
        let oci = fx.path(&format!("oci{i}"));
        let mut opts = EncapsulateOptions::default();
        opts.content = Some(content_map(false));
        opts.compression = c;
        encapsulate(&fx.repo, "base", &oci, "t", &opts).unwrap();
        let target = fresh_repo(fx.dir.path(), &format!("target{i}"));
        let imported = import(
            &ImageRef::oci(&oci, "t"),
            &target,
            &ImportOptions::default(),
        )
        .unwrap();
        assert_eq!(imported.commit, fx.commit);
        fsck(&target);
    }
}
