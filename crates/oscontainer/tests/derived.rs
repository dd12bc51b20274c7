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

/// A base file its owner may not read (a mode-0000 `/etc/shadow`) comes
/// back owner-readable in the merged commit, as the client's checkout
/// gives it. Found by reading the whole base once, that fix is recorded in
/// the repository; an import with the record, one with a damaged record
/// and one with no record make the same commit.
#[test]
fn base_fixes_are_found_once_and_give_the_same_commit() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let tree = fx.path("tree-shadow");
    write_tree(&tree, 1, false);
    let shadow = tree.join("usr/etc/shadow");
    std::fs::write(&shadow, b"root:!::0:99999:7:::\n").unwrap();
    std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o000)).unwrap();
    let base_commit = commit_tree(&fx.repo, &tree, "shadowed", "8.6.20261204-0", 3);
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    encapsulate(&fx.repo, "shadowed", &oci, "base", &o).unwrap();
    append_raw_layer(&oci, "base", "node", &node_layer(), None);

    let target = fresh_repo(fx.dir.path(), "target");
    let import_node = || {
        import(
            &ImageRef::oci(&oci, "node"),
            &target,
            &ImportOptions::default(),
        )
        .unwrap()
        .commit
    };
    let first = import_node();
    let listing = ls(&target, &first, "/usr/etc/shadow").unwrap();
    assert!(listing.starts_with("-00400 "), "{listing}");
    let record = target
        .join("extensions/strata/base-fixes")
        .join(format!("{base_commit}.json"));
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert!(recorded.contains("/usr/etc/shadow"), "{recorded}");

    assert_eq!(import_node(), first, "with the record");
    std::fs::write(
        &record,
        recorded.replace("/usr/etc/shadow", "/usr/etc/not-in-the-base"),
    )
    .unwrap();
    assert_eq!(import_node(), first, "with a record naming another path");
    assert!(std::fs::read_to_string(&record)
        .unwrap()
        .contains("/usr/etc/shadow"));
    std::fs::write(&record, b"{not json").unwrap();
    assert_eq!(import_node(), first, "with a damaged record");
    fsck(&target);
}

/// The base with one raw layer of `entries` on top, imported into a fresh
/// repository: the repository and the derived commit.
fn import_one_layer(tag: &str, entries: &[Entry]) -> (Fixture, std::path::PathBuf, String) {
    let (fx, oci) = base();
    append_raw_layer(&oci, "base", tag, &raw_tar(entries), None);
    let target = fresh_repo(fx.dir.path(), "target");
    let out = import(
        &ImageRef::oci(&oci, tag),
        &target,
        &ImportOptions::default(),
    )
    .unwrap();
    (fx, target, out.commit)
}

/// What an opaque directory in a layer hides: the lower pkg-c's files.
fn assert_only_new_in_pkg_c(target: &std::path::Path, commit: &str) {
    let listing = ls(target, commit, "/usr/share/pkg-c").unwrap();
    assert!(listing.contains("/usr/share/pkg-c/new"), "{listing}");
    assert!(!listing.contains("owned-by-1001"), "{listing}");
    assert!(ls(target, commit, "/usr/share/pkg-c/data").is_none());
}

#[test]
fn opaque_whiteout_hides_the_lower_directory_only() {
    let (_fx, target, c) = import_one_layer(
        "opaque",
        &[
            Entry::File("usr/share/pkg-c/new", b"new"),
            Entry::File("usr/share/pkg-c/.wh..wh..opq", b""),
        ],
    );
    assert_only_new_in_pkg_c(&target, &c);
}

/// A layer is read once; a whiteout standing after the layer's own
/// content at that path still hides only the layers below (as applying
/// every whiteout first would).
#[test]
fn whiteouts_after_the_layers_own_content_spare_it() {
    let (_fx, target, c) = import_one_layer(
        "late-whiteouts",
        &[
            Entry::File("usr/share/pkg-a/data", b"mine"),
            Entry::File("usr/share/pkg-a/.wh.data", b""),
            Entry::File("usr/share/pkg-c/new", b"new"),
            Entry::File("usr/share/.wh.pkg-c", b""),
        ],
    );
    assert_eq!(cat(&target, &c, "/usr/share/pkg-a/data").unwrap(), b"mine");
    assert_only_new_in_pkg_c(&target, &c);
    fsck(&target);
}

mod from_upper_dir {
    use super::*;
    use std::collections::BTreeMap;
    use std::process::Command;
    use strata_oscontainer::{
        append_layers, inspect, DeriveOptions, DerivedLayer, Package, TransportOptions,
    };

    fn derive(
        fx: &Fixture,
        oci: &std::path::Path,
        tag: &str,
        opaque: bool,
    ) -> strata_oscontainer::Derived {
        let upper = fx.path(&format!("upper-{tag}"));
        node_upper_dir(&upper, opaque);
        let mut layer = DerivedLayer::new(&upper, "openshift node packages");
        layer.components = vec!["openshift-kubelet".into(), "cri-o".into()];
        layer.packages = vec![Package {
            name: "openshift-kubelet".into(),
            evr: "4.13.0-1.el8".into(),
            arch: "x86_64".into(),
        }];
        let mut o = DeriveOptions::default();
        o.labels = BTreeMap::from([
            (
                "org.opencontainers.image.version".to_string(),
                "413.86.202612021200-0".to_string(),
            ),
            (
                "com.coreos.openshift-version".to_string(),
                "4.13".to_string(),
            ),
        ]);
        o.source_date_epoch = Some(1_796_212_800);
        append_layers(oci, "base", tag, &[layer], &o).unwrap()
    }

