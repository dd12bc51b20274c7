//! `inspect`: labels, layers with components, packages from the commit.

mod common;

use common::*;
use strata_oscontainer::{
    encapsulate, inspect, EncapsulateOptions, ImageRef, LayerKind, TransportOptions,
};

#[test]
fn inspect_reports_labels_layers_and_packages() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    o.labels.insert("com.coreos.osname".into(), "rhcos".into());
    let out = encapsulate(&fx.repo, "base", &oci, "base", &o).unwrap();
    let info = inspect(&ImageRef::oci(&oci, "base"), &TransportOptions::default()).unwrap();
    assert_eq!(info.manifest_digest, out.manifest_digest);
    assert_eq!(info.version.as_deref(), Some("8.6.20261202-0"));
    assert_eq!(info.ostree_commit.as_deref(), Some(fx.commit.as_str()));
    for (k, v) in [
        ("containers.bootc", "1"),
        ("ostree.bootable", "true"),
        ("ostree.linux", KVER),
        ("com.coreos.osname", "rhcos"),
        ("org.opencontainers.image.version", "8.6.20261202-0"),
    ] {
        assert_eq!(info.labels.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert_eq!(
        info.labels["ostree.final-diffid"],
        out.layers.last().unwrap().diff_id
    );
    assert_eq!(info.layers.len(), out.layers.len());
    assert_eq!(info.layers[0].kind, LayerKind::Commit);
    assert!(info.layers[1..].iter().all(|l| l.kind == LayerKind::Chunk));
    let kernel = info
        .layers
        .iter()
        .find(|l| l.components == ["kernel"])
        .expect("a layer holding exactly the kernel");
    assert_eq!(kernel.description.as_deref(), Some("kernel"));
    assert_eq!(
        info.total_size,
        out.layers.iter().map(|l| l.size).sum::<u64>()
    );
    let pkgs: Vec<(String, String)> = info
        .packages
        .iter()
        .map(|p| (p.name.clone(), p.evr.clone()))
        .collect();
    assert_eq!(
        pkgs,
        [
            ("bash".to_string(), "5.1.8-6.el8".to_string()),
            ("glibc".into(), "2.28-190.el8".into()),
            ("kernel".into(), "6.1.0-1".into()),
            ("pkg-b".into(), "1:1.0-1".into()),
        ]
    );
    // JSON for `strata inspect --json`.
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["layers"][0]["kind"], "commit");
}
