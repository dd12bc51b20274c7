//! Composes a base OS image from a base manifest: RHEL-only packages ->
//! root filesystem -> ostree commit -> base image.
//!
//! The flow of [`compose`]: load the manifest, resolve its packages against
//! the repos the policy allows (others are invisible to the solver), enforce
//! the policy on every resolved package, hash the inputs (what they mean:
//! a package list is a set) and stop if a build of the stream with the same
//! hash is still whole in the workdir, otherwise install into a staging root
//! inside the workdir, generate the initramfs, apply postprocessing and the
//! ostree conventions, commit, and record the build. Nothing in the workdir
//! changes until the commit is written and the build recorded.
//!
//! [`compose`] sets up (`Compose`), resolves and hashes; a new version is
//! a `Build`, whose `run` lists its stages.
//!
//! Modules:
//! - `build`: a new version's stages, from install to record.
//! - `chunks`: which package owns each file, and how often each changes,
//!   for the image's layers.
//! - `commit`: writing the ostree commit with its metadata.
//! - `lockfile`: the exact package set, written and consumed.
//!
//! The input policy, accounts, sandbox and ostree conventions come from
//! `strata-rootfs`, shared with derive.

mod build;
mod chunks;
mod commit;
mod lockfile;
mod payload;
mod pkgcache;

use strata_rootfs::{files, passwd, policy};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};
use strata_dnf::{DepsolveRequest, Dnf, DnfOptions, Package, RepoConfig};
use strata_manifest::{BaseManifest, Vars};
use strata_process::worker::Worker;
use strata_workdir::Workdir;

use build::Build;
use lockfile::check_against_lockfile;

pub use chunks::{content_map, ChangeHistory, INITRAMFS};
pub use lockfile::{LockedPackage, Lockfile, Overrides, FILE_NAME as LOCKFILE_NAME};
pub use passwd::Accounts;
pub use policy::{OnlyInDisallowedRepo, PolicyError, Rule, Violation};

/// Bumped when the composed tree would differ for the same inputs.
const COMPOSE_FORMAT: &str = "strata-compose-3";

/// What to compose.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ComposeOptions {
    pub manifest: PathBuf,
    pub workdir: PathBuf,
    pub vars: Vars,
    /// Compose exactly the packages of this lockfile.
    pub lockfile: Option<PathBuf>,
    /// Overrides files (lockfiles whose entries win by name, in order):
    /// they pin the version of each package of the set (with a lockfile,
    /// replacing its entry); an entry for a package the set does not hold
    /// is an error.
    pub overrides: Vec<PathBuf>,
    /// Times in the output; default: the newest build time of the packages.
    pub source_date_epoch: Option<u64>,
    /// The program that installs the packages in a process of its own
    /// (librpm chroots the whole process and reads SOURCE_DATE_EPOCH from
    /// its environment): it must serve [`strata_dnf::job::InstallJob`]s
    /// with [`strata_dnf::job::serve_child`]. The `strata` binary's hidden
    /// `__install-worker`.
    pub installer: Worker,
}

impl ComposeOptions {
    pub fn new(
        manifest: impl Into<PathBuf>,
        workdir: impl Into<PathBuf>,
        installer: Worker,
    ) -> Self {
        Self {
            manifest: manifest.into(),
            workdir: workdir.into(),
            installer,
            vars: Vars::new(),
            lockfile: None,
            overrides: Vec::new(),
            source_date_epoch: std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|s| s.parse().ok()),
        }
    }

    pub fn vars(mut self, vars: Vars) -> Self {
        self.vars = vars;
        self
    }

    pub fn lockfile(mut self, path: Option<PathBuf>) -> Self {
        self.lockfile = path;
        self
    }

    pub fn overrides(mut self, paths: Vec<PathBuf>) -> Self {
        self.overrides = paths;
        self
    }

    pub fn source_date_epoch(mut self, t: Option<u64>) -> Self {
        self.source_date_epoch = t;
        self
    }
}

/// What a compose produced (or found already built).
#[derive(Debug, Clone, Serialize)]
pub struct ComposeResult {
    /// False when an earlier build of the stream, still whole in the
    /// workdir, had the same inputs: that build, and nothing was done.
    pub changed: bool,
    pub stream: String,
    pub version: String,
    pub ostree_commit: String,
    pub inputhash: String,
    /// The ref in `W/repo` pointing at the commit.
    pub ostree_ref: String,
    /// `oci:W/oci:TAG`, the base image.
    pub image: String,
    /// The image's manifest digest.
    pub digest: String,
    pub build_dir: PathBuf,
    pub lockfile: PathBuf,
    pub packages: usize,
}

