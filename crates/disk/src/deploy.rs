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

/// How many ids the namespace of a build run as root maps onto themselves:
/// every system and regular account of a RHEL tree.
const MAPPED_IDS: u32 = 65536;

/// Run by `sh` in the fresh namespace of a build run as root: waits for the
/// parent to write the id maps, then executes the worker, which gets its
/// capabilities at that exec (as the namespace's root, now mapped).
const AWAIT_ID_MAP: &str = "i=0
until read -r m < /proc/self/uid_map && [ -n \"$m\" ]; do
    i=$((i + 1))
    [ $i -lt 3000 ] || { echo 'no uid map after 30 s' >&2; exit 1; }
    sleep 0.01
done
exec \"$@\"";

/// Runs `job` in a child started from `worker` in its own user and mount
/// namespaces.
///
/// As root, the namespace maps ids 0..65536 onto themselves, so that files
/// the image gives to system users (polkitd, ssh_keys, …) deploy with their
/// owners and reach the filesystems unchanged. `unshare --map-users` would
/// need newuidmap and /etc/subuid entries; root may write the maps itself,
/// so the child waits for them ([`AWAIT_ID_MAP`]). Any other user can map
/// only itself, as root (`--map-root-user`): content owned by anyone else
/// then fails to deploy.
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
    let as_root = crate::fs::effective_uid()? == 0;
    let mut cmd = Command::new("unshare");
    if as_root {
        cmd.args(["--user", "--mount", "--", "sh", "-c", AWAIT_ID_MAP, "sh"]);
    } else {
        cmd.args(["--user", "--map-root-user", "--mount", "--"]);
    }
    cmd.arg(worker.get_program())
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
    let output =
        strata_process::run_started(
            &mut cmd,
            None,
            |pid| {
                if as_root {
                    map_ids(pid)
                } else {
                    Ok(())
                }
            },
        );
    let outcome = std::fs::read(&outcome_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Outcome>(&b).ok());
    match (outcome, output) {
        (Some(Outcome::Ok { deployed }), Ok(_)) => Ok(deployed),
        (Some(Outcome::Err { message }), _) if !as_root && message.contains("chown") => bail!(
            "deploying {}: {message} (as a user other than root, the deployment can give files \
             to root only: this image has files owned by other users; build it as root)",
            job.commit
        ),
        (Some(Outcome::Err { message }), _) => bail!("deploying {}: {message}", job.commit),
        (_, Err(e)) => Err(e).context("the deploy worker failed"),
        (_, Ok(_)) => bail!("the deploy worker exited without a result"),
    }
}

/// Once process `pid` is in a user namespace of its own, maps ids
/// 0..[`MAPPED_IDS`] of it onto the same ids outside.
fn map_ids(pid: u32) -> std::io::Result<()> {
    let own = std::fs::read_link("/proc/self/ns/user")?;
    let started = std::time::Instant::now();
    loop {
        match std::fs::read_link(format!("/proc/{pid}/ns/user")) {
            Ok(ns) if ns != own => break,
            Ok(_) if started.elapsed() < std::time::Duration::from_secs(30) => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(_) => {
                return Err(std::io::Error::other(
                    "the deploy worker did not enter a user namespace within 30 s",
                ))
            }
            // Gone already: its exit status tells why.
            Err(_) => return Ok(()),
        }
    }
    let map = format!("0 0 {MAPPED_IDS}\n");
    std::fs::write(format!("/proc/{pid}/gid_map"), &map)?;
    std::fs::write(format!("/proc/{pid}/uid_map"), &map)
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
