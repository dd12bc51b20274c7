//! Same commit + SOURCE_DATE_EPOCH → byte-identical image, whatever the
//! output directory, the source repository's location or the run.

mod common;

use std::process::Command;

use common::*;
use strata_oscontainer::{encapsulate, EncapsulateOptions};

fn opts() -> EncapsulateOptions {
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    o.source_date_epoch = Some(1_796_212_800);
    o.labels
        .insert("strata.inputhash".into(), "0123abcd".into());
    o
}

#[test]
fn encapsulating_twice_gives_identical_bytes() {
    let fx = Fixture::new();
    let a = encapsulate(&fx.repo, "base", &fx.path("a/oci"), "base", &opts()).unwrap();
    let b = encapsulate(&fx.repo, "base", &fx.path("b/oci"), "base", &opts()).unwrap();
    assert_eq!(a.manifest_digest, b.manifest_digest);
    let fa = layout_files(&fx.path("a/oci"));
    let fb = layout_files(&fx.path("b/oci"));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(v == &fb[k], "{k} differs");
    }

    // Another repository holding the same commit, elsewhere on disk.
    let other = fresh_repo(fx.dir.path(), "elsewhere/repo");
    run(Command::new("ostree")
        .arg("pull-local")
        .arg(format!("--repo={}", other.display()))
        .arg(&fx.repo)
        .arg("base"));
    let c = encapsulate(&other, &fx.commit, &fx.path("c/oci"), "base", &opts()).unwrap();
    assert_eq!(c.manifest_digest, a.manifest_digest);
    assert_eq!(layout_files(&fx.path("c/oci")), fa);
}

#[test]
fn timestamps_come_from_source_date_epoch_or_the_commit() {
    let fx = Fixture::new();
    encapsulate(&fx.repo, "base", &fx.path("oci"), "sde", &opts()).unwrap();
    let (_, config) = manifest_and_config(&fx.path("oci"), "sde");
    assert_eq!(config.created().as_deref(), Some("2026-12-02T12:00:00Z"));
    for h in config.history().as_ref().unwrap() {
        assert_eq!(h.created().as_deref(), Some("2026-12-02T12:00:00Z"));
    }
    let mut o = opts();
    o.source_date_epoch = None;
    encapsulate(&fx.repo, "base", &fx.path("oci"), "commit-time", &o).unwrap();
    let (_, config) = manifest_and_config(&fx.path("oci"), "commit-time");
    // The fixture commit's timestamp.
    assert_eq!(config.created().as_deref(), Some("2026-12-02T12:00:00Z"));
    o.source_date_epoch = Some(0);
    encapsulate(&fx.repo, "base", &fx.path("oci"), "epoch", &o).unwrap();
    let (_, config) = manifest_and_config(&fx.path("oci"), "epoch");
    assert_eq!(config.created().as_deref(), Some("1970-01-01T00:00:00Z"));
}

#[test]
fn layer_tars_are_canonical() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    encapsulate(&fx.repo, "base", &oci, "base", &opts()).unwrap();
    let (manifest, _) = manifest_and_config(&oci, "base");
    for l in manifest.layers() {
        let blob = std::fs::read(oci.join("blobs/sha256").join(l.digest().digest())).unwrap();
        // gzip header: no mtime, no name, OS unknown.
        assert_eq!(&blob[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
        let tar = gunzip(&blob);
        let mut a = tar::Archive::new(&tar[..]);
        for e in a.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            assert_eq!(h.mtime().unwrap(), 0);
            assert_eq!(h.username_bytes(), Some(&b""[..]));
            assert_eq!(h.groupname_bytes(), Some(&b""[..]));
        }
    }
}
