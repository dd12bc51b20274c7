//! The derived image and commit: the pruned upper dir becomes one layer
//! appended to the base image (the base's descriptors untouched), with the
//! labels a node image carries, and the derived commit (parent = base) is
//! built from the layer's tar stream while the layer is written — what
//! importing the image gives; when that cannot be done, the written image
//! is imported.
//!
//! It must not tag the image or move a ref: the tag is left pending
//! ([`Derived::pending_tag`]) for [`crate::record`], which applies it once
//! the build is recorded.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use strata_oscontainer::{Derived, ImageRef, PendingCommit};
use strata_workdir::Workdir;

use crate::base::Base;
use crate::plan::Plan;

/// Appends the layer of `upper` to the base image as image `tag` (tagged
/// later: [`Derived::pending_tag`]); the derived commit is pending.
pub(crate) fn append(
    wd: &Workdir,
    base: &Base,
    p: &Plan,
    upper: &Path,
    tag: &str,
) -> Result<(Derived, Option<PendingCommit>)> {
    let mut components: Vec<String> = p.packages.iter().map(|x| x.name.clone()).collect();
    components.sort();
    let mut layer = strata_oscontainer::DerivedLayer::new(
        upper,
        &format!(
            "strata derive: OpenShift {} node packages",
            p.manifest.release
        ),
    );
    layer.components = components;
    layer.packages = p
        .packages
        .iter()
        .map(|x| strata_oscontainer::Package {
            name: x.name.clone(),
            evr: x.evr(),
            arch: x.arch.clone(),
        })
        .collect();
    let mut dopts = strata_oscontainer::DeriveOptions::default();
    dopts.labels = labels(base, p);
    dopts.source_date_epoch = Some(p.sde);
    // Tag and ref follow the record (crate::record).
    dopts.defer_tag = true;
    // The build before this one wrote most of this layer's gzip blocks.
    dopts.gzip_blocks = Some(wd.gzip_blocks());
    dopts.previous = p.previous.as_ref().and_then(|b| b.image_tag.clone());
    dopts.previous_commit = p.previous.as_ref().map(|b| b.ostree_commit.clone());
    // The derived commit is built from the layer's tar stream while the
    // layer is written (what importing the image would give; the ostree-ext
    // client's merge commit is checked against it in the tests).
    strata_oscontainer::append_layer_committing(
        &wd.oci(),
        &base.tag,
        tag,
        &layer,
        &dopts,
        &wd.repo(),
        None,
    )
    .context("writing the derived image")
}

/// The derived image's labels: the manifest's, and what the cluster and
/// strata read from a node image.
fn labels(base: &Base, p: &Plan) -> BTreeMap<String, String> {
    let mut labels = p.manifest.labels.clone();
    labels.insert("org.opencontainers.image.version".into(), p.version.clone());
    labels.insert(
        "com.coreos.openshift-version".into(),
        p.manifest.release.to_string(),
    );
    // What the cluster reads from a node image (the MCO's osrelease
    // package infers the OS from these when it has no os-release: a
    // coreos-assembler label marks a CoreOS image, `version` is required,
    // the display name tells SCOS from RHCOS; `oc adm release` shows the
    // build versions under their display names).
    labels.insert(
        "io.openshift.build.versions".into(),
        format!("machine-os={}", p.version),
    );
    labels.insert(
        "io.openshift.build.version-display-names".into(),
        format!("machine-os={}", p.os.kind.display_name()),
    );
    labels.insert("version".into(), p.version.clone());
    labels.insert(
        "coreos-assembler.image-input-checksum".into(),
        p.inputhash.clone(),
    );
    labels.insert("strata.inputhash".into(), p.inputhash.clone());
    labels.insert("strata.base.digest".into(), base.digest.clone());
    if !p.overrides.is_empty() {
        labels.insert(
            "strata.overrides".into(),
            p.overrides
                .iter()
                .map(|o| format!("{}=sha256:{}", o.nevra, o.sha256))
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    labels
}

/// Ends the derived commit: the one built while the layer was written, or,
/// when there is none, the commit of importing the written image `tag`.
pub(crate) fn commit(
    wd: &Workdir,
    tag: &str,
    derived: &Derived,
    pending: Option<PendingCommit>,
) -> Result<String> {
    let commit = match pending.and_then(|c| c.commit()) {
        Some(c) => Ok(c),
        None => {
            // The image is not tagged yet: import it under a tag of its
            // own, removed again.
            let import_tag = format!("{tag}.importing");
            let mut tagged = derived.pending_tag.clone();
            let imported = (|| -> Result<String> {
                let pending = tagged
                    .take()
                    .context("the derived image has no pending tag")?;
                pending.retagged(&import_tag).apply()?;
                let mut iopts = strata_oscontainer::ImportOptions::default();
                iopts.reuse_base = true;
                Ok(strata_oscontainer::import(
                    &ImageRef::oci(&wd.oci(), &import_tag),
                    &wd.repo(),
                    &iopts,
                )?
                .commit)
            })();
            let _ = strata_oscontainer::remove_tag(&wd.oci(), &import_tag);
            imported
        }
    };
    commit.context("writing the derived commit")
}
