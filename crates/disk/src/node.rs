//! What a node does to its own disk when it updates or rolls back, done to
//! a disk image that is not running: the upgrade and rollback tests of the
//! disks strata builds, and a release engineer's check that an image
//! upgrades from an older bootimage.
//!
//! An update is what rpm-ostree does on the node: the new commit is pulled
//! into the disk's own repository and deployed by libostree beside the
//! current deployment, which becomes the rollback; the new deployment
//! inherits the current one's kernel arguments and merges its `/etc`; the
//! BLS entries are written again, as the disk's repository configuration
//! (`sysroot.bootloader`) asks. A rollback swaps the first two deployments,
//! as `rpm-ostree rollback` does.
//!
//! The disk's filesystems are opened with fuse2fs inside the worker's user
//! and mount namespace ([`crate::userns`]): no loop device, no mount on the
//! host, and a freeze of the filesystem (which libostree asks for) is
//! refused there, as in [`crate::deploy`].
//!
//! The disk is untrusted, and libostree, running as root, follows its
//! links: a `/boot/loader.1`, `/ostree/repo/tmp` or deployment `etc` that
//! is a link to a host directory would have it write, delete or copy
//! there. So libostree sees nothing but the disk. The worker makes its
//! mounts private, mounts a small tmpfs, opens the root and boot
//! filesystems on directories of that tmpfs (never through the disk's own
//! trees, so swapped partition names cannot mount one through the other's
//! links), binds the boot filesystem on the root one's `/boot` through a
//! descriptor opened with no symlink followed, checks that every directory
//! libostree writes is a real directory of the disk and that ostree's own
//! links point where ostree puts them ([`check_layout`]), and binds the
//! source repository read-only. Then a second process, in mount, pid,
//! network and IPC namespaces of its own ([`in_root`]), mounts the procfs
//! of its pid namespace, pivots into the tmpfs, lets the old root go, and
//! runs libostree: absolute and `../` links resolve inside the disk's
//! trees and the tmpfs. Its job and answer are files of that tmpfs. Of the
//! host it has only single files bound in ([`host_files`]): a few devices,
//! writable as devices are (null, zero, full, random, urandom; its
//! `/dev/tty` is `/dev/null`, and it runs in a session of its own, with no
//! controlling terminal), and, read-only, the bwrap libostree runs
//! semodule with, and its libraries. This is done twice, read-only to
//! check (a refusal changes no byte of the disk), then to work. The check
//! of an update also reads every object of the new commit that the disk's
//! repository already holds: a pull would take those as they are.
//!
//! Only a regular file is a disk: a FIFO or a device is refused before it
//! is opened for real, and it is locked (`flock`) for the run: a second
//! run on it is refused. Every wait is bounded: fuse2fs opening a
//! filesystem, and writing and ending after its unmount, and the run by
//! one deadline ([`DEADLINE_VAR`]), when the libostree process is killed
//! and the worker ends the filesystems as usual (a grace later the worker
//! itself is killed, a last resort); fuse2fs and the libostree process
//! die with the worker, and the worker with strata. A rollback's scratch directory beside the disk is locked while
//! the run lives; one left by a killed run is removed by the next.
//!
//! What it must not do: write a disk that the guest could be running (the
//! caller's business), touch any partition other than boot and root, or
//! let the libostree process reach anything of the host by a path.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ostree::gio;
use ostree::glib;
use serde::{Deserialize, Serialize};

use strata_process::own_root;
use strata_process::text::{first_line, shown};
use strata_process::worker::Outcome;

use crate::userns::{IdMap, Job, Namespace};

mod fuse2fs;
mod layout;
mod scratch;
use fuse2fs::Fuse2fs;
use layout::{check_layout, Tree};
use scratch::Scratch;

/// The partition names a CoreOS disk has (GPT partition labels).
const BOOT_LABEL: &str = "boot";
const ROOT_LABEL: &str = "root";

