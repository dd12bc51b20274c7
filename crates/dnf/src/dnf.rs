//! A libdnf context with private directories, and the depsolve → download →
//! install pipeline on top of it.
//!
//! Why it exists: it encodes the rules for using libdnf safely on this
//! platform — one context per process at a time (a static mutex held for the
//! context's life), private reposdir/cache/solv/lock directories so that
//! nothing of the host's dnf configuration leaks in, release_ver and
//! `%_dbpath` always set, and signature checks against exactly the keys each
//! repository names.
//!
//! What it must not do: call libdnf directly (that is `ffi`'s job), parse
//! manifests, or print anything. It reports through return values and
//! `tracing`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use strata_libdnf_sys as sys;
use strata_process::in_root::Root;
use strata_workdir::record::nevra_name;

use crate::error::{parse_problems, Error, Result};
use crate::ffi::{self, GoalList, Keyring};
use crate::options::{render_repo_file, validate_repos, DepsolveRequest, DnfOptions, RepoConfig};
use crate::package::Package;
use crate::transaction_output::{
    explain_full, parse_scriptlet_failure, scriptlet_failed, OutputCapture,
};

/// libdnf and librpm keep process-global state (rpm macros, the main config,
/// the rpmdb lock, the log callback), so only one [`Dnf`] may exist in a
/// process at a time. Every `Dnf` holds this lock for its whole life.
static LIBDNF: Mutex<()> = Mutex::new(());

/// The repository id libdnf gives packages added from local files.
pub const CMDLINE_REPO: &str = "@commandline";

/// A libdnf context bound to one install root and a set of repositories.
///
/// Creating one blocks while another `Dnf` is alive in this process; see the
/// crate documentation for running installs in parallel (separate
/// processes). Not `Send`: libdnf objects stay on the thread that made them.
pub struct Dnf {
    // Field order is drop order: the context goes first, then its private
    // directories, then the process lock.
    ctx: ffi::Context,
    options: DnfOptions,
    repos: Vec<RepoConfig>,
    private: tempfile::TempDir,
    _lock: MutexGuard<'static, ()>,
}

impl std::fmt::Debug for Dnf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dnf")
            .field("install_root", &self.options.install_root)
            .field(
                "repos",
                &self.repos.iter().map(|r| &r.id).collect::<Vec<_>>(),
            )
            .field("private", &self.private.path())
            .finish()
    }
}

/// Where `Dnf` keeps things under `DnfOptions::cache_dir`.
#[derive(Debug, Clone)]
struct Layout {
    /// libdnf's cache dir: remote metadata and downloaded packages
    /// (`<repo>-<releasever>-<basearch>/packages/`).
    metadata: PathBuf,
    /// libsolv caches of repository metadata.
    solv: PathBuf,
    /// Parent of each context's private reposdir and lock dir.
    run: PathBuf,
    /// The package files librpm opens when some are substituted, during
    /// a commit (see `substitutes`).
    substitutes: PathBuf,
}

impl Layout {
    fn new(cache_dir: &Path) -> Layout {
        let base = cache_dir.join("dnf");
        Layout {
            metadata: base.join("metadata"),
            solv: base.join("solv"),
            run: base.join("run"),
            substitutes: base.join("substitutes"),
        }
    }
}

