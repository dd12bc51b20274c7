//! Update efficiency: with the previous build's layer map, an update changes
//! only the layers holding what changed, and `diff` reports what a client
//! downloads.

mod common;

use std::collections::BTreeSet;

use common::*;
use strata_oscontainer::{
    diff, encapsulate, EncapsulateOptions, ImageRef, LayerMap, TransportOptions,
};

#[test]
fn update_changes_only_the_layers_of_changed_components() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    o.max_layers = Some(6);
    let v1 = encapsulate(&fx.repo, "base", &oci, "v1", &o).unwrap();
    // 6 layers: commit + 4 bins + 1 reserved (empty, so not written).
    assert_eq!(v1.layers.len(), 5, "{:#?}", v1.layers);
    assert_eq!(v1.layer_map.bins.len(), 5);

    // The workdir keeps the map as JSON.
    let kept = LayerMap::from_json(&v1.layer_map.to_json()).unwrap();
    fx.update(true);
    let mut o2 = EncapsulateOptions::default();
    o2.content = Some(content_map(true));
    o2.max_layers = Some(6);
    o2.prior = Some(kept);
    let v2 = encapsulate(&fx.repo, "update", &oci, "v2", &o2).unwrap();

    let old: BTreeSet<&str> = v1.layers.iter().map(|l| l.digest.as_str()).collect();
    let changed: Vec<&strata_oscontainer::LayerInfo> = v2
        .layers
        .iter()
        .filter(|l| !old.contains(l.digest.as_str()))
        .collect();
    let changed_components: BTreeSet<String> = changed
        .iter()
        .flat_map(|l| l.components.iter().cloned())
        .collect();
    // The commit layer always changes; pkg-b and the rpmdb (unpackaged)
    // changed; pkg-new is new and lands in the reserved bin.
    assert_eq!(changed[0].components, Vec::<String>::new(), "commit layer");
    let bins_of = |c: &str| {
        v2.layers
            .iter()
            .position(|l| l.components.iter().any(|x| x == c))
            .unwrap()
    };
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for c in ["pkg-b", "unpackaged", "pkg-new"] {
        expected.extend(v2.layers[bins_of(c)].components.iter().cloned());
    }
    assert_eq!(changed_components, expected);
    assert!(v2
        .layer_map
        .bins
        .last()
        .unwrap()
        .components
        .contains("pkg-new"));
    // Everything else kept its bytes.
    let kernel = bins_of("kernel");
    assert!(old.contains(v2.layers[kernel].digest.as_str()));

    let d = diff(
        &ImageRef::oci(&oci, "v1"),
        &ImageRef::oci(&oci, "v2"),
        &TransportOptions::default(),
    )
    .unwrap();
    let bytes: u64 = changed.iter().map(|l| l.size).sum();
    assert_eq!(d.download_bytes, bytes);
    assert_eq!(d.layers_added.len(), changed.len());
    let names: Vec<&str> = d.packages_changed.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["glibc", "pkg-b"]);
}

