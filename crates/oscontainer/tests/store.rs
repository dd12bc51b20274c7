//! The workdir's layout holds many images sharing blobs: tags, removal and
//! pruning keep what the remaining images use.

mod common;

use common::*;
use strata_oscontainer::{
    encapsulate, import, list_tags, prune, remove_tag, EncapsulateOptions, ImageRef, ImportOptions,
};

#[test]
fn images_share_blobs_and_prune_keeps_what_is_tagged() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    let v1 = encapsulate(&fx.repo, "base", &oci, "v1", &o).unwrap();
    fx.update(false);
    o.prior = Some(v1.layer_map.clone());
    let v2 = encapsulate(&fx.repo, "update", &oci, "v2", &o).unwrap();
    let tags: Vec<String> = list_tags(&oci)
        .unwrap()
        .into_iter()
        .map(|t| t.tag)
        .collect();
    assert_eq!(tags, ["v1", "v2"]);
    let shared = v1.layers.iter().filter(|l| v2.layers.contains(l)).count();
    assert!(shared >= 5, "unchanged layers are stored once");

    assert_eq!(prune(&oci).unwrap().blobs, 0, "nothing unused yet");
    assert!(remove_tag(&oci, "v1").unwrap());
    assert!(!remove_tag(&oci, "v1").unwrap());
    let pruned = prune(&oci).unwrap();
    // v1's manifest, config, commit layer and changed layers go.
    assert!(pruned.blobs >= 4, "{pruned:?}");
    assert!(pruned.bytes > 0);
    // v2 is intact.
    let target = fresh_repo(fx.dir.path(), "target");
    import(
        &ImageRef::oci(&oci, "v2"),
        &target,
        &ImportOptions::default(),
    )
    .unwrap();
}