impl Dnf {
    /// Sets up a context for `options` with exactly `repos` (no host
    /// configuration is read). Blocks while another `Dnf` exists in this
    /// process.
    pub fn new(options: DnfOptions, repos: Vec<RepoConfig>) -> Result<Dnf> {
        options.validate()?;
        validate_repos(&repos, options.gpgcheck)?;
        for r in repos.iter().filter(|r| options.gpgcheck && r.gpgcheck) {
            for k in r.gpgkey_paths() {
                if !k.is_file() {
                    return Err(Error::InvalidOptions(format!(
                        "repository {:?}: gpgkey {} does not exist",
                        r.id,
                        k.display()
                    )));
                }
            }
        }

        let lock = match LIBDNF.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) => {
                tracing::debug!("waiting for the process-wide libdnf lock");
                LIBDNF.lock().unwrap_or_else(|e| e.into_inner())
            }
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        };

        let layout = Layout::new(&options.cache_dir);
        for d in [
            &layout.metadata,
            &layout.solv,
            &layout.run,
            &options.install_root,
        ] {
            fs::create_dir_all(d).map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
        }
        // A fresh private directory per context: its repos.d holds only our
        // .repo file (the host's /etc/yum.repos.d is never read) and its lock
        // dir keeps libdnf's pid lock files apart from other processes that
        // share the cache dir.
        let private = tempfile::Builder::new()
            .prefix("ctx-")
            .tempdir_in(&layout.run)
            .map_err(|e| {
                Error::io(
                    format!("creating a private dir in {}", layout.run.display()),
                    e,
                )
            })?;
        let repos_dir = private.path().join("repos.d");
        let lock_dir = private.path().join("lock");
        for d in [&repos_dir, &lock_dir] {
            fs::create_dir_all(d).map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
        }
        let repo_file = repos_dir.join("strata.repo");
        fs::write(&repo_file, render_repo_file(&repos))
            .map_err(|e| Error::io(format!("writing {}", repo_file.display()), e))?;

        ffi::install_log_handlers();
        ffi::apply_globals(&ffi::Globals {
            install_weak_deps: options.install_weak_deps,
            best: options.best,
        });
        let macros = options.all_rpm_macros();
        let ctx = ffi::Context::new(&ffi::ContextSettings {
            repos_dir: &repos_dir,
            cache_dir: &layout.metadata,
            solv_dir: &layout.solv,
            lock_dir: &lock_dir,
            install_root: &options.install_root,
            release_ver: &options.release_ver,
            arch: &options.arch,
            rpm_macros: &macros,
            cache_age: options.metadata_refresh.cache_age(),
        })?;
        ctx.setup()?;

        let loaded: BTreeMap<String, bool> = ctx.repos().into_iter().collect();
        for r in &repos {
            if !loaded.contains_key(&r.id) {
                return Err(Error::Libdnf {
                    op: "loading repository definitions".into(),
                    code: None,
                    message: format!(
                        "libdnf did not load repository {:?} from {}",
                        r.id,
                        repo_file.display()
                    ),
                });
            }
        }
        if loaded.len() != repos.len() {
            return Err(Error::Libdnf {
                op: "loading repository definitions".into(),
                code: None,
                message: format!(
                    "libdnf loaded unexpected repositories: {:?}",
                    loaded.keys().collect::<Vec<_>>()
                ),
            });
        }
        tracing::debug!(root = %options.install_root.display(), repos = repos.len(), "libdnf context ready");
        Ok(Dnf {
            ctx,
            options,
            repos,
            private,
            _lock: lock,
        })
    }

    /// The options this context was made with.
    pub fn options(&self) -> &DnfOptions {
        &self.options
    }

    /// Ids of the enabled repositories.
    pub fn enabled_repos(&self) -> Vec<String> {
        self.repos
            .iter()
            .filter(|r| r.enabled)
            .map(|r| r.id.clone())
            .collect()
    }

    /// Resolves `request` against the repositories (and, with
    /// `use_installed`, the rpmdb in the install root).
    ///
    /// Errors: [`Error::PackageNotFound`] for a spec nothing matches,
    /// [`Error::Unresolvable`] with libdnf's problem descriptions when no
    /// solution exists.
    pub fn depsolve(&mut self, request: &DepsolveRequest) -> Result<Resolved<'_>> {
        request.validate(self.options.gpgcheck)?;
        let start = Instant::now();
        let has_rpmdb = self
            .options
            .install_root
            .join(self.options.dbpath.trim_start_matches('/'))
            .exists();
        self.ctx.setup_sack(!(request.use_installed && has_rpmdb))?;
        let sack = self.ctx.sack();
        sack.exclude_names(&request.excludes)?;
        let goal = self.ctx.goal();
        for path in &request.local_rpms {
            let pkg = sack.add_cmdline_package(path)?;
            goal.install_package(&pkg)?;
        }
        for spec in &request.packages {
            self.ctx.install(spec).map_err(|e| {
                if e.is(sys::DNF_ERROR_PACKAGE_NOT_FOUND) {
                    Error::PackageNotFound {
                        name: spec.clone(),
                        repos: self.enabled_repos(),
                    }
                } else {
                    e.into_error(&format!("requesting {spec}"))
                }
            })?;
        }

        let mut flags: sys::DnfGoalActions = 0;
        if !self.options.install_weak_deps {
            flags |= sys::DNF_IGNORE_WEAK_DEPS;
        }
        if self.options.best {
            flags |= sys::DNF_FORCE_BEST;
        }
        if request.allow_downgrade {
            flags |= sys::DNF_ALLOW_DOWNGRADE;
        }
        let solved = goal.request_count() > 0;
        if solved {
            match goal.depsolve(flags) {
                Ok(()) => {}
                Err(e) if e.is(sys::DNF_ERROR_NO_PACKAGES_TO_UPDATE) => {}
                Err(e) if e.is(sys::DNF_ERROR_PACKAGE_CONFLICTS) => {
                    return Err(Error::Unresolvable {
                        problems: parse_problems(&e.message),
                    })
                }
                Err(e) => return Err(e.into_error("depsolving")),
            }
        }

        let mut tx_flags = 0u64;
        if self.options.nodocs {
            tx_flags |= u64::from(sys::DNF_TRANSACTION_FLAG_NODOCS);
        }
        if request.allow_downgrade {
            tx_flags |= u64::from(sys::DNF_TRANSACTION_FLAG_ALLOW_DOWNGRADE);
        }
        let tx = self.ctx.new_transaction()?;
        tx.set_flags(tx_flags);

        let (incoming, outgoing) = if solved {
            (
                Some(goal.packages(GoalList::Incoming)),
                Some(goal.packages(GoalList::Outgoing)),
            )
        } else {
            (None, None)
        };
        let mut packages = Vec::new();
        let mut removed = Vec::new();
        if let Some(list) = &incoming {
            tx.ensure_repos(list)?;
            packages = (0..list.len()).map(|i| list.package(i)).collect();
        }
        if let Some(list) = &outgoing {
            removed.extend((0..list.len()).map(|i| list.package(i).nevra));
        }
        if let Some(list) = &incoming {
            for i in 0..list.len() {
                removed.extend(list.replaced_by(&goal, i));
            }
        }
        removed.sort();
        removed.dedup();
        let depsolve_time = start.elapsed();
        tracing::info!(
            packages = packages.len(),
            removed = removed.len(),
            elapsed_ms = depsolve_time.as_millis() as u64,
            "depsolved"
        );
        Ok(Resolved {
            goal,
            tx,
            incoming,
            packages,
            removed,
            local_keys: request.local_gpgkey_paths(),
            local_gpgcheck: request.local_gpgcheck,
            downloaded: false,
            timings: Timings {
                depsolve: depsolve_time,
                ..Default::default()
            },
            options: &self.options,
            repos: &self.repos,
        })
    }

    /// Depsolves, downloads, verifies and installs `request` into the root.
    pub fn install(&mut self, request: &DepsolveRequest) -> Result<InstallReport> {
        self.depsolve(request)?.install()
    }

    /// Installs already-downloaded RPM files (e.g. `--override-rpm`), taking
    /// their dependencies from the repositories and the installed set.
    pub fn install_local_rpms<P: AsRef<Path>>(
        &mut self,
        rpms: &[P],
        opts: &LocalRpmOptions,
    ) -> Result<InstallReport> {
        let request = DepsolveRequest {
            local_rpms: rpms.iter().map(|p| p.as_ref().to_path_buf()).collect(),
            local_gpgkeys: opts.gpgkeys.clone(),
            local_gpgcheck: opts.gpgcheck,
            allow_downgrade: opts.allow_downgrade,
            excludes: opts.excludes.clone(),
            ..Default::default()
        };
        self.install(&request)
    }
}