pub use strata_workdir::{BuildMeta, PackageDiff};

/// The lockfile to compose, if any, with the overrides of the packages it
/// lists applied to it; and the overrides.
fn lockfiles(opts: &ComposeOptions) -> Result<(Option<Lockfile>, Overrides)> {
    let mut locked = opts.lockfile.as_deref().map(Lockfile::load).transpose()?;
    let overrides = Overrides::load(&opts.overrides)?;
    if let Some(l) = &mut locked {
        overrides.replace_in(l);
    }
    Ok((locked, overrides))
}

/// Composes the base manifest into the workdir.
pub fn compose(opts: &ComposeOptions) -> Result<ComposeResult> {
    // Files the user gave are read and checked before anything is done.
    let (locked, overrides) = lockfiles(opts)?;
    let wd = Workdir::open(&opts.workdir)?;
    let _lock = wd.lock()?;
    strata_oscontainer::prune_abandoned(&wd.oci())?;
    let loaded = BaseManifest::load(&opts.manifest, &opts.vars)?;
    let c = Compose::new(opts, &wd, &loaded)?;

    let mut request = c.request(locked.as_ref());
    let packages = c.resolve(&mut request, locked.as_ref(), &overrides)?;
    if let Some(l) = &locked {
        // Every override names a package of the set now (resolve refused
        // the others): those the lockfile does not list are locked too.
        let mut l = l.clone();
        l.overridden_by(&overrides.lock);
        check_against_lockfile(&l, &packages)?;
    }
    let pinned: BTreeMap<String, String> = overrides
        .lock
        .packages
        .keys()
        .filter_map(|name| {
            let p = packages.iter().find(|p| &p.name == name)?;
            Some((name.clone(), p.nevra.clone()))
        })
        .collect();

    let inputhash = input_hash(&loaded, &c.policy, &packages)?;
    if let Some(result) = c.unchanged(&inputhash, packages.len())? {
        return Ok(result);
    }
    let previous = wd.latest(&c.stream)?;

    let sde = opts
        .source_date_epoch
        .unwrap_or_else(|| packages.iter().map(|p| p.build_time).max().unwrap_or(0));
    Build {
        c: &c,
        request,
        previous,
        inputhash,
        pinned,
        sde,
    }
    .run()
}

/// What every stage of a compose reads: the manifest, the repos the policy
/// allows and the others, the policy, and the staging root with the dnf
/// options that install into it.
struct Compose<'a> {
    opts: &'a ComposeOptions,
    wd: &'a Workdir,
    loaded: &'a strata_manifest::Loaded<BaseManifest>,
    stream: String,
    ostree_ref: String,
    allowed: Vec<&'a strata_manifest::Repo>,
    disallowed: Vec<&'a strata_manifest::Repo>,
    policy: policy::Policy,
    /// Removed when the compose ends, whatever happened.
    _staging: tempfile::TempDir,
    root: PathBuf,
    dnf_opts: DnfOptions,
    repo_configs: Vec<RepoConfig>,
}

impl<'a> Compose<'a> {
    /// The repos partitioned by the policy (none allowed is an error), the
    /// policy loaded, and a staging root in the workdir.
    fn new(
        opts: &'a ComposeOptions,
        wd: &'a Workdir,
        loaded: &'a strata_manifest::Loaded<BaseManifest>,
    ) -> Result<Self> {
        let manifest = &loaded.manifest;
        let stream = manifest.name.clone();
        let ostree_ref = format!("strata/base/{stream}");

        let (allowed, disallowed) = files::partition_repos(&manifest.repos, &manifest.inputs);
        if allowed.is_empty() {
            bail!(
                "no repo of {} is allowed by inputs.repos",
                opts.manifest.display()
            );
        }
        let policy = files::load_policy(&manifest.inputs, &allowed)?;
        files::check_local_repos(&allowed)?;

        let staging = wd.staging("compose")?;
        let root = staging.path().join("root");
        std::fs::create_dir_all(&root)?;
        let mut dnf_opts = DnfOptions::new(&root, wd.cache().join("dnf"), &manifest.releasever);
        dnf_opts.nodocs = !manifest.documentation;
        dnf_opts.install_weak_deps = manifest.recommends;
        dnf_opts.ignore_scripts = manifest.ignore_scripts.clone();
        // install() checks every package whole before the transaction.
        dnf_opts.payloads_verified = true;
        let repo_configs: Vec<RepoConfig> = allowed.iter().map(|r| files::repo_config(r)).collect();
        Ok(Compose {
            opts,
            wd,
            loaded,
            stream,
            ostree_ref,
            allowed,
            disallowed,
            policy,
            _staging: staging,
            root,
            dnf_opts,
            repo_configs,
        })
    }

