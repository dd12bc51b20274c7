//! Derived layers (plain tars with OCI whiteouts) on top of a base image:
//! our import and ostree-ext's agree on the resulting tree.

mod common;

use common::*;
use strata_oscontainer::{encapsulate, import, EncapsulateOptions, ImageRef, ImportOptions};

fn base() -> (Fixture, std::path::PathBuf) {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    encapsulate(&fx.repo, "base", &oci, "base", &o).unwrap();
    (fx, oci)
}

fn node_layer() -> Vec<u8> {
    raw_tar(&[
        Entry::Dir("usr/"),
        Entry::Dir("usr/bin/"),
        Entry::File("usr/bin/kubelet", b"kubelet binary"),
        Entry::Symlink("usr/bin/kubectl", "kubelet"),
        Entry::Hardlink("usr/bin/kubelet-hardlink", "usr/bin/kubelet"),
        Entry::Dir("etc/"),
        Entry::Dir("etc/crio/"),
        Entry::File("etc/crio/crio.conf", b"[crio]\n"),
        Entry::File("usr/share/pkg-a/.wh.data", b""),
        Entry::File("usr/share/pkg-c/data", b"replaced"),
        Entry::Dir("opt/"),
        Entry::File("opt/app/bin", b"dropped"),
        Entry::Dir("tmp/"),
        Entry::File("tmp/junk", b"dropped"),
    ])
}

#[test]
fn derived_layer_is_applied_on_top_of_the_base() {
    let (fx, oci) = base();
    append_raw_layer(&oci, "base", "node", &node_layer(), None);
    let target = fresh_repo(fx.dir.path(), "target");
    let out = import(
        &ImageRef::oci(&oci, "node"),
        &target,
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(out.base_commit, fx.commit);
    assert_ne!(out.commit, fx.commit);
    assert_eq!(out.derived_layers, 1);
    assert_eq!(
        parent_of(&target, &out.commit).as_deref(),
        Some(fx.commit.as_str())
    );
    let c = &out.commit;
    assert_eq!(
        cat(&target, c, "/usr/bin/kubelet").unwrap(),
        b"kubelet binary"
    );
    assert_eq!(
        cat(&target, c, "/usr/bin/kubelet-hardlink").unwrap(),
        b"kubelet binary"
    );
    assert!(ls(&target, c, "/usr/bin/kubectl")
        .unwrap()
        .contains("-> kubelet"));
    assert_eq!(
        cat(&target, c, "/usr/etc/crio/crio.conf").unwrap(),
        b"[crio]\n"
    );
    assert!(
        ls(&target, c, "/usr/share/pkg-a/data").is_none(),
        "whiteout"
    );
    assert_eq!(
        cat(&target, c, "/usr/share/pkg-c/data").unwrap(),
        b"replaced"
    );
    assert_eq!(cat(&target, c, "/usr/bin/bash").unwrap(), noise(1, 40_000));
    assert!(ls(&target, c, "/opt").is_none());
    assert!(ls(&target, c, "/tmp").is_some());
    assert!(ls(&target, c, "/tmp/junk").is_none());
    assert_eq!(out.filtered.get("opt"), Some(&2));
    assert_eq!(out.filtered.get("tmp"), Some(&1));
    fsck(&target);
}

#[test]
fn opaque_whiteout_hides_the_lower_directory_only() {
    let (fx, oci) = base();
    let tar = raw_tar(&[
        Entry::File("usr/share/pkg-c/new", b"new"),
        Entry::File("usr/share/pkg-c/.wh..wh..opq", b""),
    ]);
    append_raw_layer(&oci, "base", "opaque", &tar, None);
    let target = fresh_repo(fx.dir.path(), "target");
    let out = import(
        &ImageRef::oci(&oci, "opaque"),
        &target,
        &ImportOptions::default(),
    )
    .unwrap();
    let listing = ls(&target, &out.commit, "/usr/share/pkg-c").unwrap();
    assert!(listing.contains("/usr/share/pkg-c/new"), "{listing}");
    assert!(!listing.contains("owned-by-1001"), "{listing}");
    assert!(ls(&target, &out.commit, "/usr/share/pkg-c/data").is_none());
}
