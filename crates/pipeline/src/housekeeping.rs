//! `strata list` and `strata prune`: what a workdir holds, and removing the
//! builds nobody keeps.
//!
//! [`prune`] keeps, per stream, the newest `keep` builds, per pipeline the
//! newest `keep` runs, and every build a kept run names. It removes the
//! rest in the order that leaves a consistent workdir when interrupted:
//! history first (a build not in the history is no build), then the
//! builds' tags, their directories (and any build directory the history
//! does not name), then the blobs no tag uses and the ostree objects no
//! ref or kept build reaches.
//!
//! Must not: remove anything a kept build needs (its image's blobs, its
//! commit and the commits it stands on), or anything while another strata
//! writes the workdir (it takes the lock); create anything when it only
//! reads (`list`, a dry run), or in a damaged workdir.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use strata_oscontainer::ImageRef;
use strata_workdir::{BuildEntry, EntryKind, Workdir};

use crate::record::{RunJson, FILE_NAME as RUN_FILE};

/// One build as `strata list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedBuild {
    pub version: String,
    pub ostree_commit: String,
    pub image_tag: Option<String>,
    pub image_digest: Option<String>,
    /// The image's layers and config in `W/oci` (shared blobs counted in
    /// each image that uses them); none when it is gone.
    pub image_size: Option<u64>,
    /// The build directory's files (disks, records).
    pub files_size: u64,
    /// Its meta.json `images` names (disks, `ostree`).
    pub artifacts: Vec<String>,
}

/// One pipeline run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedRun {
    pub id: String,
    pub run_json: PathBuf,
}

/// What a workdir holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// Builds by stream, newest first.
    pub streams: BTreeMap<String, Vec<ListedBuild>>,
    /// Runs by pipeline, newest first.
    pub runs: BTreeMap<String, Vec<ListedRun>>,
    /// Bytes under each of the workdir's directories.
    pub disk_usage: BTreeMap<String, u64>,
}

/// Lists the builds and runs of the workdir at `root`, which must exist;
/// it only reads (creates nothing, takes no lock).
pub fn list(root: &Path) -> Result<Listing> {
    let wd = Workdir::open_existing(root)?;
    if !root.join("history.json").exists() && !root.join("builds").exists() {
        bail!("{} holds no strata builds", root.display());
    }
    let mut streams: BTreeMap<String, Vec<ListedBuild>> = BTreeMap::new();
    let mut runs: BTreeMap<String, Vec<ListedRun>> = BTreeMap::new();
    for e in wd.history()?.into_iter().rev() {
        let dir = wd.entry_dir(&e);
        match e.kind {
            EntryKind::Run => runs.entry(e.stream.clone()).or_default().push(ListedRun {
                id: e.id.clone(),
                run_json: dir.join(RUN_FILE),
            }),
            EntryKind::Build => {
                let image_size = e.image_tag.as_ref().and_then(|t| {
                    strata_oscontainer::stored_size(&ImageRef::oci(&wd.oci(), t)).ok()
                });
                let artifacts = strata_workdir::record::read(&dir)
                    .ok()
                    .flatten()
                    .and_then(|m| m.disks)
                    .map(|d| d.images.into_keys().collect())
                    .unwrap_or_default();
                streams
                    .entry(e.stream.clone())
                    .or_default()
                    .push(ListedBuild {
                        version: e.version.clone(),
                        ostree_commit: e.ostree_commit.clone(),
                        image_tag: e.image_tag.clone(),
                        image_digest: e.image_digest.clone(),
                        image_size,
                        files_size: du(&dir),
                        artifacts,
                    });
            }
        }
    }
    let disk_usage = ["cache", "repo", "oci", "builds", "runs", "tmp"]
        .iter()
        .map(|d| (d.to_string(), du(&root.join(d))))
        .collect();
    Ok(Listing {
        streams,
        runs,
        disk_usage,
    })
}

