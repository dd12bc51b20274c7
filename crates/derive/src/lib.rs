//! Derives one image per OpenShift release from a base image: the base's
//! layers unchanged, plus a layer with the release's node packages.
//!
//! The flow of [`derive()`]: resolve the base (a tag in the workdir, an OCI
//! layout or a registry image, imported when its commit is not in the
//! repo) and check it out once with hard links. Per release manifest, in
//! this process (libdnf is process-global): resolve the release packages
//! against the base's rpmdb as the installed set, refuse any update of a
//! base package the manifest does not allow, apply `--override-rpm`s,
//! enforce the input policy, and hash the inputs (what they mean: a
//! package list is a set); a release whose hash matches an earlier build
//! still whole in the workdir is done. The releases left install
//! concurrently, each in a worker process with an overlay of the base
//! checkout (see [`worker`]), so the upper dir holds exactly the release's
//! changes. Then, one at a time: the upper dir becomes the derived layer
//! appended to the base image, the image's derived layer is applied to the
//! base commit to give the derived commit (parent = base), and the build is
//! recorded. The base's stored objects and layers are never modified.
//!
//! Modules, in the order of the flow:
//! - [`base`]: finding the base image and commit; the shared checkout.
//! - `os` (private): the derived image's identity from the base's
//!   os-release (stream prefix, names, the derived os-release).
//! - `plan` (private): a release manifest resolved into a plan: depsolve,
//!   overrides, policy, input hash, version.
//! - `base_lock` (private): base packages are locked unless
//!   `allow-base-upgrade` names them.
//! - `overrides` (private): `--override-rpm` files.
//! - `install` (private): a plan installed into an overlay of the base by
//!   a worker.
//! - [`worker`]: the install in a child process, inside an overlay.
//! - `tree` (private): what the derived layer holds: copy-ups no different
//!   from the base pruned.
//! - `image` (private): the derived layer appended to the base image, and
//!   the derived commit.
//! - `record` (private): the build's record, then tag and ref; the no-op
//!   check against any earlier build still whole in the workdir.

pub mod base;
mod base_lock;
mod image;
mod install;
mod os;
mod overrides;
mod plan;
mod record;
mod tree;
pub mod worker;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use strata_manifest::Vars;
use strata_oscontainer::TransportOptions;
use strata_workdir::Workdir;

pub use base::Base;
pub use overrides::OverrideRpm;
pub use strata_process::worker::Worker;

use install::Built;
use os::BaseOs;
use plan::Plan;

/// Where the base keeps its rpmdb (compose relocates it there).
const RPMDB: &str = "/usr/share/rpm";

/// What to derive.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeriveOptions {
    pub workdir: PathBuf,
    /// The base image: a tag in the workdir, `oci:DIR:TAG`, `docker://…`.
    pub base: String,
    /// Release manifests; one derived image each.
    pub manifests: Vec<PathBuf>,
    pub vars: Vars,
    /// Locally built RPMs that replace the release's package of the same
    /// name (and skip the signature rule: naming them is the trust decision).
    pub overrides: Vec<PathBuf>,
    /// Times in the output; default: the newest of the base commit's time
    /// and the release packages' build times.
    pub source_date_epoch: Option<u64>,
    /// How to start a worker process.
    pub worker: Worker,
    pub transport: TransportOptions,
}

impl DeriveOptions {
    pub fn new(
        workdir: impl Into<PathBuf>,
        base: impl Into<String>,
        manifests: Vec<PathBuf>,
        worker: Worker,
    ) -> Self {
        Self {
            workdir: workdir.into(),
            base: base.into(),
            manifests,
            vars: Vars::new(),
            overrides: Vec::new(),
            source_date_epoch: std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|s| s.parse().ok()),
            worker,
            transport: TransportOptions::default(),
        }
    }

    pub fn vars(mut self, vars: Vars) -> Self {
        self.vars = vars;
        self
    }

    pub fn overrides(mut self, rpms: Vec<PathBuf>) -> Self {
        self.overrides = rpms;
        self
    }

    pub fn source_date_epoch(mut self, t: Option<u64>) -> Self {
        self.source_date_epoch = t;
        self
    }

    pub fn transport(mut self, t: TransportOptions) -> Self {
        self.transport = t;
        self
    }
}

/// What a derive produced for one release (or found already built).
#[derive(Debug, Clone, Serialize)]
pub struct DeriveResult {
    /// False when an earlier build of this release's stream, still whole in
    /// the workdir, had the same inputs: that build, handed back.
    pub changed: bool,
    /// `4.13`.
    pub release: String,
    /// `ocp-4.13`: the build stream in the workdir's history.
    pub stream: String,
    pub version: String,
    /// `oci:W/oci:TAG`.
    pub image: String,
    pub digest: String,
    /// The derived commit (its parent is the base commit).
    pub ostree_commit: String,
    pub ostree_ref: String,
    pub inputhash: String,
    pub base_image: String,
    pub base_digest: String,
    pub base_commit: String,
    /// NEVRAs the release adds on top of the base.
    pub packages: Vec<String>,
    pub overrides: Vec<OverrideRpm>,
    pub build_dir: PathBuf,
}

pub use strata_workdir::PackageDiff;

