//! Plain images (no base, no ostree) from directories: the same bytes from
//! the same directories, paths as they are, mtimes clamped, and the
//! config a runtime starts the image with, read back by skopeo and umoci;
//! the archive copied by skopeo.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::*;
use strata_oscontainer::{write_image, write_oci_archive, DerivedLayer, ImageOptions, ImageRef};

const EPOCH: u64 = 1_796_212_800;

/// A small userland and a layer with a program on top.
fn dirs(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let userland = root.join("userland");
    fs::create_dir_all(userland.join("usr/bin")).unwrap();
    fs::create_dir_all(userland.join("usr/etc")).unwrap();
    fs::create_dir_all(userland.join("etc")).unwrap();
    fs::write(userland.join("usr/bin/sh"), b"#!shell\n").unwrap();
    fs::hard_link(userland.join("usr/bin/sh"), userland.join("usr/bin/dash")).unwrap();
    fs::write(userland.join("usr/etc/kept"), b"not moved\n").unwrap();
    fs::write(userland.join("etc/os-release"), b"ID=debian\n").unwrap();
    symlink("usr/bin", userland.join("bin")).unwrap();
    // Written "now", after EPOCH: clamped.
    let late = fs::File::options()
        .write(true)
        .open(userland.join("etc/os-release"))
        .unwrap();
    late.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH + 1000))
        .unwrap();
    let program = root.join("program");
    fs::create_dir_all(program.join("usr/bin")).unwrap();
    fs::write(program.join("usr/bin/tool"), b"\x7fELF tool").unwrap();
    (userland, program)
}

fn options() -> ImageOptions {
    let mut o = ImageOptions::default();
    o.entrypoint = vec!["/usr/bin/tool".into()];
    o.env = vec!["PATH=/usr/bin:/bin".into()];
    o.working_dir = Some("/".into());
    o.labels = BTreeMap::from([("org.opencontainers.image.title".into(), "tool".into())]);
    o.source_date_epoch = EPOCH;
    o
}

#[test]
fn same_directories_give_the_same_image() {
    let tmp = tempfile::tempdir().unwrap();
    let (userland, program) = dirs(tmp.path());
    let layers = [
        DerivedLayer::new(&userland, "userland"),
        DerivedLayer::new(&program, "tool"),
    ];
    let a = write_image(&tmp.path().join("a"), "t", &layers, &options()).unwrap();
    let b = write_image(&tmp.path().join("b"), "t", &layers, &options()).unwrap();
    assert_eq!(a.manifest_digest, b.manifest_digest);
    assert_eq!(a.layers.len(), 2);
    assert_eq!(
        layout_files(&tmp.path().join("a")),
        layout_files(&tmp.path().join("b"))
    );
    // The archive too, and its manifest is the layout's.
    let archive = |name: &str| {
        let dest = tmp.path().join(name);
        write_oci_archive(&ImageRef::oci(&tmp.path().join("a"), "t"), &dest, EPOCH).unwrap()
    };
    let (x, y) = (archive("x.ociarchive"), archive("y.ociarchive"));
    assert_eq!(x, y);
    assert_eq!(x.manifest_digest, a.manifest_digest);

    // Paths as they are, the hard link kept, mtimes clamped.
    let blob = |digest: &str| {
        let hex = digest.strip_prefix("sha256:").unwrap();
        gunzip(&fs::read(tmp.path().join("a/blobs/sha256").join(hex)).unwrap())
    };
    let tar = blob(&a.layers[0].digest);
    let mut entries = tar::Archive::new(&tar[..]);
    let mut seen = BTreeMap::new();
    for e in entries.entries().unwrap() {
        let e = e.unwrap();
        let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
        seen.insert(name, (e.header().entry_type(), e.header().mtime().unwrap()));
    }
    assert!(seen.contains_key("usr/etc/kept"), "{seen:?}");
    assert_eq!(seen["etc/os-release"].1, EPOCH);
    // The first name in sorted order is the file, the other its link.
    assert_eq!(seen["usr/bin/dash"].0, tar::EntryType::Regular);
    assert_eq!(seen["usr/bin/sh"].0, tar::EntryType::Link);
    assert_eq!(seen["bin"].0, tar::EntryType::Symlink);
}