/// Options for [`Dnf::install_local_rpms`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(default)]
pub struct LocalRpmOptions {
    /// Keys the files must be signed with.
    pub gpgkeys: Vec<PathBuf>,
    /// Verify signatures (when the context's `gpgcheck` is on).
    pub gpgcheck: bool,
    /// Allow replacing an installed package with a lower version — what an
    /// override usually is.
    pub allow_downgrade: bool,
    /// Repository packages that must not be pulled in to satisfy deps.
    pub excludes: Vec<String>,
}

impl Default for LocalRpmOptions {
    fn default() -> Self {
        LocalRpmOptions {
            gpgkeys: Vec::new(),
            gpgcheck: true,
            allow_downgrade: true,
            excludes: Vec::new(),
        }
    }
}

/// How long each step took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Timings {
    pub depsolve: Duration,
    /// Download plus checksum and signature verification.
    pub download: Duration,
    /// The rpm transaction.
    pub install: Duration,
}

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InstallReport {
    /// Packages installed (or upgraded/downgraded to), with local paths.
    pub packages: Vec<Package>,
    /// NEVRAs of installed packages the transaction removed or replaced
    /// (older versions of upgraded packages, obsoleted packages), sorted.
    pub removed: Vec<String>,
    /// rpm's messages for the failed scriptlets of packages the options'
    /// `ignore_scripts` names (`%post(NEVRA) scriptlet failed, exit status 3`).
    #[serde(default)]
    pub ignored_scriptlet_failures: Vec<String>,
    pub timings: Timings,
}