/// One piece of node work, done by the worker in the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeJob {
    /// A raw disk image.
    pub disk: PathBuf,
    /// Byte offsets of the root and boot filesystems in it.
    pub root_offset: u64,
    pub boot_offset: u64,
    /// An empty directory: the worker mounts on it, in its own mount
    /// namespace, the tmpfs that becomes the root of the process running
    /// libostree.
    pub mountpoint: PathBuf,
    pub action: NodeAction,
    /// Seconds the run may take: the process running libostree is killed
    /// when they have passed since the worker started, and the worker then
    /// takes the filesystems off as usual (fuse2fs writes what it holds).
    pub deadline_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum NodeAction {
    /// Deploy `commit` from the repository at `repo` as the new default.
    Deploy {
        repo: PathBuf,
        commit: String,
        /// `container-image-reference` of the new deployment's origin.
        origin_image: String,
    },
    /// Make the rollback deployment the default.
    Rollback,
}

/// One deployment of a node's disk, as its BLS entry shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDeployment {
    pub stateroot: String,
    pub commit: String,
    /// The commit's `version` metadata.
    pub version: Option<String>,
    /// The boot menu title and kernel arguments of its BLS entry.
    pub title: String,
    pub options: String,
}

/// The deployments of a node's disk, the default first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    pub deployments: Vec<NodeDeployment>,
}

/// Deploys the image `image` (a tag of `workdir`, `oci:DIR:TAG` or
/// `docker://…`) into the raw disk `disk`, built by [`crate::build`], as
/// the node would on update. `worker` starts [`crate::worker_main`], as
/// for [`crate::build`].
pub fn update(
    workdir: &Path,
    image: &str,
    disk: &Path,
    transport: &strata_oscontainer::TransportOptions,
    worker: Command,
) -> Result<NodeState> {
    let (disk, _held) = held_disk(disk)?;
    let w = strata_workdir::Workdir::open(workdir)?;
    let _lock = w.lock()?;
    let opts =
        crate::DiskOptions::new(workdir, image, Vec::new(), worker).transport(transport.clone());
    let (id, _) = crate::resolve::resolve(&w, &opts)?;
    let staging = w.staging("node")?;
    let action = NodeAction::Deploy {
        repo: w.repo(),
        commit: id.ostree_commit.clone(),
        origin_image: crate::resolve::origin_reference(&id.image),
    };
    run(&disk, action, &opts.worker, staging.path())
        .with_context(|| format!("deploying {} into {}", id.image, disk.display()))
}

/// Makes the rollback deployment of the raw disk `disk` the default, as
/// `rpm-ostree rollback` does.
pub fn rollback(disk: &Path, worker: Command) -> Result<NodeState> {
    let (disk, _held) = held_disk(disk)?;
    let scratch = Scratch::beside(&disk)?;
    run(&disk, NodeAction::Rollback, &worker, scratch.path())
        .with_context(|| format!("rolling back {}", disk.display()))
}

/// The canonical path of `disk` once it is known to be a raw image file:
/// a FIFO or a device is refused before anything waits on it (opening a
/// FIFO for reading waits for a writer), a qcow2 image by name.
fn raw_disk(disk: &Path) -> Result<(PathBuf, std::fs::File)> {
    let disk = std::fs::canonicalize(disk).with_context(|| format!("{}", disk.display()))?;
    let file =
        strata_process::regular::open_regular(&disk, strata_process::regular::FinalSymlink::Refuse)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e} (a node's disk is a raw image file)",
                    disk.display()
                )
            })?
            .file;
    let mut magic = [0u8; 4];
    let read = std::os::unix::fs::FileExt::read_at(&file, &mut magic, 0)
        .with_context(|| format!("reading {}", disk.display()))?;
    if read == 4 && magic == *b"QFI\xfb" {
        bail!(
            "{} is a qcow2 image: a node's disk is changed as a raw image \
             (qemu-img convert -O raw, or the metal image)",
            disk.display()
        );
    }
    Ok((disk, file))
}

/// [`raw_disk`], locked (`flock`, exclusive) for as long as the file
/// returned is open: two runs on one disk would both open its
/// filesystems for writing. A second run is refused, naming the disk.
fn held_disk(disk: &Path) -> Result<(PathBuf, std::fs::File)> {
    let (disk, file) = raw_disk(disk)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok((disk, file)),
        Err(rustix::io::Errno::WOULDBLOCK) => bail!(
            "{} is in use by another strata node run (one run at a time on a disk)",
            disk.display()
        ),
        Err(e) => Err(e).with_context(|| format!("locking {}", disk.display())),
    }
}

