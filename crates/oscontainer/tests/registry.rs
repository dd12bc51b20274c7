//! push / pull through a real registry (docker-registry on 127.0.0.1) with
//! skopeo, and imports from `docker://` by strata and by ostree-ext.

mod common;

use std::process::Command;

use common::*;
use strata_oscontainer::{
    encapsulate, import, inspect, pull, push, EncapsulateOptions, ImageRef, ImportOptions,
    TransportOptions,
};

#[test]
fn push_pull_and_import_from_a_registry() {
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    let out = encapsulate(&fx.repo, "base", &oci, "base", &o).unwrap();

    let registry = Registry::start();
    let mut t = TransportOptions::default();
    t.tls_verify = false;
    let remote = ImageRef::parse(
        &format!("docker://{}/strata/rhel-coreos-base:8.6", registry.addr),
        None,
    )
    .unwrap();
    push(&ImageRef::oci(&oci, "base"), &remote, &t).unwrap();

    // The registry serves the same manifest.
    let seen = run(Command::new("skopeo")
        .arg("inspect")
        .arg("--tls-verify=false")
        .arg(remote.to_string()));
    let seen: serde_json::Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(seen["Digest"], out.manifest_digest.as_str());

    // Pull back into another layout: same image.
    let back = pull(&remote, &fx.path("pulled"), "base", &t).unwrap();
    let info = inspect(&back, &t).unwrap();
    assert_eq!(info.manifest_digest, out.manifest_digest);

    // Inspect and import straight from the registry.
    let info = inspect(&remote, &t).unwrap();
    assert_eq!(info.manifest_digest, out.manifest_digest);
    assert_eq!(info.image, remote.to_string());
    let target = fresh_repo(fx.dir.path(), "target");
    let mut io = ImportOptions::default();
    io.transport = t.clone();
    let imported = import(&remote, &target, &io).unwrap();
    assert_eq!(imported.commit, fx.commit);

    // And ostree-ext, fetching from the registry through skopeo.
    let client = client_import(fx.dir.path(), "client", &remote.to_string(), true);
    assert_eq!(client.base_commit, fx.commit);
}

#[test]
fn push_needs_a_registry_destination() {
    let fx = Fixture::new();
    let r = push(
        &ImageRef::oci(&fx.path("oci"), "x"),
        &ImageRef::oci(&fx.path("other"), "x"),
        &TransportOptions::default(),
    );
    assert!(r.is_err());
}