/// Derives every release manifest of `opts` from the base.
pub fn derive(opts: &DeriveOptions) -> Result<Vec<DeriveResult>> {
    if opts.manifests.is_empty() {
        bail!("no release manifest given");
    }
    let wd = Workdir::open(&opts.workdir)?;
    let _lock = wd.lock()?;
    strata_oscontainer::prune_abandoned(&wd.oci())?;
    let overrides = opts
        .overrides
        .iter()
        .map(|p| OverrideRpm::read(p))
        .collect::<Result<Vec<_>>>()?;
    let base = base::resolve(&wd, &opts.base, &opts.transport)?;
    tracing::info!(
        "base {} {} (commit {})",
        base.image,
        base.version,
        base.commit
    );
    let lower = base::checkout(&wd, &base.commit)?;

    // The host's rpm resolves and installs against sqlite; a RHEL 8 base
    // keeps bdb. Converted once per base, for the resolve and every install.
    let base_rpmdb = base::sqlite_rpmdb(&wd, &base.commit, &lower, RPMDB)?;
    let probe = wd.staging("derive-probe")?;
    let probe_rpmdb = probe.path().join(RPMDB.trim_start_matches('/'));
    copy_dir(&base_rpmdb, &probe_rpmdb).context("copying the base's rpmdb")?;
    let os = BaseOs::of(&lower)?;
    let mut plans = Vec::new();
    for path in &opts.manifests {
        plans.push(
            plan::plan(&wd, &base, probe.path(), &os, path, opts, &overrides)
                .with_context(|| format!("deriving {}", path.display()))?,
        );
    }
    for o in &overrides {
        if !plans
            .iter()
            .any(|p| p.overrides.iter().any(|x| x.name == o.name))
        {
            bail!(
                "--override-rpm {}: no release installs a package named {} ({})",
                o.path.display(),
                o.name,
                o.nevra
            );
        }
    }

    // The earlier build each release hands back, if any: asked once, as
    // nothing else writes the workdir while we hold its lock.
    let reused = plans
        .iter()
        .map(|p| record::unchanged(&wd, p))
        .collect::<Result<Vec<_>>>()?;
    // Install the releases that changed, concurrently, each in a worker.
    let todo: Vec<&Plan> = plans
        .iter()
        .zip(&reused)
        .filter(|(_, prev)| prev.is_none())
        .map(|(p, _)| p)
        .collect();
    let mut stagings = Vec::new();
    for p in &todo {
        stagings.push(wd.staging(&format!("derive-{}", p.manifest.release))?);
    }
    let initramfs_cache = wd.initramfs_cache();
    let outcomes: Vec<Result<Built>> = std::thread::scope(|s| {
        let handles: Vec<_> = todo
            .iter()
            .zip(&stagings)
            .map(|(p, staging)| {
                let (lower, probe_rpmdb, cache) = (&lower, &probe_rpmdb, &initramfs_cache);
                s.spawn(move || {
                    install::build_tree(opts, p, lower, probe_rpmdb, staging.path(), cache)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a derive thread panicked")))
            })
            .collect()
    });
    let mut uppers = BTreeMap::new();
    for (p, outcome) in todo.iter().zip(outcomes) {
        let built = outcome.with_context(|| format!("deriving {}", p.manifest_path.display()))?;
        uppers.insert(p.stream.clone(), built);
    }

    let mut results = Vec::new();
    for (p, prev) in plans.iter().zip(&reused) {
        let result = match (prev, uppers.get(&p.stream)) {
            (Some(prev), _) => {
                tracing::info!(
                    "{}: inputs unchanged since {}: nothing to do",
                    p.stream,
                    prev.version
                );
                record::reuse(&wd, &base, p, prev)?
            }
            (None, Some(built)) => finish(&wd, &base, p, built, &lower)
                .with_context(|| format!("deriving {}", p.manifest_path.display()))?,
            (None, None) => unreachable!("every changed release was built"),
        };
        results.push(result);
    }
    Ok(results)
}

/// Turns the upper dir into the derived image and commit, and records the
/// build: prune, write the image and its commit, record.
fn finish(
    wd: &Workdir,
    base: &Base,
    p: &Plan,
    built: &Built,
    lower: &Path,
) -> Result<DeriveResult> {
    let upper = built.upper.as_path();
    let started = std::time::Instant::now();
    let repo = wd.ostree_repo()?;
    tree::prune_unchanged(upper, lower, &tree::BaseTree::open(&repo, &base.commit)?)?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: unchanged copy-ups pruned", p.stream);
    let tag = format!("{}-{}", p.stream, p.version);
    let (derived, pending) = image::append(wd, base, p, upper, &tag)?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: derived image written", p.stream);
    // The installed tree is in the layer now. Removed before the commit's
    // sync, its pages need never reach the disk.
    if let Err(e) = std::fs::remove_dir_all(upper) {
        tracing::debug!("removing {}: {e}", upper.display());
    }
    let commit = image::commit(wd, &tag, &derived, pending)?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: derived commit written", p.stream);
    tracing::info!(
        "{}: image {} ({}), commit {}",
        p.stream,
        derived.image,
        derived.manifest_digest,
        commit
    );
    record::record(wd, base, p, built, &tag, &commit, derived)
}

/// Copies a directory tree of plain files (an rpmdb).
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let dest = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dest)?;
        } else {
            fs::copy(e.path(), &dest).with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}