    fn manifest(&self) -> &'a BaseManifest {
        &self.loaded.manifest
    }

    /// The locked packages, or else the manifest's.
    fn request(&self, locked: Option<&Lockfile>) -> DepsolveRequest {
        let manifest = self.manifest();
        let mut request = DepsolveRequest::install(match locked {
            Some(l) => l.specs(),
            None => manifest
                .packages
                .iter()
                .flat_map(|p| p.split_whitespace().map(str::to_string))
                .collect(),
        });
        request.excludes = manifest.exclude_packages.clone();
        request
    }

    /// Resolve once to learn the package set: enough to detect a no-op and
    /// to fix the build's SOURCE_DATE_EPOCH, which librpm reads when a
    /// context is created (so the installing context comes after).
    fn resolve(
        &self,
        request: &mut DepsolveRequest,
        locked: Option<&Lockfile>,
        overrides: &Overrides,
    ) -> Result<Vec<Package>> {
        let manifest = self.manifest();
        let generator = format!("/usr/bin/{}", manifest.initramfs.generator);
        let probe = |request: &DepsolveRequest| -> Result<_> {
            let mut dnf = Dnf::new(self.dnf_opts.clone(), self.repo_configs.clone())?;
            let packages = dnf.depsolve(request).map(|r| {
                (
                    sorted(r.packages()),
                    !r.providers_of_file(&generator).is_empty(),
                )
            });
            Ok(packages)
        };
        // Overrides pin the versions of packages the set holds (as
        // rpm-ostree's lockfiles constrain a depsolve without adding to
        // it): resolved again with each pinned, until the set needs no new
        // one. The lockfile's own entries are pinned already.
        let pinned: BTreeSet<String> = match locked {
            Some(l) => overrides
                .lock
                .packages
                .keys()
                .filter(|name| l.packages.contains_key(*name))
                .cloned()
                .collect(),
            None => BTreeSet::new(),
        };
        let mut specs = std::mem::take(&mut request.packages);
        let mut pinning = request.clone();
        let resolved = overrides.resolve_pinned(
            &mut specs,
            pinned,
            |specs| {
                pinning.packages = specs.to_vec();
                probe(&pinning)
            },
            |(set, _)| set.iter().map(|p| p.name.clone()).collect(),
        );
        request.packages = specs;
        let resolved = resolved?;
        match resolved {
            // The initramfs is made after everything is installed: a set that
            // cannot make it fails now, before the install.
            Ok((_, false)) => bail!(
                "{}: initramfs.generator {} is in none of the packages to install: add the package that ships {generator} (dracut) to packages",
                self.opts.manifest.display(),
                manifest.initramfs.generator
            ),
            Ok((p, true)) => Ok(p),
            Err(strata_dnf::Error::PackageNotFound { name, repos }) => Err(explain_missing(
                &name,
                &repos,
                &self.disallowed,
                &self.allowed,
                manifest,
                self.wd,
                locked.is_some(),
            )),
            Err(e) => Err(e).context("resolving the manifest's packages"),
        }
    }

    /// The result of a build of the stream with the same inputs, the
    /// newest of them that is all still here: then there is nothing to do.
    /// Not only the newest build counts: after A, B and A's inputs again,
    /// A is the build (made the stream's newest again), not a new version.
    fn unchanged(&self, inputhash: &str, packages: usize) -> Result<Option<ComposeResult>> {
        let Some(prev) = self
            .wd
            .reusable_build(&self.stream, inputhash, |tag| image_digest(self.wd, tag))?
        else {
            return Ok(None);
        };
        tracing::info!("inputs unchanged since {}: nothing to do", prev.version);
        // The records first, then the ref, as a build moves them.
        self.wd.make_latest(&prev)?;
        // Another build, or an interrupted compose, may have left the ref
        // elsewhere.
        let repo = commit::open_repo(&self.wd.repo())?;
        if repo.resolve_rev(&self.ostree_ref, true)?.as_deref() != Some(prev.ostree_commit.as_str())
        {
            commit::set_ref(&repo, &self.ostree_ref, &prev.ostree_commit)?;
        }
        let build_dir = self.wd.build_dir(&self.stream, &prev.version);
        Ok(Some(ComposeResult {
            changed: false,
            stream: self.stream.clone(),
            version: prev.version.clone(),
            ostree_commit: prev.ostree_commit.clone(),
            inputhash: inputhash.to_string(),
            ostree_ref: self.ostree_ref.clone(),
            image: image_ref(self.wd, prev.image_tag.as_deref().unwrap_or_default()),
            digest: prev.image_digest.clone().unwrap_or_default(),
            lockfile: build_dir.join(LOCKFILE_NAME),
            build_dir,
            packages,
        }))
    }
}

