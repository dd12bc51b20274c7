//! Derives one image per OpenShift release from a base image: the base's
//! layers unchanged, plus a layer with the release's node packages.
//!
//! The flow of [`derive`]: resolve the base (a tag in the workdir, an OCI
//! layout or a registry image, imported when its commit is not in the
//! repo) and check it out once with hard links. Per release manifest, in
//! this process (libdnf is process-global): resolve the release packages
//! against the base's rpmdb as the installed set, refuse any update of a
//! base package the manifest does not allow, apply `--override-rpm`s,
//! enforce the input policy, and hash the inputs; a release whose hash
//! matches its previous build is done. The releases left install
//! concurrently, each in a worker process with an overlay of the base
//! checkout (see [`worker`]), so the upper dir holds exactly the release's
//! changes. Then, one at a time: the upper dir becomes the derived layer
//! appended to the base image, the image's derived layer is applied to the
//! base commit to give the derived commit (parent = base), and the build is
//! recorded. The base's stored objects and layers are never modified.
//!
//! Modules:
//! - [`base`]: finding the base image and commit; the shared checkout.
//! - [`worker`]: the install in a child process, inside an overlay.
//! - `overrides` (private): `--override-rpm` files.

pub mod base;
mod overrides;
pub mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};
use strata_dnf::{DepsolveRequest, Dnf, DnfOptions, Package, RepoConfig};
use strata_manifest::{ReleaseManifest, UtcDateTime, Vars, VersionParts};
use strata_oscontainer::{ImageRef, TransportOptions};
use strata_rootfs::{files, policy};
use strata_workdir::record::{nevra_name, DerivedMeta, Source};
use strata_workdir::{BuildEntry, BuildMeta, EntryKind, Workdir};

pub use base::Base;
pub use overrides::OverrideRpm;
pub use worker::WorkerCommand;

/// Bumped when the derived tree would differ for the same inputs.
const DERIVE_FORMAT: &str = "strata-derive-2";
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
    pub worker: WorkerCommand,
    pub transport: TransportOptions,
}

