//! The child process that installs one release on top of the base.
//!
//! Why a child: libdnf and rpm are process-global (rpm even chroots the
//! whole process during a transaction), releases derive concurrently, and
//! the overlay mount must live in a private mount namespace that dies with
//! the process. The parent describes the work as a [`Job`] (JSON file),
//! starts its worker under `unshare --mount --propagation private`, and
//! reads the [`Outcome`] back (JSON file); the child's output is captured
//! and only its tail shows, in the error, when it fails.
//!
//! In the child: the base checkout is the overlay's lower dir (read only,
//! never written: its files are hard links into the ostree repo), the upper
//! dir collects exactly the release's changes. `/etc` is a symlink to
//! `usr/etc` while packages install, so rpm and scriptlets see the base's
//! configuration and their changes land where the base keeps it. When the
//! layer changes what the initramfs is made of (or the manifest asks), the
//! initramfs is made again in the merged tree, so the layer carries it.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use strata_dnf::job::InstallJob;
use strata_process::worker::{Isolation, JobError, Worker};
use strata_rootfs::initramfs::{self, Generator};
use strata_rootfs::initramfs_cache::Cache;
use strata_rootfs::{bootupd, files, passwd, sandbox, tree};

/// A file to put into the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileToAdd {
    pub src: PathBuf,
    pub dest: String,
    pub mode: Option<u32>,
}

/// One release's install, as the worker runs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The overlay's directories.
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    pub merged: PathBuf,
    /// The install, rooted at `merged`: of the NEVRAs the parent resolved
    /// and checked, exactly, or it fails.
    pub install: InstallJob,
    pub add_files: Vec<FileToAdd>,
    pub remove_files: Vec<String>,
    pub postprocess: Vec<String>,
    /// systemd units to enable, after postprocess.
    #[serde(default)]
    pub units: Vec<String>,
    /// os-release keys to set, in order.
    pub os_release: Vec<(String, String)>,
    pub source_date_epoch: u64,
    /// The initramfs's epoch (the base's date, see `Plan`).
    pub initramfs_epoch: u64,
    /// The base's rpm database as the host's rpm installs into it (sqlite),
    /// converted once by the parent: a base keeping another format (RHEL
    /// 8's Berkeley DB) gets this copy for the install.
    pub base_rpmdb_sqlite: PathBuf,
    /// How the base's initramfs was made (none: the base does not say).
    #[serde(default)]
    pub initramfs_generator: Option<Generator>,
    /// Make the initramfs again even when the layer changes none of its
    /// inputs (the manifest's `regenerate-initramfs`).
    #[serde(default)]
    pub regenerate_initramfs: bool,
    /// Initramfs images made before (the workdir's cache); none: the
    /// generator always runs.
    #[serde(default)]
    pub initramfs_cache: Option<PathBuf>,
    /// A directory of the staging the worker may write into.
    pub scratch: PathBuf,
}

pub use strata_workdir::record::InitramfsRecord;

/// How many changed inputs a record names.
pub const CHANGED_INPUTS_SHOWN: usize = 20;

/// What a worker installed.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Installed {
    /// NEVRAs.
    pub installed: Vec<String>,
    /// rpm's messages for failed scriptlets that `ignore-scripts` let
    /// through.
    pub ignored_scriptlet_failures: Vec<String>,
    pub initramfs: InitramfsRecord,
}

/// Runs `job` in a worker in its own mount namespace.
pub fn run(worker: &Worker, job: &Job, scratch: &Path) -> Result<Installed> {
    if !rustix::process::geteuid().is_root() {
        bail!(
            "installing the release's packages needs root: derive mounts an overlay of the base \
             and runs the packages' scriptlets chrooted into it (run strata derive as root, or \
             as a user with subordinate ids, which strata makes root of a user namespace)"
        );
    }
    // librpm reads SOURCE_DATE_EPOCH: the worker's, from its start.
    let mut worker = worker.clone();
    worker.envs.push((
        "SOURCE_DATE_EPOCH".into(),
        job.source_date_epoch.to_string().into(),
    ));
    match strata_process::worker::run(&worker, &Isolation::Mount, scratch, job) {
        Ok(installed) => Ok(installed),
        Err(JobError::Failed(message)) => bail!("{message}"),
        Err(e) => Err(e).context("the derive worker failed"),
    }
}

