//! Deploying a commit into a fresh sysroot through libostree, as a job of
//! the namespaced worker ([`crate::userns`]).
//!
//! Why a namespace: a sysroot deployment freezes (FIFREEZE) the filesystem
//! that holds the sysroot's /boot. In a user namespace that call is refused,
//! and /boot is a private tmpfs besides, so the host's filesystems are never
//! touched.
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
}

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
    Ok(Deployed {
        deployment: PathBuf::from(dirpath.as_str()),
        content_size: crate::fs::content_size(&job.sysroot)?,
    })
}
