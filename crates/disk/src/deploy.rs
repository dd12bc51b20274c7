//! Deploying a commit into a fresh sysroot through libostree, as a job of
//! the namespaced worker ([`crate::userns`]).
//!
//! Why a namespace: a sysroot deployment freezes (FIFREEZE) the filesystem
//! that holds the sysroot's /boot. In a user namespace that call is refused,
//! and /boot is a private tmpfs besides, so the host's filesystems are never
//! touched.
//!
//! The sysroot itself may be a tmpfs of the same namespace ([`InMemory`]):
//! the job then writes the first disk's root filesystem before it ends.
//!
//! What it must not do: run a deployment outside a user namespace.

use std::path::{Path, PathBuf};
use std::process::Command;

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
    pub stateroot: strata_oscontainer::OsName,
    pub kargs: Vec<String>,
    /// `container-image-reference` of the origin file.
    pub origin_image: String,
    /// The aleph file, written at the sysroot's top.
    pub aleph: String,
    /// The sysroot in memory, and what must leave it before the job ends.
    pub in_memory: Option<InMemory>,
}

/// A sysroot on a tmpfs of the job's own mount namespace instead of the
/// workdir's filesystem: the pulled objects (the image's whole content)
/// are never written back to a disk, and the sysroot goes with the
/// namespace instead of being removed file by file (which waits on that
/// writeback: most of a build's time on a busy machine). Everything that
/// reads the sysroot is done before the job ends: the root filesystem is
/// written into a new disk file, and the files the disks' boot files are
/// made of are copied out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InMemory {
    /// Bytes the tmpfs may hold.
    pub limit: u64,
    /// The raw disk to create, sized as [`crate::layout::plan`] plans it
    /// for the content, holding only its root filesystem.
    pub disk: PathBuf,
    pub sector_size: u64,
    /// The disk's size, when not content + headroom.
    pub size: Option<u64>,
    /// The root filesystem's UUID.
    pub root_uuid: String,
    /// Times are clamped to this.
    pub epoch: i64,
    /// Where [`BOOT_SOURCES`] of the deployment are copied, at the same
    /// paths.
    pub boot_sources: PathBuf,
}

/// What the disks' boot files are read from in a deployment
/// (`bootfiles`): the EFI payload, BIOS GRUB's files and os-release.
pub const BOOT_SOURCES: &[&str] = &[
    crate::bootloader::EFI_DIR,
    crate::grub_pc::MODULE_DIR,
    "usr/lib/os-release",
    "etc/os-release",
];

/// What the deployment produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    /// The deployment's directory, relative to the sysroot.
    pub deployment: PathBuf,
    /// Bytes the sysroot's files take ([`crate::fs::content_size`]).
    pub content_size: u64,
}