/// The worker's entry point: `JOB OUTCOME` (see [`strata_process::worker::serve`]).
pub fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    strata_process::worker::serve(args, |job: Job| serve(&job).map_err(|e| format!("{e:#}")))
}

/// Runs the job; must be called in a private mount namespace.
fn serve(job: &Job) -> Result<Installed> {
    strata_process::require("mount")?;
    // No redirects, metacopy, index or inode numbers: the upper dir holds
    // plain files, directories and whiteouts. In a user namespace, overlay
    // keeps its own metadata in `user.overlay.*` xattrs (which refuses
    // following redirects: nofollow, which a plain checkout never needs).
    let mut options = format!(
        "lowerdir={},upperdir={},workdir={},redirect_dir=nofollow,metacopy=off,index=off,xino=off",
        job.lower.display(),
        job.upper.display(),
        job.work.display()
    );
    if !strata_process::userns::in_initial_namespace() {
        options.push_str(",userxattr");
    }
    if options.contains('\n') {
        bail!("overlay paths must not contain newlines");
    }
    strata_process::run(
        Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(&options)
            .arg(&job.merged),
    )
    .context("mounting the overlay of the base")?;
    let result = install(job);
    let unmounted = strata_process::run(Command::new("umount").arg(&job.merged));
    let installed = result?;
    unmounted.context("unmounting the overlay")?;
    Ok(installed)
}

fn install(job: &Job) -> Result<Installed> {
    let root = &job.merged;
    if root.join("etc").symlink_metadata().is_ok() {
        bail!("the base tree has /etc; an ostree base keeps it in /usr/etc");
    }
    // `/etc` is a link and the device nodes exist only while packages
    // install.
    std::os::unix::fs::symlink("usr/etc", root.join("etc")).context("linking /etc")?;
    let nodes = files::DeviceNodes::make(root)?;
    // The host's rpm installs into sqlite; the layer keeps the base's
    // backend (a RHEL 8 base's rpm reads only bdb).
    let rpmdb = root.join("usr/share/rpm");
    let backend = strata_rpmdb::Backend::detect(&rpmdb)
        .context("the base has no rpm database in /usr/share/rpm")?;
    if backend != strata_rpmdb::Backend::Sqlite {
        strata_rpmdb::replace(&rpmdb, &job.base_rpmdb_sqlite)
            .context("opening the base's rpm database for the install")?;
    }
    let report = job
        .install
        .run()
        .context("installing the release packages")?;
    let mut installed: Vec<String> = report.packages.iter().map(|p| p.nevra.clone()).collect();
    installed.sort();
    passwd::split(root)?;
    let add: Vec<strata_manifest::AddFile> = job
        .add_files
        .iter()
        .map(|f| strata_manifest::AddFile {
            src: f.src.clone(),
            dest: f.dest.clone(),
            mode: f.mode,
        })
        .collect();
    files::add_and_remove(root, &add, &job.remove_files)?;
    // The initramfs sees os-release as the packages left it, as compose's
    // does: not the build's version, which would make every build's
    // initramfs another one.
    let os_release = os_release_as_installed(root, &job.scratch)?;
    // Postprocess scripts see the release's os-release (OPENSHIFT_VERSION,
    // OSTREE_VERSION), e.g. to write a login banner.
    let values: Vec<(&str, &str)> = job
        .os_release
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    files::set_os_release(root, &values)?;
    for (i, script) in job.postprocess.iter().enumerate() {
        sandbox::run_script(root, job.source_date_epoch, i, script)?;
    }
    files::enable_units(root, &job.units)?;
    let initramfs = regenerate_initramfs(job, os_release.as_deref())?;
    bootupd::check_layer(root, &bootupd::rpm_owners(root, "/usr/share/rpm"))?;
    tree::apply_layered(root)?;
    strata_rpmdb::convert(&rpmdb, backend)
        .with_context(|| format!("writing the rpm database back as {}", backend.as_str()))?;
    nodes.remove()?;
    fs::remove_file(root.join("etc")).context("removing the /etc link")?;
    Ok(Installed {
        installed,
        ignored_scriptlet_failures: report.ignored_scriptlet_failures,
        initramfs,
    })
}