fn run(disk: &Path, action: NodeAction, worker: &Command, scratch: &Path) -> Result<NodeState> {
    strata_process::require("fuse2fs")?;
    let deadline = deadline()?;
    let parts = partitions(disk)?;
    let offset = |label: &str| {
        let mut named = parts.iter().filter(|p| p.name == label);
        match (named.next(), named.next()) {
            (Some(p), None) => Ok(p.offset),
            (None, _) => Err(anyhow::anyhow!(
                "{} has no partition named {label:?} (not a CoreOS disk?)",
                disk.display()
            )),
            (Some(_), Some(_)) => Err(anyhow::anyhow!(
                "{} has more than one partition named {label:?}",
                disk.display()
            )),
        }
    };
    let (root_offset, boot_offset) = (offset(ROOT_LABEL)?, offset(BOOT_LABEL)?);
    ensure!(
        root_offset != boot_offset,
        "{}: the partitions named {ROOT_LABEL:?} and {BOOT_LABEL:?} start at the same byte",
        disk.display()
    );
    let mountpoint = scratch.join("root");
    std::fs::create_dir_all(&mountpoint)
        .with_context(|| format!("creating {}", mountpoint.display()))?;
    let job = NodeJob {
        root_offset,
        boot_offset,
        disk: disk.to_path_buf(),
        mountpoint,
        action,
        deadline_secs: deadline.as_secs(),
    };
    // The worker itself is killed only past the deadline and a grace for
    // ending its filesystems: a last resort for a worker stuck on its own
    // FUSE mount, since a kill there loses what fuse2fs had not written.
    let worker = with_deadline(worker, deadline + WORKER_GRACE)?;
    let ns = Namespace {
        map: IdMap::for_this_process()?,
        worker: &worker,
        scratch,
    };
    let started = Instant::now();
    let result = ns.run(&Job::Node(job));
    if result.is_err() && started.elapsed() >= deadline {
        bail!(
            "the work on {} did not end within {} s and was stopped ({DEADLINE_VAR} sets that limit)",
            disk.display(),
            deadline.as_secs()
        );
    }
    result
}

/// How long one run may take, its worker and libostree included, when
/// [`DEADLINE_VAR`] does not say: a hostile disk can make libostree wait
/// forever (a FIFO where it reads an object), and nothing else ends it.
const DEADLINE: Duration = Duration::from_secs(15 * 60);

/// How long past the deadline the worker itself may live: it ends the
/// filesystems of a run whose libostree process the deadline killed
/// (fuse2fs is given a minute to write what it holds).
const WORKER_GRACE: Duration = Duration::from_secs(120);

/// The environment variable that sets that limit, in seconds.
pub const DEADLINE_VAR: &str = "STRATA_NODE_DEADLINE";

fn deadline() -> Result<Duration> {
    let Some(value) = std::env::var_os(DEADLINE_VAR) else {
        return Ok(DEADLINE);
    };
    value
        .to_str()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
        .with_context(|| {
            format!(
                "{DEADLINE_VAR}={}: not a number of seconds",
                shown(&value.to_string_lossy())
            )
        })
}

/// `worker` started so that it is killed when `deadline` has passed
/// (`timeout`, its whole process group: the worker's fuse2fs and the
/// libostree process with it; the last resort, see [`WORKER_GRACE`]), and
/// dies with this process
/// (`setpriv --pdeathsig`: `timeout` gone, the worker's own death signal
/// follows).
fn with_deadline(worker: &Command, deadline: Duration) -> Result<Command> {
    strata_process::require("timeout")?;
    strata_process::require("setpriv")?;
    let mut cmd = killed_after(deadline);
    cmd.arg(worker.get_program()).args(worker.get_args());
    for (k, v) in worker.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    Ok(cmd)
}

/// `setpriv --pdeathsig KILL -- timeout --signal=KILL Ns`, the program
/// and its arguments to follow: killed when `limit` has passed (whole
/// seconds, rounded up: never before it) or when this process dies.
/// `timeout` passes on no death signal: what it runs needs its own.
fn killed_after(limit: Duration) -> Command {
    let secs = (limit.as_secs() + u64::from(limit.subsec_nanos() > 0)).max(1);
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL", "--", "timeout", "--signal=KILL"])
        .arg(format!("{secs}s"));
    cmd
}

