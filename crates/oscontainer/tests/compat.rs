//! Compatibility with real clients: ostree-ext 0.15.3 (the library bootc and
//! rpm-ostree use, with skopeo underneath) imports our images and gets the
//! identical commit; `skopeo inspect` and `umoci unpack` accept them.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use strata_oscontainer::{encapsulate, EncapsulateOptions};

#[test]
fn ostree_ext_imports_our_image_with_the_same_commit() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    let out = encapsulate(&fx.repo, "base", &oci, "base", &opts).unwrap();
    let got = client_import(
        fx.dir.path(),
        "client",
        &format!("oci:{}:base", oci.display()),
        false,
    );
    assert_eq!(got.base_commit, fx.commit, "{}", got.json);
    assert_eq!(got.json["manifest_digest"], out.manifest_digest.as_str());
}

#[test]
fn ostree_ext_imports_zstd_layers() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    opts.compression = strata_oscontainer::Compression::Zstd;
    encapsulate(&fx.repo, "base", &oci, "zstd", &opts).unwrap();
    let got = client_import(
        fx.dir.path(),
        "client",
        &format!("oci:{}:zstd", oci.display()),
        false,
    );
    assert_eq!(got.base_commit, fx.commit, "{}", got.json);
}

#[test]
fn skopeo_and_umoci_accept_the_image() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    let out = encapsulate(&fx.repo, "base", &oci, "base", &opts).unwrap();

    let inspect = run(Command::new("skopeo")
        .arg("inspect")
        .arg(format!("oci:{}:base", oci.display())));
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(inspect["Digest"], out.manifest_digest.as_str());
    assert_eq!(inspect["Labels"]["ostree.commit"], fx.commit.as_str());
    assert_eq!(inspect["Labels"]["containers.bootc"], "1");
    assert_eq!(
        inspect["Layers"].as_array().unwrap().len(),
        out.layers.len()
    );

    let bundle = fx.path("bundle");
    run(Command::new("umoci")
        .arg("unpack")
        .arg("--rootless")
        .arg("--image")
        .arg(format!("{}:base", oci.display()))
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    // The container view: /etc (not /usr/etc), content hard-linked to the
    // object store, symlinks intact, the kernel in place.
    assert_eq!(
        std::fs::read_to_string(rootfs.join("etc/os-release")).unwrap(),
        OS_RELEASE
    );
    assert!(!rootfs.join("usr/etc").exists());
    assert_eq!(
        std::fs::read(rootfs.join("usr/bin/bash")).unwrap(),
        noise(1, 40_000)
    );
    assert_eq!(
        std::fs::read_link(rootfs.join("usr/bin/sh")).unwrap(),
        Path::new("bash")
    );
    assert_eq!(
        std::fs::read_link(rootfs.join("usr/lib64/libc-denormal.so")).unwrap(),
        Path::new("../..//usr/lib64/libc.so.6")
    );
    assert!(rootfs
        .join(format!("usr/lib/modules/{KVER}/vmlinuz"))
        .is_file());
    assert!(rootfs.join("sysroot/ostree/repo/config").is_file());
    assert!(rootfs.join("var/tmp").is_dir());
}

#[test]
fn ostree_ext_and_strata_agree_on_a_derived_image() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    encapsulate(&fx.repo, "base", &oci, "base", &opts).unwrap();
    let layer = raw_tar(&[
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
        Entry::File("opt/app/bin", b"dropped"),
    ]);
    append_raw_layer(&oci, "base", "node", &layer, None);

    let ours_repo = fresh_repo(fx.dir.path(), "ours");
    let ours = strata_oscontainer::import(
        &strata_oscontainer::ImageRef::oci(&oci, "node"),
        &ours_repo,
        &strata_oscontainer::ImportOptions::default(),
    )
    .unwrap();
    let theirs = client_import(
        fx.dir.path(),
        "client",
        &format!("oci:{}:node", oci.display()),
        false,
    );
    assert_eq!(theirs.base_commit, fx.commit);
    assert_eq!(
        theirs.merge_tree,
        root_tree(&ours_repo, &ours.commit),
        "{}",
        theirs.json
    );
}

#[test]
fn ostree_ext_imports_a_derived_image_built_from_an_upper_dir() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    encapsulate(&fx.repo, "base", &oci, "base", &opts).unwrap();
    let upper = fx.path("upper");
    node_upper_dir(&upper, false);
    let layer = strata_oscontainer::DerivedLayer::new(&upper, "node");
    strata_oscontainer::append_layers(&oci, "base", "node", &[layer], &Default::default()).unwrap();

    let ours_repo = fresh_repo(fx.dir.path(), "ours");
    let ours = strata_oscontainer::import(
        &strata_oscontainer::ImageRef::oci(&oci, "node"),
        &ours_repo,
        &strata_oscontainer::ImportOptions::default(),
    )
    .unwrap();
    let theirs = client_import(
        fx.dir.path(),
        "client",
        &format!("oci:{}:node", oci.display()),
        false,
    );
    assert_eq!(theirs.base_commit, fx.commit);
    assert_eq!(
        theirs.merge_tree,
        root_tree(&ours_repo, &ours.commit),
        "{}",
        theirs.json
    );
}

#[test]
fn ostree_ext_deploys_our_image_into_a_sysroot() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut opts = EncapsulateOptions::default();
    opts.content = Some(content_map(false));
    encapsulate(&fx.repo, "base", &oci, "base", &opts).unwrap();

    let sysroot = fx.path("sysroot");
    let _drop_sysroot = strata_testdistro::scratch::DropSysroot(sysroot.clone());
    std::fs::create_dir_all(&sysroot).unwrap();
    run(Command::new("ostree")
        .args(["admin", "init-fs", "--modern"])
        .arg(&sysroot));
    run(Command::new("ostree")
        .args(["admin", "os-init", "rhcos"])
        .arg(format!("--sysroot={}", sysroot.display())));
    // Deploying freezes the filesystem holding /boot (FIFREEZE): give the
    // sysroot a tmpfs /boot in a private mount namespace so that the host's
    // disk is never frozen, and copy the boot entries out before it goes.
    let entries_out = fx.path("entries");
    let out = run(Command::new("unshare")
        .args(["--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs tmpfs "$1/boot" && "$2" deploy "$1" rhcos "$3" && cp -r "$1/boot/loader/entries" "$4""#)
        .arg("sh")
        .arg(&sysroot)
        .arg(compat_binary())
        .arg(format!("oci:{}:base", oci.display()))
        .arg(&entries_out));
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(json["base_commit"], fx.commit.as_str());
    let deployment = sysroot.join(json["deployment"].as_str().unwrap());
    assert_eq!(
        std::fs::read(deployment.join("usr/bin/bash")).unwrap(),
        noise(1, 40_000)
    );
    assert_eq!(
        std::fs::read_to_string(deployment.join("etc/os-release")).unwrap(),
        OS_RELEASE
    );
    let entries: Vec<_> = std::fs::read_dir(&entries_out)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(entries.len(), 1);
    assert!(
        entries[0].contains(&format!("vmlinuz-{KVER}")),
        "{}",
        entries[0]
    );
    assert!(entries[0].contains("Strata Test 8.6"), "{}", entries[0]);
}