/// With a layer cache, an update writes only the chunk layers whose
/// content changed and reuses the others' blobs, and the image is the one
/// a cold encapsulation (no cache, another layout) writes, byte for byte.
/// A cached layer whose blob was pruned is written again.
#[test]
fn an_update_reuses_unchanged_chunk_layers_and_gives_the_cold_bytes() {
    let fx = Fixture::new();
    let (oci, cache) = (fx.path("oci"), fx.path("layer-cache"));
    let opts = |extra: bool, prior: Option<LayerMap>, cached: bool| {
        let mut o = EncapsulateOptions::default();
        o.content = Some(content_map(extra));
        o.max_layers = Some(6);
        o.prior = prior;
        o.layer_cache = cached.then(|| cache.clone());
        o
    };
    let v1 = encapsulate(&fx.repo, "base", &oci, "v1", &opts(false, None, true)).unwrap();
    assert_eq!(v1.reused_layers, 0);
    let again = encapsulate(&fx.repo, "base", &oci, "again", &opts(false, None, true)).unwrap();
    assert_eq!(again.reused_layers, v1.layers.len() - 1, "every chunk");
    assert_eq!(again.manifest_digest, v1.manifest_digest);

    fx.update(true);
    let prior = || Some(LayerMap::from_json(&v1.layer_map.to_json()).unwrap());
    let v2 = encapsulate(&fx.repo, "update", &oci, "v2", &opts(true, prior(), true)).unwrap();
    let old: BTreeSet<&str> = v1.layers.iter().map(|l| l.digest.as_str()).collect();
    let kept = v2.layers[1..]
        .iter()
        .filter(|l| old.contains(l.digest.as_str()))
        .count();
    assert!(kept > 0 && kept < v2.layers.len() - 1, "{:#?}", v2.layers);
    assert_eq!(v2.reused_layers, kept, "exactly the unchanged chunks");
    let cold_oci = fx.path("cold/oci");
    let cold = encapsulate(
        &fx.repo,
        "update",
        &cold_oci,
        "v2",
        &opts(true, prior(), false),
    )
    .unwrap();
    assert_eq!(cold.reused_layers, 0);
    assert_eq!(v2.manifest_digest, cold.manifest_digest);

    // A pruned blob: the entry is a miss, the layer is written again.
    let gone = &v2.layers[1].digest;
    let blob = oci
        .join("blobs/sha256")
        .join(gone.trim_start_matches("sha256:"));
    std::fs::remove_file(&blob).unwrap();
    let v3 = encapsulate(&fx.repo, "update", &oci, "v3", &opts(true, prior(), true)).unwrap();
    assert_eq!(v3.reused_layers, v2.layers.len() - 2);
    assert_eq!(v3.manifest_digest, v2.manifest_digest);
    assert!(blob.is_file());
}

/// One snapshot of the fixture's RHEL repos as a composed tree would hold
/// it: every package installed with rpm (rpmdb in /usr/share/rpm), a
/// generated initramfs, os-release rewritten as compose does.
fn snapshot_tree(
    fx: &strata_testdistro::Fixture,
    snapshot: usize,
    tree: &std::path::Path,
) -> Vec<std::path::PathBuf> {
    let snap = &fx.info.snapshots[snapshot];
    let rpms: Vec<std::path::PathBuf> = fx
        .info
        .repos
        .iter()
        .filter(|r| r.snapshot.as_deref() == Some(snap.as_str()))
        .flat_map(|r| r.packages.iter().map(|p| fx.root.join(&p.file)))
        .collect();
    std::fs::create_dir_all(tree).unwrap();
    run(std::process::Command::new("rpm")
        .arg("--root")
        .arg(tree)
        .args([
            "--dbpath",
            "/usr/share/rpm",
            "-i",
            "--nodeps",
            "--noscripts",
        ])
        .args(["--nosignature", "--define", "_pkgverify_level none"])
        .args(&rpms));
    let kver = &fx.info.kernel_kvers[snapshot];
    // The initramfs compose generates: new for each kernel.
    std::fs::write(
        tree.join(format!("usr/lib/modules/{kver}/initramfs.img")),
        noise(kver.len() as u64 * 31 + snapshot as u64, 3_000_000),
    )
    .unwrap();
    let os_release = tree.join("usr/lib/os-release");
    let mut text = std::fs::read_to_string(&os_release).unwrap();
    text.push_str(&format!("OSTREE_VERSION='8.6.{snap}-0'\n"));
    std::fs::write(&os_release, text).unwrap();
    for d in ["dev", "proc", "sys", "run", "tmp", "var"] {
        let _ = std::fs::remove_dir_all(tree.join(d));
    }
    rpms
}