/// What [`prune`] removed (or, dry, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneResult {
    pub dry_run: bool,
    /// `<stream>/<version>` of each build removed.
    pub builds: Vec<String>,
    /// `<pipeline>/<n>` of each run removed.
    pub runs: Vec<String>,
    /// Tags removed from `W/oci`.
    pub tags: Vec<String>,
    /// Blobs no tag uses any more, and their bytes.
    pub blobs: usize,
    pub blob_bytes: u64,
    /// ostree objects no ref or kept build reaches, and their bytes.
    pub ostree_objects: u64,
    pub ostree_bytes: u64,
    /// Bytes of the build and run directories removed.
    pub files_bytes: u64,
}

/// The temporary refs that hold kept builds' commits while the ostree
/// repository is pruned.
const KEEP_REF_PREFIX: &str = "strata/keep/";

/// Removes all but the newest `keep` builds of each stream and runs of
/// each pipeline (never a build a kept run names).
pub fn prune(root: &Path, keep: usize, dry_run: bool) -> Result<PruneResult> {
    if keep == 0 {
        bail!("--keep must be at least 1: the newest build of a stream is what the next build starts from");
    }
    // A damaged workdir is refused before anything is created or removed.
    let wd = Workdir::open_existing(root)?;
    if !root.join("history.json").exists() {
        bail!("{} holds no strata builds", root.display());
    }
    // A dry run only reads: it creates nothing and removes no abandoned
    // staging (which taking the lock does).
    let _lock = if dry_run {
        None
    } else {
        Some(Workdir::open(root)?.lock()?)
    };
    let history = wd.history()?;
    let kept = kept_entries(&wd, &history, keep)?;
    let dropped: Vec<BuildEntry> = history
        .iter()
        .filter(|e| !kept.contains(&key(e)))
        .cloned()
        .collect();
    let mut result = PruneResult {
        dry_run,
        ..PruneResult::default()
    };
    for e in &dropped {
        match e.kind {
            EntryKind::Build => result.builds.push(e.id.clone()),
            EntryKind::Run => result.runs.push(e.id.clone()),
        }
        result.files_bytes += du(&entry_root(&wd, e));
    }
    let kept_tags: BTreeSet<&str> = history
        .iter()
        .filter(|e| kept.contains(&key(e)))
        .filter_map(|e| e.image_tag.as_deref())
        .collect();
    result.tags = dropped
        .iter()
        .filter_map(|e| e.image_tag.clone())
        .filter(|t| !kept_tags.contains(t.as_str()))
        .collect();
    if dry_run {
        return Ok(result);
    }

    // 1. The history: from here on the dropped builds are not builds.
    wd.forget(&dropped)?;
    // 2. Their tags, then their directories, and directories no entry names.
    for t in &result.tags {
        strata_oscontainer::remove_tag(&wd.oci(), t)?;
    }
    for e in &dropped {
        let dir = entry_root(&wd, e);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
    }
    result.files_bytes += remove_strays(&wd)?;
    // 3. Blobs no tag uses, objects no ref or kept build reaches.
    let blobs = strata_oscontainer::prune(&wd.oci())?;
    strata_oscontainer::forget_pruned(&wd.layer_cache(), &wd.oci())?;
    strata_oscontainer::forget_pruned_blocks(&wd.gzip_blocks(), &wd.oci())?;
    // Initramfs images the newest entries of each generator run do not
    // name (a cache, not a build: its bytes are not counted as a build's).
    let (files, bytes) = strata_rootfs::initramfs_cache::prune(&wd.initramfs_cache())?;
    tracing::info!("initramfs cache: {files} files removed ({bytes} bytes)");
    result.blobs = blobs.blobs;
    result.blob_bytes = blobs.bytes;
    let (objects, bytes) = prune_repo(&wd, &history, &kept)?;
    result.ostree_objects = objects;
    result.ostree_bytes = bytes;
    // The package cache's indexes whose objects went with them.
    let forgotten = strata_compose::forget_pruned_packages(&wd.package_cache(), &wd.repo())?;
    tracing::info!("package cache: {forgotten} packages forgotten");
    Ok(result)
}

type Key = (EntryKind, String, String);

fn key(e: &BuildEntry) -> Key {
    (e.kind, e.stream.clone(), e.version.clone())
}

