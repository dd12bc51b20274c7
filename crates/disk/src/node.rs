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
//! What it must not do: write a disk that the guest could be running (the
//! caller's business), or touch any partition other than boot and root.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ostree::gio;
use ostree::glib;
use serde::{Deserialize, Serialize};

use crate::userns::{IdMap, Job, Namespace};

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
    /// An empty directory: the root filesystem is opened here, the boot
    /// filesystem on its `/boot`.
    pub mountpoint: PathBuf,
    pub action: NodeAction,
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
    run(disk, action, &opts.worker, staging.path())
        .with_context(|| format!("deploying {} into {}", id.image, disk.display()))
}

/// Makes the rollback deployment of the raw disk `disk` the default, as
/// `rpm-ostree rollback` does.
pub fn rollback(disk: &Path, worker: Command) -> Result<NodeState> {
    let dir = disk.parent().unwrap_or(Path::new("."));
    let scratch = tempfile::Builder::new()
        .prefix(".strata-node-")
        .tempdir_in(dir)
        .with_context(|| format!("creating a scratch directory in {}", dir.display()))?;
    run(disk, NodeAction::Rollback, &worker, scratch.path())
        .with_context(|| format!("rolling back {}", disk.display()))
}

fn run(disk: &Path, action: NodeAction, worker: &Command, scratch: &Path) -> Result<NodeState> {
    strata_process::require("fuse2fs")?;
    let disk = std::fs::canonicalize(disk).with_context(|| format!("{}", disk.display()))?;
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(&disk)
        .and_then(|f| std::os::unix::fs::FileExt::read_at(&f, &mut magic, 0))
        .with_context(|| format!("reading {}", disk.display()))?;
    if read == 4 && magic == *b"QFI\xfb" {
        bail!(
            "{} is a qcow2 image: a node's disk is changed as a raw image \
             (qemu-img convert -O raw, or the metal image)",
            disk.display()
        );
    }
    let parts = partitions(&disk)?;
    let offset = |label: &str| {
        parts
            .iter()
            .find(|p| p.name == label)
            .map(|p| p.offset)
            .with_context(|| {
                format!(
                    "{} has no partition named {label:?} (not a CoreOS disk?)",
                    disk.display()
                )
            })
    };
    let mountpoint = scratch.join("sysroot");
    std::fs::create_dir_all(&mountpoint)?;
    let job = NodeJob {
        root_offset: offset(ROOT_LABEL)?,
        boot_offset: offset(BOOT_LABEL)?,
        disk,
        mountpoint,
        action,
    };
    let ns = Namespace {
        map: IdMap::for_this_process()?,
        worker,
        scratch,
    };
    ns.run(&Job::Node(job))
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

/// The worker side of a [`NodeJob`].
pub(crate) fn run_job(job: &NodeJob) -> Result<NodeState> {
    if crate::deploy::in_initial_user_namespace()? {
        bail!("refusing to deploy outside a user namespace (it could freeze a host filesystem)");
    }
    // Checked read-only first: a refusal leaves the disk's bytes as they
    // were (opening a filesystem for writing records a mount in it).
    with_sysroot(job, true, |sysroot| check(sysroot, &job.action).map(|_| ()))?;
    with_sysroot(job, false, |sysroot| node_work(sysroot, &job.action))
}

/// Runs `work` on the disk's sysroot, its filesystems opened by fuse2fs.
fn with_sysroot<T>(
    job: &NodeJob,
    read_only: bool,
    work: impl FnOnce(&ostree::Sysroot) -> Result<T>,
) -> Result<T> {
    let root = Fuse2fs::mount(&job.disk, job.root_offset, &job.mountpoint, read_only)?;
    let boot_dir = job.mountpoint.join("boot");
    let boot = match Fuse2fs::mount(&job.disk, job.boot_offset, &boot_dir, read_only) {
        Ok(b) => b,
        Err(e) => {
            let _ = root.unmount();
            return Err(e);
        }
    };
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(&job.mountpoint)));
    let result = check_layout(&job.mountpoint)
        .and_then(|()| {
            sysroot
                .load(gio::Cancellable::NONE)
                .context("loading the disk's sysroot")
        })
        .and_then(|()| work(&sysroot));
    drop(sysroot);
    // Unmounted in this order whatever happened: fuse2fs writes what it
    // holds when its filesystem is unmounted.
    let unmounted = boot.unmount().and(root.unmount());
    let value = result?;
    unmounted?;
    Ok(value)
}

/// The sysroot's own directories are directories of the disk, and
/// `/boot/loader` is ostree's link to `loader.0` or `loader.1`: libostree
/// writes through them, and a disk whose links lead out of it would have
/// it write wherever they point.
fn check_layout(sysroot: &Path) -> Result<()> {
    for dir in ["ostree", "ostree/repo", "ostree/deploy"] {
        let meta = std::fs::symlink_metadata(sysroot.join(dir));
        ensure!(
            meta.is_ok_and(|m| m.is_dir()),
            "the disk's /{dir} is not a directory of the disk (not an ostree sysroot?)"
        );
    }
    let loader = std::fs::read_link(sysroot.join("boot/loader"))
        .context("the disk's boot partition has no /loader link (not an ostree sysroot?)")?;
    ensure!(
        loader == Path::new("loader.0") || loader == Path::new("loader.1"),
        "the disk's /boot/loader points at {}, not at loader.0 or loader.1",
        loader.display()
    );
    Ok(())
}

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

/// A filesystem of the disk, opened by a fuse2fs process of this namespace.
struct Fuse2fs {
    child: Child,
    mountpoint: PathBuf,
}

impl Fuse2fs {
    fn mount(disk: &Path, offset: u64, mountpoint: &Path, read_only: bool) -> Result<Fuse2fs> {
        let ro = if read_only { ",ro" } else { "" };
        let mut child = Command::new("fuse2fs")
            .arg(disk)
            .arg(mountpoint)
            .arg("-o")
            .arg(format!("offset={offset}{ro}"))
            // In the foreground: this process waits for it to end, which
            // is when everything is written.
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .context("starting fuse2fs")?;
        let started = Instant::now();
        while !is_mount(mountpoint)? {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "fuse2fs could not open the filesystem at offset {offset} of {} ({status})",
                    disk.display()
                );
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                bail!("fuse2fs did not mount {} within 30 s", mountpoint.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(Fuse2fs {
            child,
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    fn unmount(mut self) -> Result<()> {
        strata_process::run(Command::new("umount").arg(&self.mountpoint))
            .with_context(|| format!("unmounting {}", self.mountpoint.display()))?;
        let status = self.child.wait().context("waiting for fuse2fs")?;
        ensure!(status.success(), "fuse2fs ended with {status}");
        Ok(())
    }
}

/// Whether a filesystem other than its parent's is mounted on `dir`.
fn is_mount(dir: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let stat = |p: &Path| std::fs::metadata(p).with_context(|| format!("{}", p.display()));
    Ok(stat(dir)?.dev() != stat(parent)?.dev())
}