/// A solved request, holding the context until it is installed or dropped.
pub struct Resolved<'a> {
    goal: ffi::Goal<'a>,
    tx: ffi::Transaction<'a>,
    incoming: Option<ffi::PackageList<'a>>,
    packages: Vec<Package>,
    removed: Vec<String>,
    local_keys: Vec<PathBuf>,
    local_gpgcheck: bool,
    downloaded: bool,
    timings: Timings,
    options: &'a DnfOptions,
    repos: &'a [RepoConfig],
}

impl std::fmt::Debug for Resolved<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("packages", &self.packages.len())
            .field("removed", &self.removed)
            .field("downloaded", &self.downloaded)
            .finish()
    }
}

impl Resolved<'_> {
    /// The packages the transaction installs, sorted as libdnf lists them.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }

    /// Names of the packages to install that ship `path`.
    pub fn providers_of_file(&self, path: &str) -> Vec<String> {
        let Some(list) = &self.incoming else {
            return Vec::new();
        };
        (0..list.len())
            .filter(|&i| list.has_file(i, path))
            .map(|i| list.package(i).name)
            .collect()
    }

    /// NEVRAs of installed packages the transaction would remove or replace,
    /// sorted.
    pub fn removed(&self) -> &[String] {
        &self.removed
    }

    /// Time spent so far per step.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Makes every package available locally and verified: downloads what
    /// remote repositories still lack into the cache dir, checks each file
    /// against its repodata checksum, then checks signatures against the
    /// package's repository keys. Sets [`Package::local_path`].
    pub fn download(&mut self) -> Result<()> {
        if self.downloaded {
            return Ok(());
        }
        let start = Instant::now();
        let Some(list) = &self.incoming else {
            self.downloaded = true;
            return Ok(());
        };
        self.tx.prepare(&self.goal)?;
        // A bar only when something is fetched (local repositories are
        // read in place and report nothing).
        let total: u64 = self.packages.iter().map(|p| p.download_size).sum();
        let count = self.packages.len();
        let mut meter: Option<strata_process::progress::Meter> = None;
        self.tx.download(&mut |percent| {
            let meter = meter.get_or_insert_with(|| {
                strata_process::progress::Meter::new(format!("downloading {count} packages"), total)
            });
            let done = total / 100 * u64::from(percent.min(100));
            meter.add(done.saturating_sub(meter.done()));
        })?;
        drop(meter);

        let mut keyrings: BTreeMap<String, Option<Keyring>> = BTreeMap::new();
        for (i, pkg) in self.packages.iter_mut().enumerate() {
            let path = list.file_name(i).ok_or_else(|| Error::Libdnf {
                op: "locating downloaded package".into(),
                code: None,
                message: format!("libdnf knows no file for {}", pkg.nevra),
            })?;
            if pkg.repo_id != CMDLINE_REPO && !list.check_file(i)? {
                return Err(Error::Checksum {
                    nevra: pkg.nevra.clone(),
                    path,
                });
            }
            if !keyrings.contains_key(&pkg.repo_id) {
                let keys = keys_for(
                    self.options,
                    self.repos,
                    &pkg.repo_id,
                    self.local_gpgcheck,
                    &self.local_keys,
                );
                let ring = match keys {
                    None => None,
                    Some(keys) => {
                        let ring = Keyring::new()?;
                        for k in &keys {
                            ring.add_key_file(k)?;
                        }
                        Some(ring)
                    }
                };
                keyrings.insert(pkg.repo_id.clone(), ring);
            }
            if let Some(Some(ring)) = keyrings.get(&pkg.repo_id) {
                ring.check_file(&path).map_err(|message| Error::Signature {
                    nevra: pkg.nevra.clone(),
                    repo: pkg.repo_id.clone(),
                    message,
                })?;
            }
            pkg.local_path = Some(path);
        }
        self.downloaded = true;
        self.timings.download = start.elapsed();
        tracing::info!(
            packages = self.packages.len(),
            elapsed_ms = self.timings.download.as_millis() as u64,
            "downloaded and verified"
        );
        Ok(())
    }

    /// Checks that each package libdnf is about to install leads to a file,
    /// as libdnf derives its path now: on fresh package objects, as the
    /// commit makes them.
    fn check_files(&self) -> Result<()> {
        let fresh = self.goal.packages(GoalList::Incoming);
        self.tx.ensure_repos(&fresh)?;
        for i in 0..fresh.len() {
            if let Some(path) = fresh.file_name(i) {
                if !path.exists() {
                    return Err(Error::InvalidOptions(format!(
                        "{} would be read from {}, which does not exist",
                        fresh.package(i).nevra,
                        path.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Downloads and verifies (if not done yet), then runs the rpm
    /// transaction into the install root. Scriptlets run chrooted into the
    /// root, which requires running as root.
    pub fn install(mut self) -> Result<InstallReport> {
        if self.incoming.is_some() {
            require_root_privileges()?;
        }
        self.download()?;
        let start = Instant::now();
        let mut ignored_failures = Vec::new();
        if let Some(list) = &self.incoming {
            let root = &self.options.install_root;
            let in_root = fs::create_dir_all(root)
                .and_then(|()| Root::open(root))
                .map_err(|e| {
                    Error::io(format!("opening the install root {}", root.display()), e)
                })?;
            let litter = Litter::before_commit(&in_root, list);
            let layout = Layout::new(&self.options.cache_dir);
            let redirect = crate::substitutes::Redirect::apply(
                self.options,
                &layout.substitutes,
                list,
                &self.packages,
            )?;
            if let Some(r) = &redirect {
                self.check_files()?;
                tracing::debug!(packages = r.used, "librpm reads substitutes");
            }
            // Placed last before the commit: nothing between it and its
            // removal returns early.
            let guard = match KernelInstallGuard::place(&in_root) {
                Ok(guard) => guard,
                Err(e) => {
                    litter.clean(&in_root);
                    return Err(explain_full(root, e));
                }
            };
            let output = OutputCapture::start();
            let watch = ffi::ScriptletWatch::start();
            let committed = self.tx.commit(&self.goal);
            let failures = watch.finish();
            let tail = output.map(OutputCapture::finish).unwrap_or_default();
            guard.remove(&in_root);
            litter.clean(&in_root);
            committed.map_err(|e| explain_full(root, e))?;
            if let Some(r) = &redirect {
                // libdnf keeps no downloaded package (its `keepcache`).
                r.committed(&layout.metadata, false);
            }
            let (ignored, fatal): (Vec<String>, Vec<String>) =
                failures.into_iter().partition(|f| {
                    let package = parse_scriptlet_failure(f).1;
                    self.options
                        .ignore_scripts
                        .iter()
                        .any(|n| n == nevra_name(package))
                });
            if let Some(failure) = fatal.first() {
                return Err(scriptlet_failed(failure, &tail));
            }
            for f in &ignored {
                tracing::warn!(failure = %f, "ignored a failed scriptlet (ignore-scripts)");
            }
            ignored_failures = ignored;
        }
        self.timings.install = start.elapsed();
        tracing::info!(
            packages = self.packages.len(),
            elapsed_ms = self.timings.install.as_millis() as u64,
            "installed"
        );
        Ok(InstallReport {
            packages: std::mem::take(&mut self.packages),
            removed: std::mem::take(&mut self.removed),
            ignored_scriptlet_failures: ignored_failures,
            timings: self.timings,
        })
    }
}

/// rpm chroots into the install root to run scriptlets, which needs root
/// (real, or mapped inside a user namespace). Checked up front so that the
/// failure names the cause instead of surfacing as an rpm error mid-way.
fn require_root_privileges() -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective uid as seen in its
    // own user namespace.
    let uid = fs::metadata("/proc/self")
        .map_err(|e| Error::io("reading /proc/self to find the effective uid", e))?
        .uid();
    if uid == 0 {
        Ok(())
    } else {
        Err(Error::InvalidOptions(format!(
            "installing into a root needs root privileges (uid {uid}): rpm chroots into the root to run scriptlets; \
             run as root or inside `unshare --user --map-root-user`"
        )))
    }
}

/// Directories an install makes in the root that no package need ship,
/// deepest first: libdnf persists module state into `/etc/dnf/modules.d`
/// on every commit, and the kernel-install guard goes into
/// `/etc/kernel/install.d`.
const LEFT_BEHIND: [&str; 5] = [
    "etc/dnf/modules.d",
    "etc/kernel/install.d",
    "etc/dnf",
    "etc/kernel",
    "etc",
];

/// Which of [`LEFT_BEHIND`] an install may leave without any package
/// owning them: those missing before it that no incoming package ships.
struct Litter {
    candidates: Vec<&'static str>,
}

impl Litter {
    fn before_commit(root: &Root, incoming: &ffi::PackageList<'_>) -> Litter {
        let mut candidates: Vec<&'static str> = LEFT_BEHIND
            .into_iter()
            .filter(|d| !root.has_dir(d))
            .collect();
        if !candidates.is_empty() {
            for i in 0..incoming.len() {
                let files = incoming.files(i);
                candidates.retain(|d| !files.iter().any(|f| f.trim_start_matches('/') == *d));
            }
        }
        Litter { candidates }
    }

    /// Removes the candidates that are empty directories now.
    fn clean(&self, root: &Root) {
        for &d in &self.candidates {
            match root.remove_dir(d) {
                Ok(()) => tracing::debug!(path = d, "removed directory left by the install"),
                Err(e) => tracing::debug!(path = d, error = %e, "left directory in place"),
            }
        }
    }
}

/// Where the kernel-install guard goes: kernel-install runs the plugins of
/// `/etc/kernel/install.d` and `/usr/lib/kernel/install.d` in the order of
/// their names, and stops at the first that exits 77.
const KERNEL_INSTALL_GUARD_DIR: &str = "etc/kernel/install.d";
const KERNEL_INSTALL_GUARD: &str = "etc/kernel/install.d/00-strata-image.install";
const KERNEL_INSTALL_GUARD_BODY: &str = "#!/bin/sh\n\
# Placed by strata while it installs packages into an image: the image's\n\
# kernel stays in /usr/lib/modules and its initramfs is made by the image\n\
# build, so kernel-install's plugins (copying the kernel into /boot,\n\
# running dracut there) do not run. 77: skip the remaining plugins.\n\
exit 77\n";

/// A kernel-install plugin in the install root for the length of one
/// transaction, ending every `kernel-install` call before the tree's own
/// plugins run. RHEL's kernel-core calls `kernel-install add` from its
/// %posttrans (and `remove` from %preun); its plugins would copy the
/// kernel into /boot and make an initramfs there with dracut, which an
/// image does not keep: its kernel stays in /usr/lib/modules and strata
/// makes the initramfs once, after the install. rpm-ostree skips that
/// scriptlet by name; librpm runs every scriptlet, so strata stops what it
/// calls instead. The packages' other scriptlets (depmod in
/// kernel-modules' %post) run as they are. The directories made for it go
/// with the install's other [`Litter`].
struct KernelInstallGuard;

impl KernelInstallGuard {
    fn place(root: &Root) -> Result<KernelInstallGuard> {
        let placed = root.create_dirs(KERNEL_INSTALL_GUARD_DIR).and_then(|()| {
            root.create_new(
                KERNEL_INSTALL_GUARD,
                KERNEL_INSTALL_GUARD_BODY.as_bytes(),
                0o755,
            )
        });
        if let Err(e) = placed {
            let context = if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!(
                    "the install root already has /{KERNEL_INSTALL_GUARD}, the plugin \
                     strata places for each transaction: no package or base image may ship it"
                )
            } else {
                format!("placing /{KERNEL_INSTALL_GUARD} in the install root")
            };
            return Err(Error::io(context, e));
        }
        Ok(KernelInstallGuard)
    }

    /// Takes the plugin out.
    fn remove(self, root: &Root) {
        if let Err(e) = root.remove_file(KERNEL_INSTALL_GUARD) {
            tracing::warn!(path = KERNEL_INSTALL_GUARD, error = %e, "could not remove the kernel-install guard");
        }
    }
}

/// The keys packages of `repo_id` must be signed with, or `None` when they
/// are not checked.
fn keys_for(
    options: &DnfOptions,
    repos: &[RepoConfig],
    repo_id: &str,
    local_gpgcheck: bool,
    local_keys: &[PathBuf],
) -> Option<Vec<PathBuf>> {
    if !options.gpgcheck {
        return None;
    }
    if repo_id == CMDLINE_REPO {
        return local_gpgcheck.then(|| local_keys.to_vec());
    }
    // A package from a repository we did not define cannot occur (libdnf
    // only sees our .repo file); check it with no keys, i.e. refuse it.
    match repos.iter().find(|r| r.id == repo_id) {
        Some(r) if !r.gpgcheck => None,
        Some(r) => Some(r.gpgkey_paths()),
        None => Some(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_master_switch_repo_flag_and_local_settings() {
        let mut opts = DnfOptions::new("/r", "/c", "8");
        let signed = RepoConfig::new("signed", "file:///s").with_gpgkey("file:///k1");
        let mut unsigned = RepoConfig::new("unsigned", "file:///u");
        unsigned.gpgcheck = false;
        let repos = [signed, unsigned];
        let local = [PathBuf::from("/lk")];
        assert_eq!(
            keys_for(&opts, &repos, "signed", true, &local),
            Some(vec![PathBuf::from("/k1")])
        );
        assert_eq!(keys_for(&opts, &repos, "unsigned", true, &local), None);
        assert_eq!(
            keys_for(&opts, &repos, "unknown", true, &local),
            Some(vec![])
        );
        assert_eq!(
            keys_for(&opts, &repos, CMDLINE_REPO, true, &local),
            Some(local.to_vec())
        );
        assert_eq!(keys_for(&opts, &repos, CMDLINE_REPO, false, &local), None);
        opts.gpgcheck = false;
        assert_eq!(keys_for(&opts, &repos, "signed", true, &local), None);
    }

    #[test]
    fn layout_lives_under_cache_dir() {
        let l = Layout::new(Path::new("/w/cache"));
        assert_eq!(l.metadata, Path::new("/w/cache/dnf/metadata"));
        assert_eq!(l.solv, Path::new("/w/cache/dnf/solv"));
        assert_eq!(l.run, Path::new("/w/cache/dnf/run"));
    }
}
