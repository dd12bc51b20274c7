//! The base a derive starts from: an image in (or brought into) the
//! workdir's OCI store, its commit in the workdir's ostree repo, and a
//! hard-linked checkout of that commit to serve as the overlay's lower dir.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use strata_oscontainer::labels::{KnownLabels, LABEL_VERSION};
use strata_oscontainer::{CommitId, ImageRef, LayerKind, TransportOptions, Version};
use strata_rootfs::initramfs::{self, Generator};
use strata_workdir::Workdir;

/// A base image ready to derive from.
#[derive(Debug, Clone)]
pub struct Base {
    /// The reference as the user gave it.
    pub reference: String,
    /// Its tag in the workdir's OCI store.
    pub tag: String,
    /// `oci:W/oci:TAG`.
    pub image: String,
    pub digest: String,
    pub commit: String,
    pub version: String,
    /// The commit's timestamp: the base's build date.
    pub timestamp: u64,
    /// RHEL major and minor, from the version (`8.6.20261202-0`).
    pub rhel: (u32, u32),
    /// How the base's initramfs was made (commit metadata), when recorded.
    pub initramfs: Option<Generator>,
}

/// Finds `reference` (a tag in the workdir, `oci:DIR:TAG`, `docker://…`),
/// copies it into the workdir's store when it is elsewhere, checks that it
/// is a bootable ostree base image, and makes sure its commit is in the
/// workdir's repo (importing it when not).
pub fn resolve(wd: &Workdir, reference: &str, transport: &TransportOptions) -> Result<Base> {
    let oci = wd.oci();
    let parsed = ImageRef::parse(reference, Some(&oci))?;
    // Check the image where it is, so that a wrong one leaves no trace.
    let info = strata_oscontainer::inspect(&parsed, transport)
        .with_context(|| format!("reading base image {reference}"))?;
    let not_base = |why: &str| anyhow::anyhow!("{reference} is not a base image: {why}");
    if info.labels.get("ostree.bootable").map(String::as_str) != Some("true") {
        return Err(not_base(
            "it has no ostree.bootable=true label (not a bootable ostree image)",
        ));
    }
    if info.layers.iter().any(|l| l.kind == LayerKind::Derived) {
        return Err(not_base(
            "it already has derived layers on top of its ostree content (derive from the base it was derived from)",
        ));
    }
    // The image builder's word: every label is checked before the
    // derived image republishes it (none with control characters or
    // oversized), and each that strata reads against its grammar before
    // it names a checkout or a version (the osname nodes deploy under,
    // the kernel version).
    let labels: std::collections::BTreeMap<String, String> =
        info.labels.clone().into_iter().collect();
    let known = KnownLabels::check(&labels).with_context(|| format!("base image {reference}"))?;
    let commit: CommitId = known
        .commit
        .ok_or_else(|| not_base("it names no ostree commit"))?;
    let version: Version = known
        .version
        .ok_or_else(|| not_base(&format!("it has no {LABEL_VERSION} label")))?;
    let rhel = rhel_of(version.as_str()).ok_or_else(|| {
        not_base(&format!(
            "its version {version} does not start with the RHEL major.minor (8.6.…)"
        ))
    })?;

    let tag = match &parsed {
        ImageRef::Oci {
            dir,
            tag: Some(tag),
        } if same_dir(dir, &oci) => tag.clone(),
        ImageRef::Oci { dir, tag: None } if same_dir(dir, &oci) => {
            bail!("base image {reference}: name a tag of the workdir's store")
        }
        other => {
            // Pinned to the digest checked above: a registry that moves
            // the tag meanwhile cannot hand over an image whose labels
            // and layers nobody checked.
            let tag = format!("base-{}", sanitize(reference));
            strata_oscontainer::pull_pinned(other, &info.manifest_digest, &oci, &tag, transport)
                .with_context(|| {
                    format!("copying base image {reference} into {}", oci.display())
                })?;
            tag
        }
    };
    let local = ImageRef::oci(&oci, &tag);
    let repo = wd.ostree_repo()?;
    let commit = commit.to_string();
    if repo.load_commit(&commit).is_err() {
        tracing::info!("importing base commit {commit} from {reference}");
        if let Err(e) = strata_oscontainer::import(&local, &wd.repo(), &Default::default()) {
            // A base that does not import leaves no tag behind.
            if !matches!(&parsed, ImageRef::Oci { dir, .. } if same_dir(dir, &oci)) {
                let _ = strata_oscontainer::remove_tag(&oci, &tag);
            }
            return Err(e).with_context(|| format!("importing base image {reference}"));
        }
    }
    let (commit_v, _) = repo
        .load_commit(&commit)
        .with_context(|| format!("loading base commit {commit}"))?;
    Ok(Base {
        reference: reference.to_string(),
        image: local.to_string(),
        tag,
        digest: info.manifest_digest,
        commit,
        version: version.to_string(),
        timestamp: ostree::commit_get_timestamp(&commit_v),
        rhel,
        initramfs: initramfs_generator(&commit_v),
    })
}