/// A copy in `scratch` of the tree's `/usr/lib/os-release` as it is now
/// (with its mode), when that is a file (as compose leaves it).
fn os_release_as_installed(root: &Path, scratch: &Path) -> Result<Option<PathBuf>> {
    let from = root.join("usr/lib/os-release");
    if !fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let to = scratch.join("initramfs-os-release");
    fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
    Ok(Some(to))
}

/// Makes the initramfs again, in the merged tree, when the layer changes
/// what the generator reads or the manifest asks for it: with the base's
/// generator and arguments, in compose's sandbox, at the path the base has
/// it, so the layer carries the new one.
fn regenerate_initramfs(job: &Job, os_release: Option<&Path>) -> Result<InitramfsRecord> {
    let changed = initramfs::changed_inputs(&job.upper, &job.lower)
        .context("looking for changes to the initramfs's inputs")?;
    let mut record = InitramfsRecord {
        regenerated: false,
        requested: job.regenerate_initramfs,
        changed_inputs: changed.len(),
        changed_inputs_shown: changed.iter().take(CHANGED_INPUTS_SHOWN).cloned().collect(),
        command: Vec::new(),
    };
    if changed.is_empty() && !job.regenerate_initramfs {
        return Ok(record);
    }
    let why = if changed.is_empty() {
        "the release manifest sets regenerate-initramfs".to_string()
    } else {
        format!(
            "the layer changes {} of its inputs ({}{})",
            changed.len(),
            changed[0],
            if changed.len() > 1 { ", …" } else { "" }
        )
    };
    let Some(generator) = &job.initramfs_generator else {
        bail!(
            "the initramfs must be made again ({why}), but the base commit does not record a generator strata runs ({} / {} metadata): compose the base with strata",
            initramfs::GENERATOR_KEY,
            initramfs::ARGS_KEY
        );
    };
    let root = &job.merged;
    let kernel = tree::find_kernel(root)?;
    // The generator sees the tree as compose's did: /etc a directory (the
    // tree's usr/etc, mounted there), and a /var/tmp to work in (an ostree
    // base has emptied /var). Both are gone again before the tree's
    // conventions are applied, so neither reaches the layer.
    let etc = root.join("etc");
    fs::remove_file(&etc).context("unlinking /etc")?;
    fs::create_dir(&etc).context("creating /etc")?;
    let var_tmp = root.join("var/tmp");
    let made_var_tmp = !var_tmp.exists();
    if made_var_tmp {
        fs::create_dir_all(&var_tmp).with_context(|| format!("creating {}", var_tmp.display()))?;
        fs::set_permissions(
            &var_tmp,
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )?;
    }
    tracing::info!("making the initramfs again: {why}");
    let started = std::time::Instant::now();
    let mut layout = sandbox::Layout::default();
    layout.etc_in_usr_etc = true;
    layout.os_release = os_release.map(Path::to_path_buf);
    let cache = job.initramfs_cache.as_deref().map(Cache::new);
    let call = generator.invocation(root, &layout, &kernel.kver);
    let ran = generator.run(root, &layout, &call, job.initramfs_epoch, cache.as_ref());
    if made_var_tmp {
        fs::remove_dir_all(&var_tmp).with_context(|| format!("removing {}", var_tmp.display()))?;
    }
    fs::remove_dir(&etc).context("removing /etc")?;
    std::os::unix::fs::symlink("usr/etc", &etc).context("linking /etc")?;
    let made = ran.with_context(|| format!("making the initramfs again ({why})"))?;
    match made {
        initramfs::Made::Reused => tracing::info!(
            elapsed = ?started.elapsed(),
            "initramfs: the image made before from the same inputs"
        ),
        initramfs::Made::Generated(_) => {
            tracing::info!(elapsed = ?started.elapsed(), "initramfs made again")
        }
    }
    record.regenerated = true;
    record.command = call.argv;
    Ok(record)
}