/// A GPT partition: its name and where it starts, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    pub offset: u64,
}

/// The partitions of a disk image, from its partition table (`sfdisk`).
pub fn partitions(disk: &Path) -> Result<Vec<Partition>> {
    strata_process::require("sfdisk")?;
    let out = strata_process::stdout(Command::new("sfdisk").arg("--json").arg(disk))
        .with_context(|| format!("reading the partition table of {}", disk.display()))?;
    let table: serde_json::Value =
        serde_json::from_str(&out).context("reading sfdisk's JSON output")?;
    let table = &table["partitiontable"];
    let sector = table["sectorsize"].as_u64().unwrap_or(512);
    let Some(list) = table["partitions"].as_array() else {
        bail!("{} has no partitions", disk.display());
    };
    list.iter()
        .map(|p| {
            let start = p["start"].as_u64().context("a partition without a start")?;
            Ok(Partition {
                name: p["name"].as_str().unwrap_or_default().to_string(),
                offset: start * sector,
            })
        })
        .collect()
}

/// Where the root filesystem, the boot filesystem and (for an update) the
/// source repository are mounted in the tmpfs that becomes libostree's
/// root: directories strata makes, never a path of the disk.
const SYSROOT: &str = "sysroot";
const BOOT_FS: &str = "bootfs";
const SOURCE: &str = "source";

/// How big that tmpfs may grow: it holds the job and its answer, and
/// anything libostree would write through a link of the disk that leads
/// out of it (which the layout check refuses first).
const ROOT_TMPFS_SIZE: u64 = 1 << 20;

/// What the process in the disk's own root does: check what the action
/// needs (on the filesystems opened read-only), or do it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Check,
    Work,
}

/// The job of the process that runs libostree, in the disk's own root:
/// the action, its repository path as seen from there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InRootJob {
    pub stage: Stage,
    pub action: NodeAction,
}

/// The worker side of a [`NodeJob`].
pub(crate) fn run_job(job: &NodeJob) -> Result<NodeState> {
    if crate::deploy::in_initial_user_namespace()? {
        bail!("refusing to deploy outside a user namespace (it could freeze a host filesystem)");
    }
    let ends = Instant::now() + Duration::from_secs(job.deadline_secs);
    raw_disk(&job.disk)?;
    own_root::make_private().context("making this worker's mounts private")?;
    // Checked read-only first: a refusal leaves the disk's bytes as they
    // were (opening a filesystem for writing records a mount in it).
    in_own_root(job, Stage::Check, ends)?;
    in_own_root(job, Stage::Work, ends)
}

/// Builds the disk's own root on a tmpfs at the job's mountpoint, checks
/// the disk's layout, and runs `stage` in a process that has nothing else.
fn in_own_root(job: &NodeJob, stage: Stage, ends: Instant) -> Result<NodeState> {
    let top = &job.mountpoint;
    own_root::mount_tmpfs(top, ROOT_TMPFS_SIZE)
        .with_context(|| format!("mounting a tmpfs on {}", top.display()))?;
    let result = with_filesystems(job, stage, ends);
    let off = own_root::detach(top).with_context(|| format!("unmounting {}", top.display()));
    let value = result?;
    off?;
    Ok(value)
}

