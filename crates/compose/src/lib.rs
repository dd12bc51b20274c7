//! Composes a base OS image from a base manifest: RHEL-only packages ->
//! root filesystem -> ostree commit -> base image.
//!
//! The flow of [`compose`]: load the manifest, resolve its packages against
//! the repos the policy allows (others are invisible to the solver), enforce
//! the policy on every resolved package, hash the inputs and stop if the
//! previous build had the same hash, otherwise install into a staging root
//! inside the workdir, generate the initramfs, apply postprocessing and the
//! ostree conventions, commit, and record the build. Nothing in the workdir
//! changes until the commit is written and the build recorded.
//!
//! Modules:
//! - `commit`: writing the ostree commit with its metadata.
//! - `lockfile`: the exact package set, written and consumed.
//!
//! The input policy, accounts, sandbox and ostree conventions come from
//! `strata-rootfs`, shared with derive.

mod chunks;
mod commit;
mod lockfile;

use strata_rootfs::{bootupd, files, initramfs, passwd, policy, sandbox, tree};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};
use strata_dnf::{DepsolveRequest, Dnf, DnfOptions, Package, RepoConfig};
use strata_manifest::{BaseManifest, RpmdbBackend, UtcDateTime, Vars};
use strata_workdir::record::{Source, TreeMeta};
use strata_workdir::{BuildEntry, EntryKind, Workdir};

pub use chunks::{content_map, ChangeHistory, KERNEL_IMAGE};
pub use lockfile::{LockedPackage, Lockfile, FILE_NAME as LOCKFILE_NAME};
pub use passwd::Accounts;
pub use policy::{OnlyInDisallowedRepo, PolicyError, Rule, Violation};

/// Bumped when the composed tree would differ for the same inputs.
const COMPOSE_FORMAT: &str = "strata-compose-2";

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
    /// with a lockfile, they replace or add locked packages; without one,
    /// they pin the version of each package the manifest installs.
    pub overrides: Vec<PathBuf>,
    /// Times in the output; default: the newest build time of the packages.
    pub source_date_epoch: Option<u64>,
}

