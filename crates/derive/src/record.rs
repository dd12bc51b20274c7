//! Recording: a derived build becomes part of the workdir's history
//! (`strata.json` and meta.json through [`Workdir::record`]), then its image
//! is tagged and its ref moved, in that order, last; and the no-op check,
//! which looks for any earlier build with the same inputs and trusts its
//! record only as far as its image and commit are there.
//!
//! It must not write images or commits: it records what [`crate::image`]
//! wrote. Killed before the tag and ref, a derive leaves a record whose
//! image is missing, and the next derive builds again.

use anyhow::{Context, Result};
use strata_oscontainer::{Derived, ImageRef};
use strata_workdir::record::DerivedMeta;
use strata_workdir::{BuildEntry, BuildMeta, EntryKind, Workdir};

use crate::base::Base;
use crate::install::Built;
use crate::plan::Plan;
use crate::{DeriveResult, OverrideRpm};

/// The ref of a build stream's newest derived commit.
pub(crate) fn ostree_ref(stream: &str) -> String {
    format!("strata/derived/{stream}")
}

/// The build of `p`'s stream with the same inputs, the newest of them whose
/// record, image and commit are all still there (see
/// [`Workdir::reusable_build`]). Not only the newest build counts: after
/// bases A, B and A again, the release derived from A is the build (made
/// the stream's newest again by [`reuse`]), not a new version.
pub(crate) fn unchanged(wd: &Workdir, p: &Plan) -> Result<Option<BuildEntry>> {
    wd.reusable_build(&p.stream, &p.inputhash, |tag| {
        Ok(strata_oscontainer::check_present(&ImageRef::oci(
            &wd.oci(),
            tag,
        ))?)
    })
}

/// The earlier build `prev` as the result of `p`: made its stream's newest
/// again, its ref put back where another build or an interrupted derive
/// left it.
pub(crate) fn reuse(
    wd: &Workdir,
    base: &Base,
    p: &Plan,
    prev: &BuildEntry,
) -> Result<DeriveResult> {
    // The records first, then the ref, as a build moves them.
    wd.make_latest(prev)?;
    let r = ostree_ref(&p.stream);
    let at = wd.ostree_repo()?.resolve_rev(&r, true)?;
    if at.as_deref() != Some(prev.ostree_commit.as_str()) {
        wd.set_ref(&r, &prev.ostree_commit)?;
    }
    Ok(result(
        wd,
        base,
        p,
        false,
        &prev.version,
        &prev.ostree_commit,
        prev.image_digest.as_deref().unwrap_or_default(),
        prev.image_tag.as_deref().unwrap_or_default(),
    ))
}

/// Records the build of `p` (image `tag`, `commit`), then tags the image
/// and moves the stream's ref.
pub(crate) fn record(
    wd: &Workdir,
    base: &Base,
    p: &Plan,
    built: &Built,
    tag: &str,
    commit: &str,
    mut derived: Derived,
) -> Result<DeriveResult> {
    let packages: Vec<String> = p.packages.iter().map(|x| x.nevra.clone()).collect();
    let meta = BuildMeta {
        package_diff: wd.package_diff(p.previous.as_ref(), &packages),
        stream: p.stream.clone(),
        version: p.version.clone(),
        name: p.os.kind.osname().to_string(),
        summary: format!("{} {}", p.os.kind.display_name(), p.manifest.release),
        inputhash: p.inputhash.clone(),
        ostree_commit: commit.to_string(),
        ostree_ref: Some(ostree_ref(&p.stream)),
        source_date_epoch: p.sde,
        image_digest: Some(derived.manifest_digest.clone()),
        image_tag: Some(tag.to_string()),
        source: Some(p.source.clone()),
        packages,
        ignored_scriptlet_failures: built.ignored_scriptlet_failures.clone(),
        tree: None,
        derived: Some(DerivedMeta {
            release: p.manifest.release.to_string(),
            base_image: base.image.clone(),
            base_digest: base.digest.clone(),
            base_commit: base.commit.clone(),
            base_version: base.version.clone(),
            base_upgrades: p.base_upgrades.clone(),
            overrides: p.overrides.iter().map(OverrideRpm::record).collect(),
            initramfs: built.initramfs.clone(),
        }),
        disks: None,
    };
    let entry = BuildEntry {
        stream: p.stream.clone(),
        version: p.version.clone(),
        id: format!("{}/{}", p.stream, p.version),
        kind: EntryKind::Build,
        inputhash: p.inputhash.clone(),
        ostree_commit: commit.to_string(),
        image_digest: Some(derived.manifest_digest.clone()),
        image_tag: Some(tag.to_string()),
    };
    wd.record(&entry, Some(&meta), &[])?;
    // Last: the tag and the ref follow the record. Killed before them, the
    // next derive finds the record's image missing and builds again.
    if let Some(t) = derived.pending_tag.take() {
        t.apply().context("tagging the derived image")?;
    }
    wd.set_ref(&ostree_ref(&p.stream), commit)?;
    Ok(result(
        wd,
        base,
        p,
        true,
        &p.version,
        commit,
        &derived.manifest_digest,
        tag,
    ))
}

#[allow(clippy::too_many_arguments)]
fn result(
    wd: &Workdir,
    base: &Base,
    p: &Plan,
    changed: bool,
    version: &str,
    commit: &str,
    digest: &str,
    tag: &str,
) -> DeriveResult {
    DeriveResult {
        changed,
        release: p.manifest.release.to_string(),
        stream: p.stream.clone(),
        version: version.to_string(),
        image: ImageRef::oci(&wd.oci(), tag).to_string(),
        digest: digest.to_string(),
        ostree_commit: commit.to_string(),
        ostree_ref: ostree_ref(&p.stream),
        inputhash: p.inputhash.clone(),
        base_image: base.image.clone(),
        base_digest: base.digest.clone(),
        base_commit: base.commit.clone(),
        packages: p.packages.iter().map(|x| x.nevra.clone()).collect(),
        overrides: p.overrides.clone(),
        build_dir: wd.build_dir(&p.stream, version),
    }
}