fn with_filesystems(job: &NodeJob, stage: Stage, ends: Instant) -> Result<NodeState> {
    let top = &job.mountpoint;
    for dir in [SYSROOT, BOOT_FS, SOURCE] {
        let dir = top.join(dir);
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    host_files(top)?;
    let read_only = stage == Stage::Check;
    let root = Fuse2fs::mount(&job.disk, job.root_offset, &top.join(SYSROOT), read_only)?;
    let boot = match Fuse2fs::mount(&job.disk, job.boot_offset, &top.join(BOOT_FS), read_only) {
        Ok(b) => b,
        Err(e) => {
            let _ = Fuse2fs::end_all([root], &job.disk);
            return Err(e);
        }
    };
    let result = assemble(job).and_then(|action| in_root_process(top, stage, action, ends));
    // Taken off whatever happened (the root filesystem with the boot one
    // bound on its /boot): fuse2fs writes what it holds when its
    // filesystem ends.
    let ended = Fuse2fs::end_all([root, boot], &job.disk);
    let value = result?;
    ended?;
    Ok(value)
}

/// The devices libostree's children open (glib's spawn opens
/// `/dev/null`; bwrap binds these into its sandbox). `tty` is there as a
/// name only: `/dev/null` is bound on it ([`host_files`]).
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// The program libostree runs to rebuild a deployment's SELinux policy
/// (`semodule` in the new deployment, in a sandbox of its own).
const BWRAP: &str = "/usr/bin/bwrap";

/// What of the host the process in the disk's own root has, each file on
/// its own: mountpoints for its procfs and bwrap's base; the devices of
/// [`DEVICES`], writable as devices are (`/dev/tty` is `/dev/null`: no
/// terminal of the host); and [`BWRAP`] with its libraries, read-only
/// (what libostree ran before the disk was isolated, the host's).
fn host_files(top: &Path) -> Result<()> {
    // bwrap mounts its own base on /tmp, and libostree has it bind these
    // of /sys into its sandbox (semodule needs none of them: empty here).
    for dir in [
        "proc",
        "tmp",
        "sys/block",
        "sys/bus",
        "sys/class",
        "sys/dev",
        "sys/devices",
    ] {
        std::fs::create_dir_all(top.join(dir))
            .with_context(|| format!("creating {}/{dir}", top.display()))?;
    }
    for name in DEVICES {
        let device = Path::new("/dev").join(if name == "tty" { "null" } else { name });
        if device.exists() {
            own_root::bind_file(&device, &top.join("dev").join(name), false)
                .with_context(|| format!("binding {}", device.display()))?;
        }
    }
    if !Path::new(BWRAP).exists() {
        return Ok(());
    }
    let mut files = vec![PathBuf::from(BWRAP)];
    let ldd = strata_process::stdout(Command::new("ldd").arg(BWRAP))
        .with_context(|| format!("listing the libraries of {BWRAP}"))?;
    files.extend(
        ldd.split_whitespace()
            .filter(|w| w.starts_with('/'))
            .map(PathBuf::from),
    );
    for file in files {
        let source = std::fs::canonicalize(&file).with_context(|| format!("{}", file.display()))?;
        let target = top.join(file.strip_prefix("/").unwrap_or(&file));
        own_root::bind_file(&source, &target, true)
            .with_context(|| format!("binding {} read-only", file.display()))?;
    }
    Ok(())
}

/// Checks that the filesystems are the disk's root and boot ones and
/// that every directory libostree writes is a directory of the disk,
/// binds the boot filesystem on the root one's `/boot` (the directory
/// itself, through its descriptor), and the source repository read-only
/// into the tmpfs. The action as the process in that root sees it.
fn assemble(job: &NodeJob) -> Result<NodeAction> {
    let top = &job.mountpoint;
    let open = |dir: &str| {
        let path = top.join(dir);
        std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))
    };
    let (root, boot) = (open(SYSROOT)?, open(BOOT_FS)?);
    // The partition names say which is which; a disk whose names are
    // swapped, or whose filesystems are not these, ends here.
    Tree(&root).real_dir("ostree/deploy").map_err(|e| {
        e.context(format!(
            "the partition named {ROOT_LABEL:?} is not an ostree root filesystem"
        ))
    })?;
    Tree(&boot).loader().map_err(|e| {
        e.context(format!(
            "the partition named {BOOT_LABEL:?} is not an ostree boot filesystem"
        ))
    })?;
    let target = Tree(&root).real_dir("boot")?;
    own_root::bind_onto(&top.join(BOOT_FS), &target)
        .context("binding the boot filesystem on the root filesystem's /boot")?;
    drop(target);
    check_layout(&Tree(&root))?;
    Ok(match &job.action {
        NodeAction::Deploy {
            repo,
            commit,
            origin_image,
        } => {
            own_root::bind_read_only(repo, &top.join(SOURCE))
                .with_context(|| format!("binding {} read-only", repo.display()))?;
            NodeAction::Deploy {
                repo: Path::new("/").join(SOURCE),
                commit: commit.clone(),
                origin_image: origin_image.clone(),
            }
        }
        NodeAction::Rollback => NodeAction::Rollback,
    })
}