/// Copies the objects of `commit` from the repository at `from` into
/// `into`: a local pull, which libostree runs as `ostree pull-local` does
/// (objects imported with trust, in parallel).
pub(crate) fn copy_commit(from: &Path, into: &ostree::Repo, commit: &str) -> Result<()> {
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
pub(crate) fn in_initial_user_namespace() -> Result<bool> {
    let map =
        std::fs::read_to_string("/proc/self/uid_map").context("reading /proc/self/uid_map")?;
    Ok(map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

pub(crate) fn deploy(job: &DeployJob) -> Result<Deployed> {
    if in_initial_user_namespace()? {
        bail!("refusing to deploy outside a user namespace (it could freeze a host filesystem)");
    }
    if let Some(mem) = &job.in_memory {
        strata_process::run(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("mode=0755,size={}", mem.limit))
                .arg("strata-sysroot")
                .arg(&job.sysroot),
        )
        .context("mounting a tmpfs on the sysroot")?;
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
        .init_osname(job.stateroot.as_str(), cancel)
        .with_context(|| format!("creating the stateroot {}", job.stateroot))?;
    let repo = sysroot.repo();
    // strata writes the GRUB configuration itself; ostree only writes BLS
    // (the node keeps `sysroot.bootloader=none`). The sysroot is thrown
    // away once its content is in the disk images: nothing it writes needs
    // to reach the disk, and fsync on a busy machine is most of a
    // deployment's time.
    repo.set_disable_fsync(true);
    let config = repo.copy_config();
    config.set_string("sysroot", "bootloader", "none");
    config.set_boolean("core", "fsync", false);
    repo.write_config(&config)
        .context("configuring the sysroot repository")?;
    copy_commit(&job.repo, &repo, &job.commit)?;
    tracing::debug!("pulled {}", job.commit);

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
            Some(job.stateroot.as_str()),
            &job.commit,
            Some(&origin),
            None,
            Some(&opts),
            cancel,
        )
        .with_context(|| format!("deploying {}", job.commit))?;
    sysroot
        .simple_write_deployment(
            Some(job.stateroot.as_str()),
            &deployment,
            None,
            ostree::SysrootSimpleWriteDeploymentFlags::NONE,
            cancel,
        )
        .context("writing the deployment")?;
    tracing::debug!("deployed {}", job.commit);
    // The configuration the node keeps, as CoreOS disks have it: without
    // this process's fsync shortcut (a node's updates must reach its
    // disk), and with a read-only sysroot (ostree-prepare-root mounts the
    // physical root read-only; the deployment's /etc and /var stay
    // writable).
    let config = repo.copy_config();
    config
        .remove_key("core", "fsync")
        .context("configuring the sysroot repository")?;
    config.set_boolean("sysroot", "readonly", true);
    repo.write_config(&config)
        .context("configuring the sysroot repository")?;
    let dirpath = sysroot.deployment_dirpath(&deployment);
    crate::fs::copy_tree(&boot, &job.boot_out)
        .context("copying the deployment's /boot out of its tmpfs")?;
    // The root filesystem has an empty /boot mount point. Lazily: the
    // sysroot still holds the mount open.
    strata_process::run(Command::new("umount").arg("--lazy").arg(&boot))
        .context("unmounting the sysroot's /boot")?;
    let aleph = job.sysroot.join(crate::meta::ALEPH_FILE);
    std::fs::write(&aleph, &job.aleph).with_context(|| format!("writing {}", aleph.display()))?;
    let deployed = Deployed {
        deployment: PathBuf::from(dirpath.as_str()),
        content_size: crate::fs::content_size(&job.sysroot)?,
    };
    if let Some(mem) = &job.in_memory {
        copy_boot_sources(&job.sysroot.join(&deployed.deployment), &mem.boot_sources)?;
        write_root(&job.sysroot, mem, deployed.content_size)?;
    }
    Ok(deployed)
}

/// [`BOOT_SOURCES`] of `deployment` copied to the same paths under `to`,
/// each resolved inside the deployment; those it lacks are left out (the
/// boot files say what is missing).
fn copy_boot_sources(deployment: &Path, to: &Path) -> Result<()> {
    for rel in BOOT_SOURCES {
        let meta = match crate::fs::open_in_root(deployment, rel) {
            Ok(f) => f.metadata()?,
            Err(_) => continue,
        };
        let dest = to.join(rel);
        if meta.is_dir() {
            crate::fs::copy_tree_in_root(deployment, rel, &dest)?;
        } else {
            crate::write(&dest, &crate::fs::read_in_root(deployment, rel)?)?;
        }
    }
    Ok(())
}

/// The disk file of `mem`, with the sysroot as its root filesystem.
fn write_root(sysroot: &Path, mem: &InMemory, content_size: u64) -> Result<()> {
    let lay = crate::layout::plan(
        mem.sector_size,
        crate::layout::root_size_for(content_size),
        mem.size,
        &crate::Uuids::default(),
    )?;
    let file = std::fs::File::create(&mem.disk)
        .with_context(|| format!("creating {}", mem.disk.display()))?;
    file.set_len(lay.disk_size)?;
    drop(file);
    crate::ext4::write(&crate::fs::Ext4 {
        disk: mem.disk.clone(),
        offset: lay.root().start,
        size: lay.root().size,
        label: "root".to_string(),
        uuid: mem.root_uuid.clone(),
        source: sysroot.to_path_buf(),
        epoch: mem.epoch,
    })
}