/// The newest `keep` of each stream and pipeline, and the builds kept runs
/// name.
fn kept_entries(wd: &Workdir, history: &[BuildEntry], keep: usize) -> Result<BTreeSet<Key>> {
    let mut per: BTreeMap<(EntryKind, &str), usize> = BTreeMap::new();
    let mut kept = BTreeSet::new();
    for e in history.iter().rev() {
        let n = per.entry((e.kind, e.stream.as_str())).or_default();
        if *n < keep {
            *n += 1;
            kept.insert(key(e));
        }
    }
    for e in history.iter().filter(|e| e.kind == EntryKind::Run) {
        if !kept.contains(&key(e)) {
            continue;
        }
        let path = wd.entry_dir(e).join(RUN_FILE);
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let run: RunJson = serde_json::from_slice(&bytes)
            .with_context(|| format!("parsing {}", path.display()))?;
        for image in run.bases.values().chain(run.releases.values()) {
            kept.insert((
                EntryKind::Build,
                image.stream.clone(),
                image.version.clone(),
            ));
        }
    }
    Ok(kept)
}

/// The directory a history entry owns: a build's version directory (all
/// its architectures), a run's directory.
fn entry_root(wd: &Workdir, e: &BuildEntry) -> PathBuf {
    match e.kind {
        EntryKind::Build => wd.builds().join(&e.stream).join(&e.version),
        EntryKind::Run => wd.entry_dir(e),
    }
}

/// Removes the build and run directories the history does not name (left
/// by an interrupted prune); returns their bytes.
fn remove_strays(wd: &Workdir) -> Result<u64> {
    let history = wd.history()?;
    let named: BTreeSet<PathBuf> = history.iter().map(|e| entry_root(wd, e)).collect();
    let mut bytes = 0;
    for top in [wd.builds(), wd.root().join("runs")] {
        let Ok(streams) = std::fs::read_dir(&top) else {
            continue;
        };
        for s in streams.flatten() {
            if !s.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            for v in std::fs::read_dir(s.path())?.flatten() {
                let path = v.path();
                if v.file_type().is_ok_and(|t| t.is_dir()) && !named.contains(&path) {
                    bytes += du(&path);
                    std::fs::remove_dir_all(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                }
            }
        }
    }
    Ok(bytes)
}

/// Prunes the ostree repository to what its refs and the kept builds'
/// commits reach (with their parents): the kept commits are held by
/// temporary refs while libostree prunes.
fn prune_repo(wd: &Workdir, history: &[BuildEntry], kept: &BTreeSet<Key>) -> Result<(u64, u64)> {
    use ostree::gio;
    if !wd.repo().join("config").exists() {
        return Ok((0, 0));
    }
    let repo = wd.ostree_repo()?;
    let cancel = gio::Cancellable::NONE;
    // Holds left by an interrupted prune go first.
    for (r, _) in repo.list_refs(Some(KEEP_REF_PREFIX.trim_end_matches('/')), cancel)? {
        let _ = repo.set_ref_immediate(None, &format!("{KEEP_REF_PREFIX}{r}"), None, cancel);
    }
    let commits: BTreeSet<&str> = history
        .iter()
        .filter(|e| e.kind == EntryKind::Build && kept.contains(&key(e)))
        .map(|e| e.ostree_commit.as_str())
        .filter(|c| {
            repo.has_object(ostree::ObjectType::Commit, c, cancel)
                .unwrap_or(false)
        })
        .collect();
    for c in &commits {
        repo.set_ref_immediate(None, &format!("{KEEP_REF_PREFIX}{c}"), Some(c), cancel)
            .with_context(|| format!("holding commit {c}"))?;
    }
    let pruned = repo.prune(ostree::RepoPruneFlags::REFS_ONLY, -1, cancel);
    for c in &commits {
        let _ = repo.set_ref_immediate(None, &format!("{KEEP_REF_PREFIX}{c}"), None, cancel);
    }
    let (_, objects, bytes) = pruned.context("pruning the ostree repository")?;
    let records = strata_oscontainer::prune_derived_records(&repo);
    tracing::debug!("{records} records of pruned base commits removed");
    Ok((u64::try_from(objects).unwrap_or(0), bytes))
}

/// Bytes of the regular files under `path` (links not followed).
fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return if meta.is_file() { meta.len() } else { 0 };
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| du(&e.path())).sum())
        .unwrap_or(0)
}