    #[test]
    fn derived_image_keeps_the_base_and_imports() {
        let (fx, oci) = base();
        let out = derive(&fx, &oci, "node", true);
        assert_eq!(out.version.as_deref(), Some("413.86.202612021200-0"));

        let (bm, bc) = manifest_and_config(&oci, "base");
        let (dm, dc) = manifest_and_config(&oci, "node");
        assert_eq!(
            &dm.layers()[..bm.layers().len()],
            bm.layers().as_slice(),
            "base descriptors reused"
        );
        assert_eq!(dm.layers().len(), bm.layers().len() + 1);
        let label = |c: &oci_spec::image::ImageConfiguration, k: &str| {
            c.config()
                .as_ref()
                .unwrap()
                .labels()
                .as_ref()
                .unwrap()
                .get(k)
                .cloned()
        };
        assert_eq!(
            label(&dc, "ostree.final-diffid"),
            label(&bc, "ostree.final-diffid")
        );
        assert_eq!(
            label(&dc, "com.coreos.openshift-version").as_deref(),
            Some("4.13")
        );
        let last = dm.layers().last().unwrap().annotations().clone().unwrap();
        assert_eq!(last["ostree.components"], "cri-o,openshift-kubelet");

        let target = fresh_repo(fx.dir.path(), "target");
        let imp = import(
            &ImageRef::oci(&oci, "node"),
            &target,
            &ImportOptions::default(),
        )
        .unwrap();
        assert_eq!(imp.base_commit, fx.commit);
        let c = &imp.commit;
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
        assert!(cat(&target, c, "/usr/etc/kubernetes/kubelet.conf").is_some());
        assert!(
            ls(&target, c, "/usr/share/pkg-a/data").is_none(),
            "whiteout"
        );
        let pkg_c = ls(&target, c, "/usr/share/pkg-c").unwrap();
        assert!(
            pkg_c.contains("pkg-c/new") && !pkg_c.contains("pkg-c/data"),
            "{pkg_c}"
        );
        let xattrs = run(Command::new("ostree")
            .arg("ls")
            .arg("-X")
            .arg(format!("--repo={}", target.display()))
            .arg(c)
            .arg("/usr/bin/kubelet"));
        assert!(xattrs.contains("user.strata.test"), "{xattrs}");
        fsck(&target);

        let info = inspect(&ImageRef::oci(&oci, "node"), &TransportOptions::default()).unwrap();
        assert!(info
            .packages
            .iter()
            .any(|p| p.name == "openshift-kubelet" && p.evr == "4.13.0-1.el8"));
        assert!(info.packages.iter().any(|p| p.name == "bash"));
        assert_eq!(
            info.layers.last().unwrap().kind,
            strata_oscontainer::LayerKind::Derived
        );

        // Runtimes apply the whiteouts too.
        let bundle = fx.path("bundle");
        run(Command::new("umoci")
            .arg("unpack")
            .arg("--rootless")
            .arg("--image")
            .arg(format!("{}:node", oci.display()))
            .arg(&bundle));
        let rootfs = bundle.join("rootfs");
        assert!(rootfs.join("usr/bin/kubelet").is_file());
        assert!(rootfs.join("etc/kubernetes/kubelet.conf").is_file());
        assert!(!rootfs.join("usr/share/pkg-a/data").exists());
        assert!(!rootfs.join("usr/share/pkg-c/data").exists());
    }

    /// The commit built from the layer's tar stream while it is written is
    /// the one importing the finished image gives.
    #[test]
    fn the_commit_built_while_writing_is_the_imported_one() {
        let (fx, oci) = base();
        let upper = fx.path("upper-streamed");
        node_upper_dir(&upper, true);
        let layer = DerivedLayer::new(&upper, "openshift node packages");
        let mut o = DeriveOptions::default();
        o.labels = BTreeMap::from([(
            "org.opencontainers.image.version".to_string(),
            "413.86.202612021200-0".to_string(),
        )]);
        o.source_date_epoch = Some(1_796_212_800);
        let ours = fresh_repo(fx.dir.path(), "ours");
        import(
            &ImageRef::oci(&oci, "base"),
            &ours,
            &ImportOptions::default(),
        )
        .unwrap();
        let (_, pending) = strata_oscontainer::append_layer_committing(
            &oci,
            "base",
            "streamed",
            &layer,
            &o,
            &ours,
            Some("strata/derived/test"),
        )
        .unwrap();
        let streamed = pending
            .expect("the base commit is in the repository")
            .commit()
            .expect("the streamed commit");
        let theirs = fresh_repo(fx.dir.path(), "theirs");
        let imported = import(
            &ImageRef::oci(&oci, "streamed"),
            &theirs,
            &ImportOptions::default(),
        )
        .unwrap();
        assert_eq!(streamed, imported.commit);
        let at_ref = run(Command::new("ostree")
            .arg(format!("--repo={}", ours.display()))
            .args(["rev-parse", "strata/derived/test"]));
        assert_eq!(at_ref.trim(), streamed);
        fsck(&ours);
    }

    #[test]
    fn derived_images_are_reproducible() {
        let (fx, oci) = base();
        let a = derive(&fx, &oci, "a", false);
        // Same changes, freshly written elsewhere (new inodes and mtimes).
        let b = derive(&fx, &oci, "b", false);
        assert_eq!(a.manifest_digest, b.manifest_digest);
        assert_eq!(a.layers, b.layers);
    }
}