/// Runs `stage` in a process of its own mount namespace whose root is the
/// tmpfs at `top` ([`in_root`]), with this worker's program; its answer.
/// The job and the answer are files of that tmpfs, named relative to
/// the process's directory, which is `top` before it pivots and `/` after.
fn in_root_process(
    top: &Path,
    stage: Stage,
    action: NodeAction,
    ends: Instant,
) -> Result<NodeState> {
    let job = Job::NodeInRoot(InRootJob { stage, action });
    std::fs::write(top.join("job.json"), serde_json::to_vec(&job)?)
        .with_context(|| format!("writing {}/job.json", top.display()))?;
    // This worker was started as PROGRAM ARGS… JOB OUTCOME (see
    // `strata_process::worker`): the same program and arguments serve
    // this job.
    let args: Vec<_> = std::env::args_os().collect();
    let leading = args
        .get(1..args.len().saturating_sub(2))
        .unwrap_or_default();
    let exe = std::env::current_exe().context("finding this worker's program")?;
    // Killed at the run's deadline (a hostile disk can make libostree
    // wait forever), and with this worker. Its own pid namespace, so that
    // its procfs shows it alone, and no network.
    let status = killed_after(ends.saturating_duration_since(Instant::now()))
        .args(["setpriv", "--pdeathsig", "KILL", "--", "unshare"])
        .args([
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--net",
            "--ipc",
        ])
        .args(["--propagation", "private", "--"])
        // A new session: no controlling terminal. (Not a process group
        // leader, it does not fork: the death signal stays.)
        .arg("setsid")
        .arg(exe)
        .args(leading)
        .args(["job.json", "outcome.json"])
        .current_dir(top)
        // GIO's default VFS would otherwise look for gvfs on the session
        // bus: a connection to the host made before the pivot.
        .env("GIO_USE_VFS", "local")
        .stdin(Stdio::null())
        .status()
        .context("starting the process in the disk's own root")?;
    let outcome = std::fs::read(top.join("outcome.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Outcome<NodeState>>(&b).ok());
    match outcome {
        Some(Outcome::Ok { value }) if status.success() => Ok(value),
        Some(Outcome::Err { message }) => bail!("{message}"),
        _ => bail!("the process in the disk's own root ended ({status}) without an answer"),
    }
}

/// The process in the disk's own root: pivots into the tmpfs it was
/// started in (its current directory) and runs `job` there with libostree.
pub(crate) fn in_root(job: &InRootJob) -> Result<NodeState> {
    if crate::deploy::in_initial_user_namespace()? {
        bail!("refusing to change a root outside a user namespace");
    }
    // Started by `setsid`: a session of its own, with no controlling
    // terminal (strata's is nothing libostree or what it runs may open).
    ensure!(
        rustix::process::getsid(None).ok() == Some(rustix::process::getpid()),
        "refusing to run libostree in strata's session"
    );
    let here = rustix::fs::statfs(".").context("reading this directory's filesystem")?;
    ensure!(
        here.f_type == TMPFS_MAGIC,
        "refusing to pivot into a directory that is not a tmpfs"
    );
    // GIO loads its modules from the host's library directory the first
    // time its default VFS is asked for: while there still is one.
    let _ = gio::Vfs::default();
    own_root::mount_proc(Path::new("proc")).context("mounting a procfs")?;
    own_root::enter_current_dir().context("entering the disk's own root")?;
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(Path::new("/").join(SYSROOT))));
    sysroot
        .load(gio::Cancellable::NONE)
        .context("loading the disk's sysroot")?;
    match job.stage {
        Stage::Check => {
            check(&sysroot, &job.action)?;
            if let NodeAction::Deploy { repo, commit, .. } = &job.action {
                verify_held_objects(repo, &sysroot.repo(), commit)?;
            }
            state(&sysroot)
        }
        Stage::Work => node_work(&sysroot, &job.action),
    }
}