#[test]
fn skopeo_and_umoci_read_the_image_and_its_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let (userland, program) = dirs(tmp.path());
    let oci = tmp.path().join("oci");
    let layers = [
        DerivedLayer::new(&userland, "userland"),
        DerivedLayer::new(&program, "tool"),
    ];
    let written = write_image(&oci, "t", &layers, &options()).unwrap();
    let digest = run(Command::new("skopeo")
        .args(["inspect", "--format", "{{.Digest}}"])
        .arg(format!("oci:{}:t", oci.display())));
    assert_eq!(digest.trim(), written.manifest_digest);

    // skopeo copies the archive, checking every blob against its digest,
    // and keeps the manifest's bytes.
    let archive = tmp.path().join("t.ociarchive");
    write_oci_archive(&ImageRef::oci(&oci, "t"), &archive, EPOCH).unwrap();
    let copy = tmp.path().join("copy");
    run(Command::new("skopeo")
        .args(["copy", "-q"])
        .arg(format!("oci-archive:{}", archive.display()))
        .arg(format!("dir:{}", copy.display())));
    let copied = run(Command::new("skopeo")
        .arg("manifest-digest")
        .arg(copy.join("manifest.json")));
    assert_eq!(copied.trim(), written.manifest_digest);
    for layer in &written.layers {
        let hex = layer.digest.strip_prefix("sha256:").unwrap();
        assert_eq!(
            fs::read(copy.join(hex)).unwrap(),
            fs::read(oci.join("blobs/sha256").join(hex)).unwrap()
        );
    }

    let config: serde_json::Value = serde_json::from_str(&run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}:t", oci.display()))))
    .unwrap();
    assert_eq!(config["config"]["Entrypoint"][0], "/usr/bin/tool");
    assert_eq!(config["config"]["Env"][0], "PATH=/usr/bin:/bin");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.title"],
        "tool"
    );
    assert_eq!(config["created"], "2026-12-02T12:00:00Z");
    assert_eq!(config["history"][1]["created_by"], "tool");

    let bundle = tmp.path().join("bundle");
    run(Command::new("umoci")
        .args(["unpack", "--rootless", "--image"])
        .arg(format!("{}:t", oci.display()))
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    assert_eq!(
        fs::read(rootfs.join("usr/bin/tool")).unwrap(),
        b"\x7fELF tool"
    );
    assert_eq!(
        fs::read(rootfs.join("usr/etc/kept")).unwrap(),
        b"not moved\n"
    );
    let runtime: serde_json::Value =
        serde_json::from_slice(&fs::read(bundle.join("config.json")).unwrap()).unwrap();
    assert_eq!(runtime["process"]["args"][0], "/usr/bin/tool");
}

#[test]
fn fifos_and_missing_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (userland, _) = dirs(tmp.path());
    let missing = write_image(
        &tmp.path().join("oci"),
        "t",
        &[DerivedLayer::new(&tmp.path().join("nowhere"), "x")],
        &options(),
    )
    .unwrap_err();
    assert!(
        missing.to_string().contains("is not a directory"),
        "{missing}"
    );
    run(Command::new("mkfifo").arg(userland.join("etc/fifo")));
    let fifo = write_image(
        &tmp.path().join("oci"),
        "t",
        &[DerivedLayer::new(&userland, "x")],
        &options(),
    )
    .unwrap_err();
    assert!(fifo.to_string().contains("etc/fifo"), "{fifo}");
    let untagged = write_image(&tmp.path().join("oci"), "a:b", &[], &options()).unwrap_err();
    assert!(untagged.to_string().contains("tag"), "{untagged}");
}