/// The digest of the image tagged `tag` in the workdir once every blob is
/// present at its size (cheap: no hashing): what the no-op check asks.
fn image_digest(wd: &Workdir, tag: &str) -> Result<String> {
    Ok(strata_oscontainer::check_present(
        &strata_oscontainer::ImageRef::oci(&wd.oci(), tag),
    )?)
}

fn image_ref(wd: &Workdir, tag: &str) -> String {
    format!("oci:{}:{tag}", wd.oci().display())
}

/// A package the allowed repos lack: say whether a disallowed repo has it.
fn explain_missing(
    name: &str,
    searched: &[String],
    disallowed: &[&strata_manifest::Repo],
    allowed: &[&strata_manifest::Repo],
    manifest: &BaseManifest,
    wd: &Workdir,
    from_lockfile: bool,
) -> anyhow::Error {
    let lookup = || -> Result<Option<(String, String)>> {
        if disallowed.is_empty() {
            return Ok(None);
        }
        let scratch = wd.staging("lookup")?;
        let opts = DnfOptions::new(scratch.path(), wd.cache().join("dnf"), &manifest.releasever);
        // Every repo, so that the package's dependencies resolve; then see
        // which repo the package itself came from.
        let all = allowed
            .iter()
            .chain(disallowed)
            .map(|r| files::repo_config(r))
            .collect();
        let mut dnf = Dnf::new(opts, all)?;
        let request = DepsolveRequest::install([name.to_string()]);
        let found = match dnf.depsolve(&request) {
            Ok(r) => r
                .packages()
                .iter()
                .find(|p| {
                    (p.name == name || p.nevra.starts_with(name))
                        && disallowed.iter().any(|d| d.id == p.repo_id)
                })
                .map(|p| (p.nevra.clone(), p.repo_id.clone())),
            Err(_) => None,
        };
        Ok(found)
    };
    match lookup() {
        Ok(Some((nevra, repo))) => anyhow::Error::new(OnlyInDisallowedRepo {
            name: name.to_string(),
            nevra,
            repo,
        }),
        _ if from_lockfile => anyhow::anyhow!(
            "locked package {name} is not available from the allowed repos [{}]",
            searched.join(", ")
        ),
        _ => anyhow::anyhow!(
            "package {name} is not available from the allowed repos [{}]",
            searched.join(", ")
        ),
    }
}

/// sha256 over the flattened manifest, every file it read, every resolved
/// package's checksum, and the compose format.
fn input_hash(
    loaded: &strata_manifest::Loaded<BaseManifest>,
    policy: &policy::Policy,
    packages: &[Package],
) -> Result<String> {
    let mut h = Sha256::new();
    h.update(COMPOSE_FORMAT.as_bytes());
    strata_rootfs::inputs::hash_common(
        &mut h,
        &keys_as_a_set(policy),
        &loaded.manifest.to_input_json(),
        &loaded.files,
        packages,
    )?;
    Ok(hex::encode(h.finalize()))
}

/// The policy with its keys in fingerprint order: the keys packages may be
/// signed with are a set.
fn keys_as_a_set(policy: &policy::Policy) -> policy::Policy {
    let mut p = policy.clone();
    p.keys.sort_by(|a, b| a.fingerprint.cmp(&b.fingerprint));
    p
}

/// By name, then NEVRA: the same set in the same order, whatever order the
/// solver gave it in (the input hash reads it in this order).
fn sorted(packages: &[Package]) -> Vec<Package> {
    let mut p = packages.to_vec();
    p.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.nevra.cmp(&b.nevra)));
    p
}

/// Removes the package cache's indexes (in `index_dir`) that name objects
/// the repository at `repo` no longer holds (after a prune); returns how
/// many. A compose would read those packages again anyway.
pub fn forget_pruned_packages(
    index_dir: &std::path::Path,
    repo: &std::path::Path,
) -> Result<usize> {
    pkgcache::Cache::new(index_dir, repo).forget_pruned()
}
