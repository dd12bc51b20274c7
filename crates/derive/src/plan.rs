//! Planning: a release manifest resolved against the base into a [`Plan`].
//! The release's packages are depsolved with the base's rpmdb as the
//! installed set (in this process: libdnf is process-global), the
//! `--override-rpm`s it takes are swapped in, the base lock
//! ([`crate::base_lock`]) and the input policy are enforced, and the
//! inputs hashed; the version is the template's with the first free
//! serial of the stream.
//!
//! It downloads packages into the dnf cache and reads the records; it must
//! not write the tree, the image store, the repository or the records: a
//! release whose inputs are unchanged is done once it is planned.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use strata_dnf::{DepsolveRequest, Dnf, DnfOptions, Package, RepoConfig};
use strata_manifest::{ReleaseManifest, UtcDateTime, VersionParts};
use strata_rootfs::{files, policy};
use strata_workdir::record::Source;
use strata_workdir::{BuildEntry, EntryKind, Workdir};

use crate::base::Base;
use crate::base_lock::check_base_locked;
use crate::os::BaseOs;
use crate::{DeriveOptions, OverrideRpm, RPMDB};

/// Bumped when the derived tree would differ for the same inputs.
const DERIVE_FORMAT: &str = "strata-derive-3";

/// One release, resolved and checked, ready to build (or already built).
pub(crate) struct Plan {
    pub(crate) manifest_path: PathBuf,
    /// The configuration it came from, for the record.
    pub(crate) source: Source,
    pub(crate) manifest: ReleaseManifest,
    pub(crate) stream: String,
    /// The base's os-release.
    pub(crate) os: BaseOs,
    pub(crate) inputhash: String,
    pub(crate) packages: Vec<Package>,
    pub(crate) base_upgrades: Vec<String>,
    pub(crate) overrides: Vec<OverrideRpm>,
    pub(crate) install: strata_dnf::job::InstallJob,
    pub(crate) sde: u64,
    /// The initramfs's `SOURCE_DATE_EPOCH`: the base's date (or the
    /// build's epoch when that is older), so that the build times of the
    /// layer's packages (a CI kubelet's, say) do not make a new one.
    pub(crate) initramfs_epoch: u64,
    pub(crate) version: String,
    pub(crate) previous: Option<BuildEntry>,
    /// How the base's initramfs was made.
    pub(crate) initramfs_generator: Option<strata_rootfs::initramfs::Generator>,
}

/// Resolves one release against the base and checks it.
pub(crate) fn plan(
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
        // The same set in the same order, whatever order the solver gave
        // it in (the input hash reads it in this order).
        p.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.nevra.cmp(&b.nevra)));
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
    let version = free_version(wd, &stream, &manifest, base)?;

    let mut install_opts = dnf_opts;
    install_opts.install_root = PathBuf::new();
    // The policy read every package from a repo whole; an override is a
    // local file it does not read, which librpm checks.
    install_opts.payloads_verified = taken.is_empty();
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
        initramfs_epoch: sde.min(base.timestamp),
        version,
        previous,
        initramfs_generator: base.initramfs.clone(),
    })
}

/// The manifest's version template with the first serial the stream has
/// not used yet (a pruned build's included: its version is never given
/// again).
fn free_version(
    wd: &Workdir,
    stream: &str,
    manifest: &ReleaseManifest,
    base: &Base,
) -> Result<String> {
    let used = wd.versions_used(EntryKind::Build, stream)?;
    Ok((0u32..)
        .map(|serial| {
            manifest.version_template.render(&VersionParts {
                ocp: manifest.release,
                rhel_major: base.rhel.0,
                rhel_minor: base.rhel.1,
                base_date: UtcDateTime::from_unix_seconds(base.timestamp as i64),
                serial,
            })
        })
        .find(|v| !used.contains(v))
        .expect("a free serial"))
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
    let mut policy = policy.clone();
    policy
        .keys
        .sort_by(|a, b| a.fingerprint.cmp(&b.fingerprint));
    strata_rootfs::inputs::hash_common(
        &mut h,
        &policy,
        &loaded.manifest.to_input_json(),
        &loaded.files,
        packages,
    )?;
    // The `--override-rpm`s are a set of files, each replacing its package.
    let overrides: BTreeSet<&str> = overrides.iter().map(|o| o.sha256.as_str()).collect();
    for sha256 in overrides {
        h.update(sha256.as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}