impl DeriveOptions {
    pub fn new(
        workdir: impl Into<PathBuf>,
        base: impl Into<String>,
        manifests: Vec<PathBuf>,
        worker: WorkerCommand,
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
    /// False when the inputs matched the previous build of this release.
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

/// One release, resolved and checked, ready to build (or already built).
struct Plan {
    manifest_path: PathBuf,
    /// The configuration it came from, for the record.
    source: Source,
    manifest: ReleaseManifest,
    stream: String,
    /// The base's os-release.
    os: BaseOs,
    inputhash: String,
    packages: Vec<Package>,
    base_upgrades: Vec<String>,
    overrides: Vec<OverrideRpm>,
    install: strata_dnf::job::InstallJob,
    sde: u64,
    version: String,
    previous: Option<BuildEntry>,
    /// How the base's initramfs was made.
    initramfs_generator: Option<strata_rootfs::initramfs::Generator>,
}

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

    let probe = wd.staging("derive-probe")?;
    let probe_rpmdb = probe.path().join(RPMDB.trim_start_matches('/'));
    copy_dir(&lower.join(RPMDB.trim_start_matches('/')), &probe_rpmdb)
        .context("copying the base's rpmdb")?;
    // The host's rpm resolves and installs against sqlite; a RHEL 8 base
    // keeps bdb. Converted once here, for the resolve and every install.
    strata_rpmdb::convert(&probe_rpmdb, strata_rpmdb::Backend::Sqlite)
        .context("reading the base's rpmdb")?;
    let os = BaseOs::of(&lower)?;
    let mut plans = Vec::new();
    for path in &opts.manifests {
        plans.push(
            plan(&wd, &base, probe.path(), &os, path, opts, &overrides)
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

    // Install the releases that changed, concurrently, each in a worker.
    let todo: Vec<&Plan> = plans
        .iter()
        .filter(|p| p.unchanged(&wd).is_none())
        .collect();
    let mut stagings = Vec::new();
    for p in &todo {
        stagings.push(wd.staging(&format!("derive-{}", p.manifest.release))?);
    }
    let outcomes: Vec<Result<Built>> = std::thread::scope(|s| {
        let handles: Vec<_> = todo
            .iter()
            .zip(&stagings)
            .map(|(p, staging)| {
                let (lower, probe_rpmdb) = (&lower, &probe_rpmdb);
                s.spawn(move || build_tree(opts, p, lower, probe_rpmdb, staging.path()))
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
    for p in &plans {
        let result = match (p.unchanged(&wd), uppers.get(&p.stream)) {
            (Some(prev), _) => {
                tracing::info!(
                    "{}: inputs unchanged since {}: nothing to do",
                    p.stream,
                    prev.version
                );
                // An interrupted derive may have left the ref elsewhere.
                let r = ostree_ref(&p.stream);
                let at = wd.ostree_repo()?.resolve_rev(&r, true)?;
                if at.as_deref() != Some(prev.ostree_commit.as_str()) {
                    wd.set_ref(&r, &prev.ostree_commit)?;
                }
                p.result(
                    &wd,
                    &base,
                    false,
                    &prev.version,
                    &prev.ostree_commit,
                    prev.image_digest.as_deref().unwrap_or_default(),
                    prev.image_tag.as_deref().unwrap_or_default(),
                )
            }
            (None, Some(built)) => finish(&wd, &base, p, built, &lower)
                .with_context(|| format!("deriving {}", p.manifest_path.display()))?,
            (None, None) => unreachable!("every changed release was built"),
        };
        results.push(result);
    }
    Ok(results)
}

impl Plan {
    /// The previous build when its inputs are the same and its image and
    /// commit are still there.
    fn unchanged(&self, wd: &Workdir) -> Option<BuildEntry> {
        let prev = self
            .previous
            .as_ref()
            .filter(|p| p.inputhash == self.inputhash)?;
        let tag = prev.image_tag.as_deref()?;
        let found = strata_oscontainer::check_present(&ImageRef::oci(&wd.oci(), tag)).ok()?;
        if prev.image_digest.as_deref() != Some(found.as_str()) {
            return None;
        }
        let repo = wd.ostree_repo().ok()?;
        let (_, state) = repo.load_commit(&prev.ostree_commit).ok()?;
        if state.contains(ostree::RepoCommitState::PARTIAL) {
            return None;
        }
        Some(prev.clone())
    }

    #[allow(clippy::too_many_arguments)]
    fn result(
        &self,
        wd: &Workdir,
        base: &Base,
        changed: bool,
        version: &str,
        commit: &str,
        digest: &str,
        tag: &str,
    ) -> DeriveResult {
        DeriveResult {
            changed,
            release: self.manifest.release.to_string(),
            stream: self.stream.clone(),
            version: version.to_string(),
            image: ImageRef::oci(&wd.oci(), tag).to_string(),
            digest: digest.to_string(),
            ostree_commit: commit.to_string(),
            ostree_ref: ostree_ref(&self.stream),
            inputhash: self.inputhash.clone(),
            base_image: base.image.clone(),
            base_digest: base.digest.clone(),
            base_commit: base.commit.clone(),
            packages: self.packages.iter().map(|p| p.nevra.clone()).collect(),
            overrides: self.overrides.clone(),
            build_dir: wd.build_dir(&self.stream, version),
        }
    }
}

fn ostree_ref(stream: &str) -> String {
    format!("strata/derived/{stream}")
}

/// Resolves one release against the base and checks it.
fn plan(
    wd: &Workdir,
    base: &Base,
    probe_root: &Path,
    os: &BaseOs,
    path: &Path,
    opts: &DeriveOptions,
    overrides: &[OverrideRpm],
) -> Result<Plan> {
    let loaded = ReleaseManifest::load(path, &opts.vars)?;
    let manifest = loaded.manifest.clone();
    let stream = format!("{}-{}", os.kind.stream_prefix(), manifest.release);
    let (allowed, disallowed) = files::partition_repos(&manifest.repos, &manifest.inputs);
    if allowed.is_empty() {
        bail!("no repo of {} is allowed by inputs.repos", path.display());
    }
    let policy = files::load_policy(&manifest.inputs, &allowed)?;
    files::check_local_repos(&allowed)?;
    let repos: Vec<RepoConfig> = allowed.iter().map(|r| files::repo_config(r)).collect();

    let mut dnf_opts = DnfOptions::new(probe_root, wd.cache().join("dnf"), &os.releasever);
    dnf_opts.dbpath = RPMDB.to_string();
    dnf_opts.ignore_scripts = manifest.ignore_scripts.clone();
    let specs: Vec<String> = manifest
        .packages
        .iter()
        .flat_map(|p| p.split_whitespace().map(str::to_string))
        .collect();
    let mut request = DepsolveRequest::install(specs.clone());
    request.excludes = manifest.exclude_packages.clone();

    // Which overrides this release takes: those naming a package it
    // installs without them.
    let mut dnf = Dnf::new(dnf_opts.clone(), repos.clone())?;
    let plain = match dnf.depsolve(&request) {
        Ok(r) => r.packages().to_vec(),
        Err(e) => return Err(explain(e, &disallowed, &manifest)),
    };
    drop(dnf);
    let taken: Vec<OverrideRpm> = overrides
        .iter()
        .filter(|o| plain.iter().any(|p| p.name == o.name))
        .cloned()
        .collect();
    if !taken.is_empty() {
        let names: BTreeSet<&str> = taken.iter().map(|o| o.name.as_str()).collect();
        request.packages = specs
            .into_iter()
            .filter(|s| !names.contains(s.as_str()))
            .collect();
        request.excludes.extend(names.iter().map(|n| n.to_string()));
        request.local_rpms = taken.iter().map(|o| o.path.clone()).collect();
        // Naming an RPM on the command line is the trust decision.
        request.local_gpgcheck = false;
    }

    let packages;
    let removed;
    {
        let mut dnf = Dnf::new(dnf_opts.clone(), repos.clone())?;
        let mut resolved = dnf
            .depsolve(&request)
            .map_err(|e| explain(e, &disallowed, &manifest))?;
        resolved.download().context("downloading packages")?;
        let mut p = resolved.packages().to_vec();
        p.sort_by(|a, b| a.name.cmp(&b.name));
        removed = resolved.removed().to_vec();
        packages = p;
    }
    let base_upgrades = check_base_locked(&manifest, &packages, &removed)?;
    let from_repos: Vec<policy::Candidate> = packages
        .iter()
        .filter(|p| p.repo_id != "@commandline")
        .map(|p| policy::Candidate {
            nevra: p.nevra.clone(),
            repo: p.repo_id.clone(),
            path: p.local_path.clone().unwrap_or_default(),
        })
        .collect();
    policy.check(&from_repos).map_err(anyhow::Error::new)?;

    let inputhash = input_hash(base, &loaded, &policy, &packages, &taken)?;
    let sde = opts.source_date_epoch.unwrap_or_else(|| {
        packages
            .iter()
            .map(|p| p.build_time)
            .chain(taken.iter().map(|o| o.build_time))
            .chain([base.timestamp])
            .max()
            .unwrap_or(0)
    });
    let previous = wd.latest(&stream)?;
    let history: BTreeSet<String> = wd
        .history()?
        .into_iter()
        .filter(|e| e.stream == stream)
        .map(|e| e.version)
        .collect();
    let version = (0u32..)
        .map(|serial| {
            manifest.version_template.render(&VersionParts {
                ocp: manifest.release,
                rhel_major: base.rhel.0,
                rhel_minor: base.rhel.1,
                base_date: UtcDateTime::from_unix_seconds(base.timestamp as i64),
                serial,
            })
        })
        .find(|v| !history.contains(v))
        .expect("a free serial");

    let mut install_opts = dnf_opts;
    install_opts.install_root = PathBuf::new();
    let install = strata_dnf::job::InstallJob::new(install_opts, repos, request);
    let files: Vec<(&Path, &str)> = loaded
        .files
        .iter()
        .map(|f| (f.path.as_path(), f.sha256.as_str()))
        .collect();
    Ok(Plan {
        source: Source::describe(path, &files),
        manifest_path: path.to_path_buf(),
        manifest,
        stream,
        os: os.clone(),
        inputhash,
        packages,
        base_upgrades,
        overrides: taken,
        install,
        sde,
        version,
        previous,
        initramfs_generator: base.initramfs.clone(),
    })
}

/// A resolve error, with the repo that has a missing package when a
/// disallowed one does.
fn explain(
    e: strata_dnf::Error,
    disallowed: &[&strata_manifest::Repo],
    m: &ReleaseManifest,
) -> anyhow::Error {
    match e {
        strata_dnf::Error::PackageNotFound { name, repos } => {
            let hint = if disallowed.is_empty() {
                String::new()
            } else {
                format!(
                    "; repos {} are listed but not allowed by inputs.repos",
                    disallowed
                        .iter()
                        .map(|r| r.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            anyhow::anyhow!(
                "release {}: package {name} is not available from the allowed repos [{}]{hint}",
                m.release,
                repos.join(", ")
            )
        }
        other => anyhow::Error::new(other)
            .context(format!("resolving the packages of release {}", m.release)),
    }
}

/// Base packages are locked: an update of one fails naming the release
/// packages that need it, unless `allow-base-upgrade` names it. Returns
/// the allowed updates.
fn check_base_locked(
    m: &ReleaseManifest,
    packages: &[Package],
    removed: &[String],
) -> Result<Vec<String>> {
    let mut allowed = Vec::new();
    let mut refused = Vec::new();
    // What the manifest itself asked for is the cause when it names a base
    // package: blaming the packages that happen to need it misleads.
    let requested: BTreeSet<&str> = m
        .packages
        .iter()
        .flat_map(|p| p.split_whitespace())
        .collect();
    for old in removed {
        let replacement = packages.iter().find(|p| nevra_name(old) == p.name);
        let name = replacement
            .map(|p| p.name.clone())
            .unwrap_or_else(|| nevra_name(old).to_string());
        if m.allow_base_upgrade.contains(&name) {
            allowed.push(format!(
                "{old} -> {}",
                replacement.map(|p| p.nevra.as_str()).unwrap_or("(removed)")
            ));
            continue;
        }
        let needed_by = replacement
            .map(|r| requirers(packages, r))
            .unwrap_or_default();
        refused.push(match (replacement, needed_by.is_empty()) {
            (Some(r), _) if requested.contains(r.name.as_str()) => format!(
                "packages asks for {}, which would update base package {old} to {}",
                r.name, r.nevra
            ),
            (Some(r), false) => format!(
                "{} needs {} but the base has {old}",
                needed_by.join(", "),
                r.nevra
            ),
            (Some(r), true) => {
                format!("the release would update base package {old} to {}", r.nevra)
            }
            (None, _) => format!("the release would remove base package {old}"),
        });
    }
    if !refused.is_empty() {
        bail!(
            "release {}: base packages are locked: {} (list a package under allow-base-upgrade to let this release update it)",
            m.release,
            refused.join("; ")
        );
    }
    Ok(allowed)
}

/// The packages among `packages` whose requirements `target` satisfies
/// (by name or a provide), with the requirement: `crun-1.8 (libseccomp >= 2.5.3)`.
fn requirers(packages: &[Package], target: &Package) -> Vec<String> {
    let provides: BTreeSet<String> = target
        .local_path
        .as_ref()
        .and_then(|p| rpm::PackageMetadata::open(p).ok())
        .and_then(|m| m.get_provides().ok())
        .map(|deps| deps.into_iter().map(|d| d.name).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for p in packages.iter().filter(|p| p.name != target.name) {
        let Some(meta) = p
            .local_path
            .as_ref()
            .and_then(|l| rpm::PackageMetadata::open(l).ok())
        else {
            continue;
        };
        for d in meta.get_requires().unwrap_or_default() {
            if d.name == target.name || provides.contains(&d.name) {
                out.push(format!("{} ({})", p.nevra, dependency_text(&d)));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn dependency_text(d: &rpm::Dependency) -> String {
    use rpm::DependencyFlags as F;
    if d.version.is_empty() {
        return d.name.clone();
    }
    let less = d.flags.contains(F::LESS);
    let greater = d.flags.contains(F::GREATER);
    let equal = d.flags.contains(F::EQUAL);
    let op = match (less, greater, equal) {
        (true, _, true) => "<=",
        (true, _, false) => "<",
        (_, true, true) => ">=",
        (_, true, false) => ">",
        _ => "=",
    };
    format!("{} {op} {}", d.name, d.version)
}

/// sha256 over the base image and commit, the flattened manifest and its
/// files, the policy keys, every package's checksum and every override.
fn input_hash(
    base: &Base,
    loaded: &strata_manifest::Loaded<ReleaseManifest>,
    policy: &policy::Policy,
    packages: &[Package],
    overrides: &[OverrideRpm],
) -> Result<String> {
    let mut h = Sha256::new();
    h.update(DERIVE_FORMAT.as_bytes());
    h.update(base.digest.as_bytes());
    h.update(base.commit.as_bytes());
    strata_rootfs::inputs::hash_common(
        &mut h,
        policy,
        &loaded.manifest.to_canonical_json(),
        &loaded.files,
        packages,
    )?;
    for o in overrides {
        h.update(o.sha256.as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

/// A release installed over the base: its overlay's upper dir, and the
/// scriptlet failures `ignore-scripts` let through.
struct Built {
    upper: PathBuf,
    ignored_scriptlet_failures: Vec<String>,
    initramfs: worker::InitramfsRecord,
}

/// Installs the release into an overlay of the base in a worker.
/// `base_rpmdb_sqlite` is the base's rpm database in sqlite, for the install.
fn build_tree(
    opts: &DeriveOptions,
    p: &Plan,
    lower: &Path,
    base_rpmdb_sqlite: &Path,
    staging: &Path,
) -> Result<Built> {
    let upper = staging.join("upper");
    let work = staging.join("work");
    let merged = staging.join("merged");
    for d in [&upper, &work, &merged] {
        fs::create_dir_all(d)?;
    }
    let mut install = p.install.clone();
    install.options.install_root = merged.clone();
    let release = p.manifest.release.to_string();
    let version = p.version.clone();
    let job = worker::Job {
        lower: lower.to_path_buf(),
        upper: upper.clone(),
        work,
        merged,
        install,
        expected: p.packages.iter().map(|p| p.nevra.clone()).collect(),
        add_files: p
            .manifest
            .add_files
            .iter()
            .map(|f| worker::FileToAdd {
                src: f.src.clone(),
                dest: f.dest.clone(),
                mode: f.mode,
            })
            .collect(),
        remove_files: p.manifest.remove_files.clone(),
        postprocess: p.manifest.postprocess.clone(),
        units: p.manifest.units.clone(),
        os_release: os_release_values(&p.manifest, &version, &release, &p.os),
        source_date_epoch: p.sde,
        base_rpmdb_sqlite: base_rpmdb_sqlite.to_path_buf(),
        initramfs_generator: p.initramfs_generator.clone(),
        regenerate_initramfs: p.manifest.regenerate_initramfs,
    };
    tracing::info!(
        "{}: installing {} packages over the base",
        p.stream,
        p.packages.len()
    );
    let started = std::time::Instant::now();
    let done = worker::run(&opts.worker, &job, staging)?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: installed", p.stream);
    // The worker's own warnings are not shown: say it here.
    for f in &done.ignored_scriptlet_failures {
        tracing::warn!("{}: ignored (ignore-scripts): {f}", p.stream);
    }
    Ok(Built {
        upper,
        ignored_scriptlet_failures: done.ignored_scriptlet_failures,
        initramfs: done.initramfs,
    })
}

fn os_release_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix('=')?;
        Some(v.trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

/// What a derived image is, by its base: RHCOS on a RHEL base, OKD's SCOS
/// on a CentOS Stream one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CoreOs {
    Rhcos,
    Scos,
}

impl CoreOs {
    /// The streams' prefix: OKD's releases are streams of their own, so
    /// that one workdir can hold OpenShift 4.19 and OKD 4.19.
    fn stream_prefix(self) -> &'static str {
        match self {
            CoreOs::Rhcos => "ocp",
            CoreOs::Scos => "okd",
        }
    }

    /// Its os-release `ID`, and the name coreos-assembler's records use.
    fn osname(self) -> &'static str {
        match self {
            CoreOs::Rhcos => "rhcos",
            CoreOs::Scos => "scos",
        }
    }

    /// Its os-release `NAME` and its `io.openshift.build.version-display-names`.
    fn display_name(self) -> &'static str {
        match self {
            CoreOs::Rhcos => "Red Hat Enterprise Linux CoreOS",
            CoreOs::Scos => "CentOS Stream CoreOS",
        }
    }
}

/// The base's os-release, read once: what a release's plan and its derived
/// os-release need.
#[derive(Clone, Debug)]
struct BaseOs {
    /// `$releasever`: the major of `VERSION_ID`.
    releasever: String,
    /// `VERSION_ID`: the RHEL `major.minor` (`9.6`), `9` on CentOS Stream.
    version_id: String,
    kind: CoreOs,
}

impl BaseOs {
    fn of(lower: &Path) -> Result<BaseOs> {
        let path = lower.join("usr/lib/os-release");
        let text = fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the base tree's {} (a base composed by strata always has one: is \
                 this an ostree base image?)",
                path.display()
            )
        })?;
        let version_id = os_release_field(&text, "VERSION_ID")
            .context("the base tree's /usr/lib/os-release has no VERSION_ID")?;
        Ok(BaseOs {
            releasever: version_id
                .split('.')
                .next()
                .unwrap_or(&version_id)
                .to_string(),
            kind: match os_release_field(&text, "ID").as_deref() {
                Some("centos") => CoreOs::Scos,
                _ => CoreOs::Rhcos,
            },
            version_id,
        })
    }
}

/// The os-release of a derived tree (DESIGN.md "Versions").
fn os_release_values(
    m: &ReleaseManifest,
    version: &str,
    release: &str,
    base: &BaseOs,
) -> Vec<(String, String)> {
    // As RHCOS's node image names itself: ID rhcos, the OpenShift release
    // as VERSION_ID, the RHEL minor in RHEL_VERSION (docs/formats.md); on
    // a CentOS Stream base, OKD's SCOS.
    let name = base.kind.display_name();
    let rhel = base.version_id.as_str();
    let id = base.kind.osname();
    let (product, os) = match base.kind {
        CoreOs::Rhcos => ("OpenShift", "RHEL"),
        CoreOs::Scos => ("OKD", "CentOS Stream"),
    };
    vec![
        ("NAME".into(), name.into()),
        ("ID".into(), id.into()),
        ("ID_LIKE".into(), "rhel fedora".into()),
        ("VERSION".into(), version.into()),
        ("VERSION_ID".into(), release.into()),
        ("VARIANT".into(), "CoreOS".into()),
        ("VARIANT_ID".into(), "coreos".into()),
        ("OPENSHIFT_VERSION".into(), release.into()),
        ("RHEL_VERSION".into(), rhel.into()),
        ("OSTREE_VERSION".into(), version.into()),
        (
            "PRETTY_NAME".into(),
            format!("{name} {version} ({product} {}, {os} {rhel})", m.release),
        ),
    ]
}

/// Removes from the upper dir what is not a change: files that overlay
/// copied up but that end as they were in the base (same content, mode and
/// owner — `/etc/passwd` rewritten to its old content), and directories
/// left empty that the base has too (copied up for a device node or `/var`
/// content that was removed again). Opaque directories stay: they hide
/// the base's content.
fn prune_unchanged(upper: &Path, lower: &Path, base: &BaseTree) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    fn same_file(a: &Path, b: &Path, rel: &Path, base: &BaseTree) -> Result<bool> {
        let (ma, mb) = match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
            (Ok(ma), Ok(mb)) => (ma, mb),
            _ => return Ok(false),
        };
        // The checkout's inode may differ from the commit (bare-user adds
        // an owner read bit): compare with the commit's own metadata.
        let Some((uid, gid, mode)) = base.meta(rel) else {
            return Ok(false);
        };
        let same_meta = ma.file_type().is_file()
            && mb.file_type().is_file()
            && ma.len() == mb.len()
            && ma.mode() & 0o7777 == mode & 0o7777
            && (ma.uid(), ma.gid()) == (uid, gid);
        Ok(same_meta && fs::read(a)? == fs::read(b)?)
    }
    fn walk(dir: &Path, upper: &Path, lower: &Path, base: &BaseTree) -> Result<bool> {
        let mut empty = true;
        let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let rel = path.strip_prefix(upper).expect("under upper");
            let in_lower = lower.join(rel);
            let ft = e.file_type()?;
            if ft.is_dir() {
                if walk(&path, upper, lower, base)?
                    && in_lower.is_dir()
                    && !in_lower.is_symlink()
                    && !strata_rootfs::tree::is_opaque(&path)
                {
                    fs::remove_dir(&path)?;
                    continue;
                }
            } else if ft.is_file() && same_file(&path, &in_lower, rel, base)? {
                fs::remove_file(&path)?;
                continue;
            }
            empty = false;
        }
        Ok(empty)
    }
    walk(upper, upper, lower, base)?;
    Ok(())
}

/// uid, gid and mode of `rel` in the base commit (the checkout's inodes
/// carry the repository's owner, and an owner-read bit bare-user adds).
struct BaseTree {
    root: ostree::gio::File,
}

impl BaseTree {
    fn open(repo: &ostree::Repo, commit: &str) -> Result<Self> {
        let (root, _) = repo
            .read_commit(commit, ostree::gio::Cancellable::NONE)
            .with_context(|| format!("reading base commit {commit}"))?;
        Ok(Self { root })
    }

    fn meta(&self, rel: &Path) -> Option<(u32, u32, u32)> {
        use ostree::gio::prelude::FileExt;
        let info = self
            .root
            .resolve_relative_path(rel)
            .query_info(
                "unix::uid,unix::gid,unix::mode",
                ostree::gio::FileQueryInfoFlags::NOFOLLOW_SYMLINKS,
                ostree::gio::Cancellable::NONE,
            )
            .ok()?;
        Some((
            info.attribute_uint32("unix::uid"),
            info.attribute_uint32("unix::gid"),
            info.attribute_uint32("unix::mode"),
        ))
    }
}

/// Turns the upper dir into the derived image and commit, and records the
/// build.
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
    prune_unchanged(upper, lower, &BaseTree::open(&repo, &base.commit)?)?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: unchanged copy-ups pruned", p.stream);
    let tag = format!("{}-{}", p.stream, p.version);
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
    let mut dopts = strata_oscontainer::DeriveOptions::default();
    dopts.labels = labels;
    dopts.source_date_epoch = Some(p.sde);
    // Tag and ref follow the record (below).
    dopts.defer_tag = true;
    // The derived commit is built from the layer's tar stream while the
    // layer is written (what importing the image would give; the ostree-ext
    // client's merge commit is checked against it in the tests).
    let (mut derived, pending) = strata_oscontainer::append_layer_committing(
        &wd.oci(),
        &base.tag,
        &tag,
        &layer,
        &dopts,
        &wd.repo(),
        None,
    )
    .context("writing the derived image")?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: derived image written", p.stream);
    // The installed tree is in the layer now. Removed before the commit's
    // sync, its pages need never reach the disk.
    if let Err(e) = std::fs::remove_dir_all(upper) {
        tracing::debug!("removing {}: {e}", upper.display());
    }
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
    let commit: String = commit.context("writing the derived commit")?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: derived commit written", p.stream);
    tracing::info!(
        "{}: image {} ({}), commit {}",
        p.stream,
        derived.image,
        derived.manifest_digest,
        commit
    );
    let packages: Vec<String> = p.packages.iter().map(|x| x.nevra.clone()).collect();
    let meta = BuildMeta {
        package_diff: wd.package_diff(p.previous.as_ref(), &packages),
        stream: p.stream.clone(),
        version: p.version.clone(),
        name: p.os.kind.osname().to_string(),
        summary: format!("{} {}", p.os.kind.display_name(), p.manifest.release),
        inputhash: p.inputhash.clone(),
        ostree_commit: commit.clone(),
        ostree_ref: Some(ostree_ref(&p.stream)),
        source_date_epoch: p.sde,
        image_digest: Some(derived.manifest_digest.clone()),
        image_tag: Some(tag.clone()),
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
        ostree_commit: commit.clone(),
        image_digest: Some(derived.manifest_digest.clone()),
        image_tag: Some(tag.clone()),
    };
    wd.record(&entry, Some(&meta), &[])?;
    // Last: the tag and the ref follow the record. Killed before them, the
    // next derive finds the record's image missing and builds again.
    if let Some(t) = derived.pending_tag.take() {
        t.apply().context("tagging the derived image")?;
    }
    wd.set_ref(&ostree_ref(&p.stream), &commit)?;
    Ok(p.result(
        wd,
        base,
        true,
        &p.version,
        &commit,
        &derived.manifest_digest,
        &tag,
    ))
}

/// Copies a directory tree of plain files (an rpmdb).
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
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