/// Checks that every object of `commit` (as the source repository at
/// `source` lists them) that the disk's repository already holds has the
/// content its name says. A pull skips what a repository has without
/// reading it: a disk holding a tree of its own under the names of the
/// new commit's objects would have that tree deployed, and its programs
/// (semodule) run by libostree.
fn verify_held_objects(source: &Path, node_repo: &ostree::Repo, commit: &str) -> Result<()> {
    let cancel = gio::Cancellable::NONE;
    let source_repo = ostree::Repo::new(&gio::File::for_path(source));
    source_repo
        .open(cancel)
        .with_context(|| format!("opening the repository {}", source.display()))?;
    let mut objects: Vec<_> = source_repo
        .traverse_commit(commit, 0, cancel)
        .with_context(|| format!("listing the objects of {commit}"))?
        .into_iter()
        .map(|o| (o.checksum().to_string(), o.object_type()))
        .collect();
    objects.sort_by(|a, b| a.0.cmp(&b.0));
    for (checksum, kind) in objects {
        let what = || format!("{} {checksum}", ostree::object_type_to_string(kind));
        let held = node_repo
            .has_object(kind, &checksum, cancel)
            .with_context(|| format!("looking for {} in the disk's repository", what()))?;
        if !held {
            continue;
        }
        node_repo
            .fsck_object(kind, &checksum, cancel)
            .map_err(|e| {
                anyhow::anyhow!(
                    "the disk's repository holds {} with other content than its name says ({})",
                    what(),
                    first_line(e.message(), 300)
                )
            })?;
    }
    Ok(())
}

/// `TMPFS_MAGIC` of statfs(2).
const TMPFS_MAGIC: rustix::fs::FsWord = 0x0102_1994;

/// What `action` needs of the sysroot; its current deployment.
fn check(sysroot: &ostree::Sysroot, action: &NodeAction) -> Result<ostree::Deployment> {
    let deployments = sysroot.deployments();
    let Some(current) = deployments.first() else {
        bail!("the disk's sysroot has no deployment");
    };
    if *action == NodeAction::Rollback {
        ensure!(
            deployments.len() >= 2,
            "the disk has no rollback deployment"
        );
    }
    Ok(current.clone())
}

fn node_work(sysroot: &ostree::Sysroot, action: &NodeAction) -> Result<NodeState> {
    let cancel = gio::Cancellable::NONE;
    let current = check(sysroot, action)?;
    match action {
        NodeAction::Deploy {
            repo,
            commit,
            origin_image,
        } => {
            let stateroot = current.osname();
            let node_repo = sysroot.repo();
            // The node's own configuration stays as the disk has it; only
            // this process skips fsync (the image is written back whole).
            node_repo.set_disable_fsync(true);
            crate::deploy::copy_commit(repo, &node_repo, commit)?;
            let origin = glib::KeyFile::new();
            origin.set_string("origin", "container-image-reference", origin_image);
            // As rpm-ostree: the merge deployment gives the kernel
            // arguments and the /etc to carry over.
            let merge = sysroot.merge_deployment(Some(stateroot.as_str()));
            let new = sysroot
                .deploy_tree_with_options(
                    Some(stateroot.as_str()),
                    commit,
                    Some(&origin),
                    merge.as_ref(),
                    None,
                    cancel,
                )
                .with_context(|| format!("deploying {commit}"))?;
            sysroot
                .simple_write_deployment(
                    Some(stateroot.as_str()),
                    &new,
                    merge.as_ref(),
                    ostree::SysrootSimpleWriteDeploymentFlags::NONE,
                    cancel,
                )
                .context("writing the deployments")?;
        }
        NodeAction::Rollback => {
            let mut order = sysroot.deployments();
            order.swap(0, 1);
            sysroot
                .write_deployments(&order, cancel)
                .context("writing the deployments")?;
        }
    }
    sysroot
        .load(cancel)
        .context("reloading the disk's sysroot")?;
    state(sysroot)
}

fn state(sysroot: &ostree::Sysroot) -> Result<NodeState> {
    let repo = sysroot.repo();
    let mut out = Vec::new();
    for d in sysroot.deployments() {
        let commit = d.csum().to_string();
        let version = repo
            .load_commit(&commit)
            .ok()
            .and_then(|(v, _)| {
                glib::VariantDict::new(Some(&v.child_value(0)))
                    .lookup::<String>("version")
                    .ok()
            })
            .flatten();
        let bls = d.bootconfig();
        let field = |k: &str| {
            bls.as_ref()
                .and_then(|b| b.get(k))
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        out.push(NodeDeployment {
            stateroot: d.osname().to_string(),
            commit,
            version,
            title: field("title"),
            options: field("options"),
        });
    }
    Ok(NodeState { deployments: out })
}
