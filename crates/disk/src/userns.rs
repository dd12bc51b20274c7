//! The user namespace a disk build does its sysroot work in.
//!
//! A deployed sysroot holds files the image gives to system users
//! (polkit's rules.d belongs to polkitd, ssh-keysign to the ssh_keys
//! group). Creating, reading, clamping and removing them needs a namespace
//! in which those ids exist, so every step that touches the sysroot runs in
//! a child process started through [`Namespace::run`]: the deployment, each
//! ext4 filesystem written from it (which records owners as the namespace
//! sees them; see the `ext4` module) and the
//! removal. Each child gets a fresh namespace with the same [`IdMap`], so
//! all of them see the same owners. As root the map is the identity, so
//! only the deployment (which must never run in the initial namespace)
//! needs a child; as root of a pod's user namespace that child needs only
//! a mount namespace of its own.
//!
//! The child is the caller's worker command (its own executable with a
//! hidden subcommand, or this crate's test worker) with two files appended:
//! the [`Job`] as JSON in, the outcome as JSON out. It calls
//! [`worker_main`].
//!
//! What it must not do: touch the sysroot from the parent when the map is
//! not the identity (a build as an ordinary user cannot read or remove what
//! belongs to its subordinate ids).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strata_process::worker::{Isolation, JobError, Worker};

pub use strata_process::userns::IdMap;

use crate::deploy::{DeployJob, Deployed};
use crate::fs::Ext4;
use crate::node::{NodeJob, NodeState};

/// One piece of sysroot work, done by the worker in the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "snake_case")]
pub enum Job {
    /// Deploy a commit; answers [`Deployed`].
    Deploy(DeployJob),
    /// Clamp the source tree's times, then write the filesystem.
    Ext4(Ext4),
    /// Remove a tree (a sysroot has read-only directories).
    Remove { path: PathBuf },
    /// Update or roll back a node's disk; answers [`NodeState`].
    Node(NodeJob),
    /// A node job's libostree work, in the disk's own root (started by
    /// the worker of a [`Job::Node`]); answers [`NodeState`].
    NodeInRoot(crate::node::InRootJob),
    /// The live initramfs, by the image's dracut in its deployment.
    LiveInitramfs(crate::live::InitramfsJob),
    /// Clamp a tree's times, then write its squashfs.
    Squashfs(crate::live::SquashfsJob),
}

/// Runs [`Job`]s through a worker command, each in a fresh namespace.
#[derive(Debug)]
pub struct Namespace<'a> {
    pub map: IdMap,
    pub worker: &'a Command,
    /// Where each job's request and answer are written: the build's
    /// staging directory, so that a killed build leaves them in the
    /// workdir, for its next writer to remove.
    pub scratch: &'a Path,
}

impl Namespace<'_> {
    /// Runs `job` in a child; its answer, or the error it reported. As
    /// root, only a deployment needs the namespace (every owner is already
    /// the image's): the other jobs run here, without a process to start.
    pub fn run<T: DeserializeOwned>(&self, job: &Job) -> Result<T> {
        if matches!(self.map, IdMap::Identity { .. })
            && !matches!(job, Job::Deploy(_) | Job::Node(_) | Job::NodeInRoot(_))
        {
            return serde_json::from_value(run_job(job)?).context("reading the job's answer");
        }
        let mut worker = Worker::new(self.worker.get_program());
        worker.args = self.worker.get_args().map(Into::into).collect();
        // No syncfs()/sync() after a deployment: with FIFREEZE refused,
        // libostree falls back to a sync() of the whole machine, which
        // waits for every other process's dirty data. The sysroot is
        // scratch space (see `deploy`).
        worker
            .envs
            .push(("OSTREE_SYSROOT_OPTS".into(), "skip-sync".into()));
        for (k, v) in self.worker.get_envs() {
            if let Some(v) = v {
                worker.envs.push((k.into(), v.into()));
            }
        }
        // Already in a user namespace someone else made (a pod's, with
        // hostUsers: false) as its root: a mount namespace is enough, and
        // needs no new user namespace, whose root would get no
        // capabilities under no_new_privs (allowPrivilegeEscalation:
        // false) — a deployment needs only to be outside the host's.
        let isolation = match self.map {
            IdMap::Identity { .. } if !strata_process::userns::in_initial_namespace() => {
                Isolation::Mount
            }
            _ => Isolation::User(self.map.clone()),
        };
        match strata_process::worker::run(&worker, &isolation, self.scratch, job) {
            Ok(value) => Ok(value),
            Err(JobError::Failed(message)) if message.contains("chown") => bail!(
                "{message} (an owner of the image's files {})",
                self.map.advice()
            ),
            Err(JobError::Failed(message)) => bail!("{message}"),
            Err(e) => Err(e).context("the namespaced worker failed"),
        }
    }
}

/// The child side: `ARGS = JOB OUTCOME`. Exit 0 when the job worked.
pub fn worker_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    strata_process::worker::serve(args, |job: Job| run_job(&job).map_err(|e| format!("{e:#}")))
}

fn run_job(job: &Job) -> Result<serde_json::Value> {
    Ok(match job {
        Job::Deploy(job) => {
            let deployed: Deployed = crate::deploy::deploy(job)?;
            serde_json::to_value(deployed)?
        }
        Job::Node(job) => {
            let state: NodeState = crate::node::run_job(job)?;
            serde_json::to_value(state)?
        }
        Job::NodeInRoot(job) => {
            let state: NodeState = crate::node::in_root(job)?;
            serde_json::to_value(state)?
        }
        Job::Ext4(fs) => {
            crate::ext4::write(fs)?;
            serde_json::Value::Null
        }
        Job::LiveInitramfs(job) => {
            crate::live::make_initramfs(job)?;
            serde_json::Value::Null
        }
        Job::Squashfs(job) => {
            crate::live::make_squashfs(job)?;
            serde_json::Value::Null
        }
        // Root of the host or of the namespace: read-only directories do
        // not stop it (CAP_DAC_OVERRIDE), so no chmod walk first.
        Job::Remove { path } => {
            if path.exists() {
                std::fs::remove_dir_all(path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
            serde_json::Value::Null
        }
    })
}
