//! The image a disk is made of: the reference the user gave becomes the
//! image's identity (its labels checked against their grammars, as
//! `oscontainer::labels`' newtypes) and the commit to deploy in `W/repo`
//! (the build history's commit for an image built here, else the import
//! of the image); and the reference a node's origin file names.
//!
//! It pulls a registry image into the workdir's store and imports a commit
//! into `W/repo` when it is missing; it must not write anything else, and
//! no label reaches a path or a command unchecked.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use ostree::gio;
use strata_oscontainer::labels::{KnownLabels, LABEL_VERSION};
use strata_oscontainer::{ImageRef, OcpVersion, OsName, Version};
use strata_workdir::Workdir;

use crate::{DiskOptions, Identity};

/// Image → identity and the commit to deploy, in `W/repo`.
/// What the image is (its labels checked), and where it now is: a
/// registry image is pulled into the workdir's store first.
pub(crate) fn resolve(w: &Workdir, opts: &DiskOptions) -> Result<(Identity, ImageRef)> {
    let mut imgref = ImageRef::parse(&opts.image, Some(&w.oci()))?;
    if let ImageRef::Docker { reference } = &imgref {
        let tag: String = reference
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let tag = format!("pulled-{}", tag.trim_start_matches(['-', '.']));
        imgref = strata_oscontainer::pull(&imgref, &w.oci(), &tag, &opts.transport)
            .with_context(|| format!("pulling {}", opts.image))?;
    }
    let info = strata_oscontainer::inspect(&imgref, &opts.transport)
        .with_context(|| format!("inspecting {}", opts.image))?;
    let labels: BTreeMap<String, String> = info.labels.clone().into_iter().collect();
    // Labels are the image builder's word: each value that reaches a path,
    // a boot entry or the deployment is checked before anything is written.
    let known = KnownLabels::check(&labels)?;
    let version: Version = known
        .version
        .with_context(|| format!("image {imgref} has no {LABEL_VERSION} label"))?;
    let openshift_version: Option<OcpVersion> = known.openshift_version;
    let osname: OsName = match known.osname {
        Some(o) => o,
        None => "rhcos".parse()?,
    };
    let history = w.history()?;
    let entry = history
        .iter()
        .rev()
        .find(|b| b.image_digest.as_deref() == Some(info.manifest_digest.as_str()));
    let repo_path = w.repo();
    if !repo_path.join("config").exists() {
        let repo = ostree::Repo::new(&gio::File::for_path(&repo_path));
        repo.create(ostree::RepoMode::BareUser, gio::Cancellable::NONE)
            .with_context(|| format!("creating {}", repo_path.display()))?;
    }
    let repo = open_repo(&repo_path)?;
    let known = entry.map(|e| e.ostree_commit.clone()).filter(|c| {
        repo.has_object(ostree::ObjectType::Commit, c, gio::Cancellable::NONE)
            .unwrap_or(false)
    });
    let commit = match known {
        Some(c) => c,
        None => {
            let mut iopts = strata_oscontainer::ImportOptions::default();
            iopts.transport = opts.transport.clone();
            iopts.reuse_base = true;
            let imported = strata_oscontainer::import(&imgref, &repo_path, &iopts)
                .with_context(|| format!("importing {imgref} into {}", repo_path.display()))?;
            // The commit deployed is the image whose labels were checked:
            // a layout outside the workdir may be retagged meanwhile.
            strata_oscontainer::same_image(
                &imgref,
                &info.manifest_digest,
                &imported.manifest_digest,
            )?;
            imported.commit
        }
    };
    let stream = entry
        .map(|e| e.stream.clone())
        .or_else(|| {
            // As derive names the streams: OKD's on SCOS are its own.
            let product = if osname.as_str() == "scos" {
                "okd"
            } else {
                "ocp"
            };
            openshift_version.as_ref().map(|v| format!("{product}-{v}"))
        })
        .unwrap_or_else(|| "disk".to_string());
    let id = Identity {
        version,
        openshift_version,
        image: imgref.to_string(),
        digest: info.manifest_digest.clone(),
        ostree_commit: commit,
        osname,
        labels,
        stream,
    };
    Ok((id, imgref))
}

/// `container-image-reference` for the origin file: what an ostree-ext
/// client would upgrade from. A reference already in ostree-ext's form
/// (`ostree-remote-registry:…`, `ostree-image-signed:…`) is kept.
pub(crate) fn origin_reference(image: &str) -> String {
    if image.starts_with("ostree-") {
        return image.to_string();
    }
    match image.strip_prefix("docker://") {
        Some(r) => format!("ostree-unverified-registry:{r}"),
        None => format!("ostree-unverified-image:{image}"),
    }
}

pub(crate) fn open_repo(path: &Path) -> Result<ostree::Repo> {
    let repo = ostree::Repo::new(&gio::File::for_path(path));
    repo.open(gio::Cancellable::NONE)
        .with_context(|| format!("opening the ostree repository {}", path.display()))?;
    Ok(repo)
}

pub(crate) fn commit_timestamp(repo: &ostree::Repo, commit: &str) -> Result<i64> {
    let v = repo
        .load_variant(ostree::ObjectType::Commit, commit)
        .with_context(|| format!("loading commit {commit}"))?;
    Ok(ostree::commit_get_timestamp(&v) as i64)
}
