//! Deploying a commit into a fresh sysroot through libostree, in a child
//! process confined to its own user and mount namespaces.
//!
//! Why a child: a sysroot deployment freezes (FIFREEZE) the filesystem that
//! holds the sysroot's /boot. In a user namespace that call is refused, and
//! /boot is a private tmpfs besides, so the host's filesystems are never
//! touched; entering namespaces needs a fresh process (strata denies
//! `unsafe`). The caller passes a ready `Command` (its own executable and a
//! hidden subcommand, or the crate's test worker); [`run_in_child`] wraps it
//! in `unshare` and appends two files: the [`DeployJob`] as JSON in, the
//! outcome as JSON out. The child calls [`worker_main`].
//!
//! What it must not do: run a deployment outside a user namespace.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use ostree::gio;
use ostree::glib;
use serde::{Deserialize, Serialize};

/// One deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployJob {
    /// An empty directory that becomes the physical root (`/ostree`, `/boot`).
    pub sysroot: PathBuf,
    /// Where the content of the sysroot's /boot (a tmpfs) is copied out.
    pub boot_out: PathBuf,
    /// The repository holding `commit` (pulled into the sysroot's own).
    pub repo: PathBuf,
    pub commit: String,
    pub stateroot: String,
    pub kargs: Vec<String>,
    /// `container-image-reference` of the origin file.
    pub origin_image: String,
}

/// What the deployment produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    /// The deployment's directory, relative to the sysroot.
    pub deployment: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Outcome {
    Ok { deployed: Deployed },
    Err { message: String },
}

/// Runs `job` in a child started from `worker` inside
/// `unshare --user --map-root-user --mount`.
pub fn run_in_child(worker: &Command, job: &DeployJob) -> Result<Deployed> {
    strata_process::require("unshare")?;
    let dir = tempfile::Builder::new()
        .prefix("strata-deploy-")
        .tempdir()
        .context("creating a temporary directory for the deploy job")?;
    let job_path = dir.path().join("job.json");
    let outcome_path = dir.path().join("outcome.json");
    std::fs::write(&job_path, serde_json::to_vec_pretty(job)?)
        .with_context(|| format!("writing {}", job_path.display()))?;
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "--"])
        .arg(worker.get_program())
        .args(worker.get_args())
        .arg(&job_path)
        .arg(&outcome_path)
        // No syncfs()/sync() after the deployment: with FIFREEZE refused,
        // libostree falls back to a sync() of the whole machine, which
        // waits for every other process's dirty data. The sysroot is
        // scratch space (see `deploy`).
        .env("OSTREE_SYSROOT_OPTS", "skip-sync")
        .stdin(Stdio::null());
    for (k, v) in worker.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let output = strata_process::run(&mut cmd);
    let outcome = std::fs::read(&outcome_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Outcome>(&b).ok());
    match (outcome, output) {
        (Some(Outcome::Ok { deployed }), Ok(_)) => Ok(deployed),
        (Some(Outcome::Err { message }), _) => bail!("deploying {}: {message}", job.commit),
        (_, Err(e)) => Err(e).context("the deploy worker failed"),
        (_, Ok(_)) => bail!("the deploy worker exited without a result"),
    }
}

/// The child side: `ARGS = JOB OUTCOME`. Exit 0 when the deployment worked.
pub fn worker_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    let [job, outcome] = args.as_slice() else {
        eprintln!("usage: <worker> JOB.json OUTCOME.json");
        return ExitCode::from(2);
    };
    let result = std::fs::read(job)
        .with_context(|| format!("reading {}", Path::new(job).display()))
        .and_then(|b| Ok(serde_json::from_slice::<DeployJob>(&b)?))
        .and_then(|job| deploy(&job));
    let (out, code) = match result {
        Ok(deployed) => (Outcome::Ok { deployed }, ExitCode::SUCCESS),
        Err(e) => (
            Outcome::Err {
                message: format!("{e:#}"),
            },
            ExitCode::FAILURE,
        ),
    };
    match serde_json::to_vec(&out).map(|b| std::fs::write(outcome, b)) {
        Ok(Ok(())) => code,
        _ => ExitCode::FAILURE,
    }
}

/// Copies the objects of `commit` from the repository at `from` into
/// `into`: a local pull, which libostree runs as `ostree pull-local` does
/// (objects imported with trust, in parallel).
fn copy_commit(from: &Path, into: &ostree::Repo, commit: &str) -> Result<()> {
    let url = format!("file://{}", from.display());
    into.pull(
        &url,
        &[commit],
        ostree::RepoPullFlags::NONE,
        None,
        gio::Cancellable::NONE,
    )
    .with_context(|| format!("pulling {commit} from {}", from.display()))
}

/// True when this process runs in the initial user namespace (as the host's
/// real users), where a deployment could freeze a host filesystem.
fn in_initial_user_namespace() -> Result<bool> {
    let map =
        std::fs::read_to_string("/proc/self/uid_map").context("reading /proc/self/uid_map")?;
    Ok(map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

fn deploy(job: &DeployJob) -> Result<Deployed> {
    if in_initial_user_namespace()? {
        bail!("refusing to deploy outside a user namespace (it could freeze a host filesystem)");
    }
    let boot = job.sysroot.join("boot");
    std::fs::create_dir_all(&boot).with_context(|| format!("creating {}", boot.display()))?;
    strata_process::run(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", "mode=0755", "strata-boot"])
            .arg(&boot),
    )
    .context("mounting a tmpfs on the sysroot's /boot")?;

    let cancel = gio::Cancellable::NONE;
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(&job.sysroot)));
    sysroot
        .ensure_initialized(cancel)
        .context("initializing the sysroot")?;
    sysroot.load(cancel).context("loading the sysroot")?;
    sysroot
        .init_osname(&job.stateroot, cancel)
        .with_context(|| format!("creating the stateroot {}", job.stateroot))?;
    let repo = sysroot.repo();
    // strata writes the GRUB configuration itself; ostree only writes BLS.
    // The sysroot is thrown away once its content is in the disk images:
    // nothing it writes needs to reach the disk, and fsync on a busy
    // machine is most of a deployment's time.
    repo.set_disable_fsync(true);
    let config = repo.copy_config();
    config.set_string("sysroot", "bootloader", "none");
    config.set_boolean("core", "fsync", false);
    repo.write_config(&config)
        .context("configuring the sysroot repository")?;
    copy_commit(&job.repo, &repo, &job.commit)?;

    let origin = glib::KeyFile::new();
    origin.set_string("origin", "container-image-reference", &job.origin_image);
    let kargs: Vec<&str> = job.kargs.iter().map(String::as_str).collect();
    let opts = ostree::SysrootDeployTreeOpts {
        override_kernel_argv: Some(&kargs),
        ..Default::default()
    };
    sysroot.load(cancel).context("reloading the sysroot")?;
    let deployment = sysroot
        .deploy_tree_with_options(
            Some(&job.stateroot),
            &job.commit,
            Some(&origin),
            None,
            Some(&opts),
            cancel,
        )
        .with_context(|| format!("deploying {}", job.commit))?;
    sysroot
        .simple_write_deployment(
            Some(&job.stateroot),
            &deployment,
            None,
            ostree::SysrootSimpleWriteDeploymentFlags::NONE,
            cancel,
        )
        .context("writing the deployment")?;
    let dirpath = sysroot.deployment_dirpath(&deployment);
    crate::fs::copy_tree(&boot, &job.boot_out)
        .context("copying the deployment's /boot out of its tmpfs")?;
    Ok(Deployed {
        deployment: PathBuf::from(dirpath.as_str()),
    })
}
