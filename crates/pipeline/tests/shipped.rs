//! The shipped pipelines name only platforms the disk stage builds (the
//! manifest crate cannot know the disk stage's table; `build` checks it
//! before any work, and so does this test before anyone runs one).

use std::path::Path;

use strata_manifest::{PipelineManifest, Vars};

#[test]
fn shipped_pipelines_name_known_platforms() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests");
    let vars = Vars::new()
        .with("fixture", "/f")
        .unwrap()
        .with("fixture_rhel_9_6", "/f9")
        .unwrap()
        .with("entitlement", "/e")
        .unwrap()
        .with("ose_baseurl", "https://ci.example/ose")
        .unwrap();
    for path in [
        "demo/pipeline.yaml",
        "demo/pipeline-rhel-8.6.yaml",
        "pipeline.yaml",
        "okd/pipeline.yaml",
    ] {
        let p = PipelineManifest::load(&root.join(path), &vars)
            .unwrap()
            .manifest;
        for stage in p.bases.iter().chain(&p.releases) {
            for platform in &stage.platforms {
                assert!(
                    strata_disk::check_platform(platform).is_ok(),
                    "{path}: unknown platform {platform}"
                );
            }
        }
    }
}