/// The chunking input compose gives: packages as components (sizes
/// checked), the initramfs its own, packages already rebuilt for a
/// z-stream (`.el8_N`) weighed as 33 times likelier to change.
fn packages_map(tree: &std::path::Path, kver: &str) -> strata_oscontainer::ContentMap {
    let out = run(std::process::Command::new("rpm")
        .arg("--dbpath")
        .arg(tree.join("usr/share/rpm"))
        .args([
            "-qa",
            "--qf",
            "[%{=NAME}\\t%{=RELEASE}\\t%{FILESIZES}\\t%{FILENAMES}\\n]",
        ]));
    let mut m = strata_oscontainer::ContentMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        m.add_component(f[0], 32 * u32::from(f[1].contains(".el8_")));
        m.assign_sized(f[3], f[0], f[2].parse().unwrap());
    }
    m.add_component("initramfs", 33);
    m.assign(
        &format!("/usr/lib/modules/{kver}/initramfs.img"),
        "initramfs",
    );
    m
}

#[test]
fn zstream_update_downloads_at_most_one_and_a_half_times_the_changed_packages() {
    let fx = strata_testdistro::Fixture::for_tests().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repo = fresh_repo(dir.path(), "repo");
    let oci = dir.path().join("oci");
    let mut rpms = Vec::new();
    let mut images = Vec::new();
    let mut prior = None;
    for snapshot in 0..2 {
        let tree = dir.path().join(format!("tree{snapshot}"));
        rpms.push(snapshot_tree(&fx, snapshot, &tree));
        let commit = run(std::process::Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["commit", "--bootable", "--no-xattrs"])
            .arg(format!("--branch=snap{snapshot}"))
            .arg(format!("--tree=dir={}", tree.display()))
            .arg("--timestamp=2026-12-02 12:00:00 +0000"));
        let mut o = EncapsulateOptions::default();
        o.content = Some(packages_map(&tree, &fx.info.kernel_kvers[snapshot]));
        o.prior = prior.take();
        let out = encapsulate(&repo, commit.trim(), &oci, &format!("s{snapshot}"), &o).unwrap();
        prior = Some(LayerMap::from_json(&out.layer_map.to_json()).unwrap());
        images.push(out);
    }

    // The changed packages, as RPM files: what a package-based update
    // would download at least.
    let names = |v: &[std::path::PathBuf]| -> BTreeSet<String> {
        v.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let old = names(&rpms[0]);
    let changed: Vec<&std::path::PathBuf> = rpms[1]
        .iter()
        .filter(|p| !old.contains(&*p.file_name().unwrap().to_string_lossy()))
        .collect();
    let changed_bytes: u64 = changed
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();

    let before: BTreeSet<&str> = images[0].layers.iter().map(|l| l.digest.as_str()).collect();
    let new_layers: Vec<&strata_oscontainer::LayerInfo> = images[1]
        .layers
        .iter()
        .filter(|l| !before.contains(l.digest.as_str()))
        .collect();
    let download: u64 = new_layers.iter().map(|l| l.size).sum();
    // Exactly the layers of what changed: the commit layer, the unpackaged
    // content (rpmdb, os-release), the initramfs, and one layer per
    // changed package holding nothing else (kernel has no files). The
    // fixture's z-stream kernel is its one Debian build again, under the
    // same kver with the same modules (docs/fixture.md): only its image
    // changes, so kernel-core's layer changes and kernel-modules' stays.
    let got: BTreeSet<Vec<String>> = new_layers.iter().map(|l| l.components.clone()).collect();
    let want: BTreeSet<Vec<String>> = [
        vec![],
        vec!["unpackaged".to_string()],
        vec!["initramfs".to_string()],
        vec!["kernel-core".to_string()],
        vec!["glibc".to_string()],
        vec!["openssl-libs".to_string()],
        vec!["sudo".to_string()],
    ]
    .into();
    assert_eq!(got, want, "{new_layers:#?}");
    let ratio = download as f64 / changed_bytes as f64;
    assert!(
        ratio <= 1.5,
        "downloading {download} bytes for {changed_bytes} bytes of changed packages ({ratio:.2}x): {new_layers:#?}"
    );
    eprintln!(
        "z-stream: {} changed packages, {changed_bytes} bytes; download {download} bytes ({ratio:.2}x)",
        changed.len()
    );
}
