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