/// How the base's initramfs was made, from its commit's metadata (compose
/// records it; a base built elsewhere may not have it, or name a generator
/// strata does not run, or arguments strata refuses: then derive cannot
/// make it again).
fn initramfs_generator(commit: &ostree::glib::Variant) -> Option<Generator> {
    match initramfs::RecordedInitramfs::read(commit) {
        Ok(recorded) => Generator::recorded(&recorded),
        Err(e) => {
            tracing::debug!("the base's initramfs generator: {e}");
            None
        }
    }
}

/// A hard-linked checkout of `commit` under `W/cache/checkouts`, made once
/// and shared by every derive from that base. It is only ever an overlay's
/// lower dir: its files are the repo's objects and must never be written.
pub fn checkout(wd: &Workdir, commit: &str) -> Result<PathBuf> {
    let dir = wd.cache().join("checkouts");
    let dest = dir.join(commit);
    if dest.is_dir() {
        return Ok(dest);
    }
    fs::create_dir_all(&dir)?;
    // Checkouts of other commits are no longer needed by anyone: the
    // workdir lock is held, and derive makes one at a time.
    for e in fs::read_dir(&dir)?.flatten() {
        let _ = fs::remove_dir_all(e.path());
    }
    let tmp = dir.join(format!(".partial-{commit}"));
    strata_process::require("ostree")?;
    strata_process::run(
        std::process::Command::new("ostree")
            .arg(format!("--repo={}", wd.repo().display()))
            .args(["checkout", "--user-mode", "--require-hardlinks", commit])
            .arg(&tmp),
    )
    .with_context(|| format!("checking out base commit {commit}"))?;
    fs::rename(&tmp, &dest)?;
    Ok(dest)
}

/// The base's rpm database as the host's rpm reads and writes it (sqlite;
/// a RHEL 8 base keeps bdb), kept beside the base's checkout and removed
/// with it: converting it took most of a second of every derive at RHCOS
/// size. `rpmdb` is the database's path in the checkout `lower`.
pub fn sqlite_rpmdb(wd: &Workdir, commit: &str, lower: &Path, rpmdb: &str) -> Result<PathBuf> {
    let dest = wd
        .cache()
        .join("checkouts")
        .join(format!("{commit}.rpmdb-sqlite"));
    if dest.is_dir() {
        return Ok(dest);
    }
    let staging = wd.staging("rpmdb")?;
    let converted = staging.path().join("rpmdb");
    crate::copy_dir(&lower.join(rpmdb.trim_start_matches('/')), &converted)
        .context("copying the base's rpmdb")?;
    strata_rpmdb::convert(&converted, strata_rpmdb::Backend::Sqlite)
        .context("reading the base's rpmdb")?;
    fs::rename(&converted, &dest)
        .with_context(|| format!("keeping the converted rpmdb as {}", dest.display()))?;
    Ok(dest)
}

/// `8.6.20261202-0` → (8, 6).
fn rhel_of(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// A tag-safe rendering of a reference: alphanumeric runs joined by one
/// separator each (`.` where the reference had a lone dot, `-` otherwise),
/// as the OCI layout's reference grammar wants (`docker---host` is refused
/// by skopeo: a separator is one character, or `--`).
fn sanitize(reference: &str) -> String {
    let mut out = String::new();
    let mut gap = String::new();
    for c in reference.chars() {
        if c.is_ascii_alphanumeric() {
            if !out.is_empty() && !gap.is_empty() {
                out.push(if gap == "." { '.' } else { '-' });
            }
            gap.clear();
            out.push(c);
        } else {
            gap.push(c);
        }
    }
    let skip = out.chars().count().saturating_sub(100);
    let tail: String = out.chars().skip(skip).collect();
    tail.trim_start_matches(['.', '-']).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rhel_from_version() {
        assert_eq!(rhel_of("8.6.20261202-0"), Some((8, 6)));
        assert_eq!(rhel_of("9.4.20261202-3"), Some((9, 4)));
        assert_eq!(rhel_of("latest"), None);
    }

    #[test]
    fn tags_from_references() {
        assert_eq!(
            sanitize("docker://127.0.0.1:5000/rhcos/base:8.6"),
            "docker-127.0.0.1-5000-rhcos-base-8.6"
        );
    }

    /// skopeo refused `oci:W/oci:base-docker---127.0.0.1-…`: derive could
    /// not pull any docker:// base.
    #[test]
    fn docker_base_tags_are_valid_oci_references() {
        for r in [
            "docker://127.0.0.1:5000/strata/rhel-coreos-base:8.6",
            "docker://quay.io/org/base@sha256:0123abcd",
            "oci:/w/x/../oci:base-8.6",
        ] {
            let t = sanitize(r);
            assert!(
                !t.contains("--") && !t.contains(".-") && !t.contains("-."),
                "{t}"
            );
            assert!(t.chars().next().unwrap().is_ascii_alphanumeric(), "{t}");
            assert!(t.chars().last().unwrap().is_ascii_alphanumeric(), "{t}");
        }
    }
}