impl ComposeOptions {
    pub fn new(manifest: impl Into<PathBuf>, workdir: impl Into<PathBuf>) -> Self {
        Self {
            manifest: manifest.into(),
            workdir: workdir.into(),
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
    /// False when the inputs matched the previous build and nothing was done.
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

/// Composes the base manifest into the workdir.
pub fn compose(opts: &ComposeOptions) -> Result<ComposeResult> {
    let wd = Workdir::open(&opts.workdir)?;
    let _lock = wd.lock()?;
    strata_oscontainer::prune_abandoned(&wd.oci())?;
    let loaded = BaseManifest::load(&opts.manifest, &opts.vars)?;
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
    let repo_configs: Vec<RepoConfig> = allowed.iter().map(|r| files::repo_config(r)).collect();

    let mut locked = opts.lockfile.as_deref().map(Lockfile::load).transpose()?;
    let mut overrides = Lockfile {
        packages: BTreeMap::new(),
        metadata: None,
    };
    for path in &opts.overrides {
        overrides.overridden_by(&Lockfile::load(path)?);
    }
    if let Some(l) = &mut locked {
        l.overridden_by(&overrides);
    }
    let mut request = DepsolveRequest::install(match &locked {
        Some(l) => l.specs(),
        None => manifest
            .packages
            .iter()
            .flat_map(|p| p.split_whitespace().map(str::to_string))
            .collect(),
    });
    request.excludes = manifest.exclude_packages.clone();

    // Resolve once to learn the package set: enough to detect a no-op and
    // to fix the build's SOURCE_DATE_EPOCH, which librpm reads when a
    // context is created (so the installing context comes after).
    let generator = format!("/usr/bin/{}", manifest.initramfs.generator);
    let probe = |request: &DepsolveRequest| -> Result<_> {
        let mut dnf = Dnf::new(dnf_opts.clone(), repo_configs.clone())?;
        let packages = dnf.depsolve(request).map(|r| {
            (
                sorted(r.packages()),
                !r.providers_of_file(&generator).is_empty(),
            )
        });
        Ok(packages)
    };
    let mut resolved = probe(&request)?;
    // Without a lockfile, overrides pin the versions of packages the
    // manifest installs (as rpm-ostree's lockfiles constrain a depsolve
    // without adding to it): resolved again with each pinned.
    if locked.is_none() && !overrides.packages.is_empty() {
        if let Ok((set, _)) = &resolved {
            let mut pinned = 0;
            for (name, p) in &overrides.packages {
                if set.iter().any(|s| &s.name == name) {
                    // In place of the manifest's own name for it, if any.
                    request.packages.retain(|spec| spec != name);
                    request.packages.push(Lockfile::spec(name, p));
                    pinned += 1;
                } else {
                    tracing::info!("override {name}: not in the package set, ignored");
                }
            }
            if pinned > 0 {
                resolved = probe(&request)?;
            }
        }
    }
    let probe = resolved;
    let packages = match probe {
        // The initramfs is made after everything is installed: a set that
        // cannot make it fails now, before the install.
        Ok((_, false)) => bail!(
            "{}: initramfs.generator {} is in none of the packages to install: add the package that ships {generator} (dracut) to packages",
            opts.manifest.display(),
            manifest.initramfs.generator
        ),
        Ok((p, true)) => p,
        Err(strata_dnf::Error::PackageNotFound { name, repos }) => {
            return Err(explain_missing(
                &name,
                &repos,
                &disallowed,
                &allowed,
                manifest,
                &wd,
                locked.is_some(),
            ));
        }
        Err(e) => return Err(e).context("resolving the manifest's packages"),
    };
    if let Some(l) = &locked {
        check_against_lockfile(l, &packages)?;
    }
    let pinned: BTreeMap<String, String> = overrides
        .packages
        .keys()
        .filter_map(|name| {
            let p = packages.iter().find(|p| &p.name == name)?;
            Some((name.clone(), p.nevra.clone()))
        })
        .collect();

    let inputhash = input_hash(&loaded, &policy, &packages)?;
    let previous = wd.latest(&stream)?;
    if let Some(prev) = previous.as_ref().filter(|p| p.inputhash == inputhash) {
        // Nothing to do only if what the record names is all still here:
        // the whole commit and the image under its tag.
        let repo = commit::open_repo(&wd.repo())?;
        if commit::has_whole_commit(&repo, &prev.ostree_commit) && image_intact(&wd, prev) {
            tracing::info!("inputs unchanged since {}: nothing to do", prev.version);
            // An interrupted compose may have left the ref elsewhere.
            if repo.resolve_rev(&ostree_ref, true)?.as_deref() != Some(prev.ostree_commit.as_str())
            {
                commit::set_ref(&repo, &ostree_ref, &prev.ostree_commit)?;
            }
            let build_dir = wd.build_dir(&stream, &prev.version);
            return Ok(ComposeResult {
                changed: false,
                stream,
                version: prev.version.clone(),
                ostree_commit: prev.ostree_commit.clone(),
                inputhash,
                ostree_ref,
                image: image_ref(&wd, prev.image_tag.as_deref().unwrap_or_default()),
                digest: prev.image_digest.clone().unwrap_or_default(),
                lockfile: build_dir.join(LOCKFILE_NAME),
                build_dir,
                packages: packages.len(),
            });
        }
    }

    let sde = opts
        .source_date_epoch
        .unwrap_or_else(|| packages.iter().map(|p| p.build_time).max().unwrap_or(0));
    // librpm stamps installed headers with the install time unless
    // SOURCE_DATE_EPOCH says otherwise: the rpmdb must not record "now".
    let _sde = EnvVar::set("SOURCE_DATE_EPOCH", &sde.to_string());
    let mut dnf = Dnf::new(dnf_opts, repo_configs)?;
    let mut resolved = dnf
        .depsolve(&request)
        .context("resolving the manifest's packages")?;
    resolved.download().context("downloading packages")?;
    let packages = sorted(resolved.packages());
    policy
        .check(
            &packages
                .iter()
                .map(|p| policy::Candidate {
                    nevra: p.nevra.clone(),
                    repo: p.repo_id.clone(),
                    path: p.local_path.clone().unwrap_or_default(),
                })
                .collect::<Vec<_>>(),
        )
        .map_err(anyhow::Error::new)?;

    let date = UtcDateTime::from_unix_seconds(sde as i64);
    let prefix = manifest.version_prefix.render(&date);
    let version = format!("{prefix}-{}", wd.next_serial(&stream, &prefix)?);
    tracing::info!("composing {stream} {version} ({} packages)", packages.len());

    let previous_accounts = previous
        .as_ref()
        .and_then(|p| read_accounts(&wd, &stream, &p.version));
    prepare_root(&root, previous_accounts.as_ref())?;
    // The install itself warns about each failure ignore-scripts lets through.
    let installed = resolved.install().context("installing packages")?;

    let kernel = tree::find_kernel(&root)?;
    let generator = initramfs::Generator::from_manifest(&manifest.initramfs);
    generator.run(&root, &sandbox::Layout::default(), sde, &kernel.kver)?;

    files::add_and_remove(&root, &manifest.add_files, &manifest.remove_files)?;
    for (i, script) in manifest.postprocess.iter().enumerate() {
        sandbox::run_script(&root, sde, i, script)?;
    }
    files::enable_units(&root, &manifest.units)?;
    let accounts = passwd::split(&root)?;
    files::normalize_os_release(&root)?;
    let mut os_release = files::COREOS_VARIANT.to_vec();
    os_release.push(("OSTREE_VERSION", &version));
    files::set_os_release(&root, &os_release)?;
    let summary = format!(
        "{} CoreOS base",
        files::os_release_value(&root, "PRETTY_NAME").unwrap_or_else(|| stream.clone())
    );
    let bootloader =
        bootupd::generate_update_metadata(&root, &bootupd::rpm_owners(&root, "/var/lib/rpm"))?;
    tree::apply(&root)?;
    // Installed with the host's rpm (sqlite); stored as the target's rpm
    // reads it.
    let rpmdb = match manifest.rpmdb {
        RpmdbBackend::Bdb => strata_rpmdb::Backend::Bdb,
        RpmdbBackend::Sqlite => strata_rpmdb::Backend::Sqlite,
    };
    strata_rpmdb::convert(&root.join("usr/share/rpm"), rpmdb)
        .with_context(|| format!("writing the rpm database as {}", rpmdb.as_str()))?;

    let pkg_entries: Vec<commit::PkgEntry> = packages
        .iter()
        .map(|p| commit::PkgEntry {
            name: p.name.clone(),
            epoch: p.epoch,
            version: p.version.clone(),
            release: p.release.clone(),
            arch: p.arch.clone(),
        })
        .collect();
    let repo = commit::open_repo(&wd.repo())?;
    let checksum = commit::commit(
        &repo,
        &commit::CommitSpec {
            tree: &root,
            version: &version,
            kver: &kernel.kver,
            inputhash: &inputhash,
            packages: &pkg_entries,
            timestamp: sde,
            initramfs: &generator,
        },
    )?;
    tracing::info!("committed {checksum}");

    let tag = format!("{stream}-{version}");
    let prior_map = previous
        .as_ref()
        .and_then(|p| std::fs::read(wd.build_dir(&p.stream, &p.version).join(LAYER_MAP)).ok())
        .and_then(|b| serde_json::from_slice::<strata_oscontainer::LayerMap>(&b).ok());
    let mut enc = strata_oscontainer::EncapsulateOptions::default();
    enc.labels = [
        ("com.coreos.osname".to_string(), manifest.osname.clone()),
        ("strata.inputhash".to_string(), inputhash.clone()),
    ]
    .into();
    enc.source_date_epoch = Some(sde);
    let history = ChangeHistory::load(&opts.workdir, &stream)?;
    enc.content = Some(content_map(
        &root.join("usr/share/rpm"),
        &kernel.kver,
        &history,
    )?);
    enc.prior = prior_map;
    // Tagged only once the build is recorded.
    enc.defer_tag = true;
    let mut image = strata_oscontainer::encapsulate(&wd.repo(), &checksum, &wd.oci(), &tag, &enc)
        .context("encapsulating the commit into the base image")?;
    tracing::info!("base image {} ({})", image.image, image.manifest_digest);

    let lock = lockfile_for(&packages, &allowed, &wd.cache().join("dnf"), sde);
    let nevras: Vec<String> = packages.iter().map(|p| p.nevra.clone()).collect();
    let package_diff = wd.package_diff(previous.as_ref(), &nevras);
    let files: Vec<(&Path, &str)> = loaded
        .files
        .iter()
        .map(|f| (f.path.as_path(), f.sha256.as_str()))
        .collect();
    let meta = BuildMeta {
        stream: stream.clone(),
        version: version.clone(),
        name: manifest.osname.clone(),
        summary,
        inputhash: inputhash.clone(),
        ostree_commit: checksum.clone(),
        ostree_ref: Some(ostree_ref.clone()),
        source_date_epoch: sde,
        image_digest: Some(image.manifest_digest.clone()),
        image_tag: Some(tag.clone()),
        source: Some(Source::describe(&opts.manifest, &files)),
        packages: nevras,
        package_diff,
        ignored_scriptlet_failures: installed.ignored_scriptlet_failures.clone(),
        tree: Some(TreeMeta {
            overrides: pinned,
            kernel: kernel.kver.clone(),
            rpmdb: rpmdb.as_str().to_string(),
            bootloader: [("EFI", bootloader.efi), ("BIOS", bootloader.bios)]
                .into_iter()
                .filter_map(|(k, m)| Some((k.to_string(), m?.version)))
                .collect(),
        }),
        derived: None,
        disks: None,
    };
    let entry = BuildEntry {
        stream: stream.clone(),
        version: version.clone(),
        id: format!("{stream}/{version}"),
        kind: EntryKind::Build,
        inputhash: inputhash.clone(),
        ostree_commit: checksum.clone(),
        image_digest: Some(image.manifest_digest.clone()),
        image_tag: Some(tag.clone()),
    };
    wd.record(
        &entry,
        Some(&meta),
        &[
            (LOCKFILE_NAME, lock.to_json()),
            ("accounts.json", pretty(&accounts)),
            (LAYER_MAP, pretty(&image.layer_map)),
        ],
    )?;
    // Last: the tag and the ref follow the record. Killed before them, the
    // next compose finds the record's image or commit missing and builds
    // again.
    if let Some(t) = image.pending_tag.take() {
        t.apply().context("tagging the base image")?;
    }
    commit::set_ref(&repo, &ostree_ref, &checksum)?;
    let build_dir = wd.build_dir(&stream, &version);
    Ok(ComposeResult {
        changed: true,
        stream,
        version,
        ostree_commit: checksum,
        inputhash,
        ostree_ref,
        image: image_ref(&wd, &tag),
        digest: image.manifest_digest,
        lockfile: build_dir.join(LOCKFILE_NAME),
        build_dir,
        packages: packages.len(),
    })
}

/// An environment variable set for as long as the guard lives, then put
/// back: compose must not leave its SOURCE_DATE_EPOCH to whatever the
/// process does next (a derive in the same process has its own).
struct EnvVar {
    name: &'static str,
    previous: Option<std::ffi::OsString>,
}

impl EnvVar {
    fn set(name: &'static str, value: &str) -> Self {
        let previous = std::env::var_os(name);
        std::env::set_var(name, value);
        Self { name, previous }
    }
}

impl Drop for EnvVar {
    fn drop(&mut self) {
        match &self.previous {
            Some(v) => std::env::set_var(self.name, v),
            None => std::env::remove_var(self.name),
        }
    }
}

/// The previous build's layer assignment, kept so updates move few layers.
const LAYER_MAP: &str = "layer-map.json";

/// Whether the image a build recorded is still under its tag with every
/// blob present at its size (cheap: no hashing).
fn image_intact(wd: &Workdir, prev: &BuildEntry) -> bool {
    let (Some(tag), Some(digest)) = (&prev.image_tag, &prev.image_digest) else {
        return false;
    };
    match strata_oscontainer::check_present(&strata_oscontainer::ImageRef::oci(&wd.oci(), tag)) {
        Ok(found) => &found == digest,
        Err(e) => {
            tracing::info!("rebuilding: the recorded image is not whole: {e}");
            false
        }
    }
}

fn image_ref(wd: &Workdir, tag: &str) -> String {
    format!("oci:{}:{tag}", wd.oci().display())
}

fn pretty<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).expect("serializes");
    out.push(b'\n');
    out
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

fn check_against_lockfile(lock: &Lockfile, packages: &[Package]) -> Result<()> {
    let extra: Vec<&str> = packages
        .iter()
        .filter(|p| !lock.packages.contains_key(&p.name))
        .map(|p| p.nevra.as_str())
        .collect();
    if !extra.is_empty() {
        bail!(
            "the locked packages need packages the lockfile does not list: {}",
            extra.join(", ")
        );
    }
    // A lock pins bytes, not names: what the repos offer now under a locked
    // NEVRA must be the same file, from the same repo.
    let mut differ = Vec::new();
    for p in packages {
        let Some(locked) = lock.packages.get(&p.name) else {
            continue;
        };
        let found = p
            .checksum
            .as_ref()
            .map(|c| format!("{}:{}", c.kind, c.hex))
            .unwrap_or_default();
        if let Some(digest) = locked.digest.as_deref().filter(|d| *d != found) {
            differ.push(format!(
                "{} from repo {} is {found}, the lockfile says {digest}",
                p.nevra, p.repo_id
            ));
        }
        if let Some(repo) = locked.repo().filter(|r| *r != p.repo_id) {
            differ.push(format!(
                "{} comes from repo {}, the lockfile says repo {repo}",
                p.nevra, p.repo_id
            ));
        }
    }
    if !differ.is_empty() {
        bail!(
            "the repos no longer offer what the lockfile locks: {}",
            differ.join("; ")
        );
    }
    Ok(())
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
        policy,
        &loaded.manifest.to_canonical_json(),
        &loaded.files,
        packages,
    )?;
    Ok(hex::encode(h.finalize()))
}

fn sorted(packages: &[Package]) -> Vec<Package> {
    let mut p = packages.to_vec();
    p.sort_by(|a, b| a.name.cmp(&b.name));
    p
}

/// The lockfile of a resolved set, as rpm-ostree writes one: dated by the
/// build's SOURCE_DATE_EPOCH (rpm-ostree uses the day it ran; a date from
/// the inputs keeps the file reproducible), each repo by its metadata
/// timestamp.
fn lockfile_for(
    packages: &[Package],
    repos: &[&strata_manifest::Repo],
    dnf_cache: &Path,
    sde: u64,
) -> Lockfile {
    let rpmmd_repos = repos
        .iter()
        .filter_map(|r| {
            let baseurl = r.baseurl.first()?;
            let repomd = lockfile::repomd_path(baseurl, &r.id, dnf_cache)?;
            let generated = lockfile::repomd_generated(&repomd)?;
            Some((
                r.id.clone(),
                lockfile::RepoTimestamp {
                    generated: lockfile::rfc3339(generated),
                },
            ))
        })
        .collect();
    Lockfile {
        packages: packages
            .iter()
            .map(|p| {
                let mut metadata = BTreeMap::new();
                if let Some(name) = p.source_rpm.as_deref().and_then(lockfile::source_name) {
                    metadata.insert("sourcerpm".to_string(), name.into());
                }
                metadata.insert("repo".to_string(), p.repo_id.clone().into());
                (
                    p.name.clone(),
                    LockedPackage {
                        evra: Some(format!("{}.{}", p.evr(), p.arch)),
                        evr: None,
                        digest: p.checksum.as_ref().map(|c| format!("{}:{}", c.kind, c.hex)),
                        metadata: Some(metadata),
                    },
                )
            })
            .collect(),
        metadata: Some(lockfile::LockMetadata {
            generated: Some(lockfile::rfc3339(sde as i64)),
            rpmmd_repos: Some(rpmmd_repos),
        }),
    }
}

fn read_accounts(wd: &Workdir, stream: &str, version: &str) -> Option<Accounts> {
    let text = std::fs::read(wd.build_dir(stream, version).join("accounts.json")).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Device nodes scriptlets write to, and the previous build's accounts.
fn prepare_root(root: &Path, previous: Option<&Accounts>) -> Result<()> {
    files::make_device_nodes(root)?;
    if let Some(acc) = previous {
        passwd::seed(root, acc)?;
    }
    Ok(())
}
