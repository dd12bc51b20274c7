//! Running an install in a child process.
//!
//! Why it exists: libdnf is process-global and rpm takes a per-process lock on
//! the rpmdb, so a process runs one [`crate::Dnf`] at a time. Stages that
//! install into several roots at once (derive builds one layer per OpenShift
//! release) run each install in its own process: the parent describes the
//! work as an [`InstallJob`], [`run_in_child`] starts the caller's own binary
//! with a hidden subcommand, and that subcommand calls [`serve_child`].
//!
//! The protocol is strata's one worker protocol
//! ([`strata_process::worker`]): the job as JSON in, the outcome as JSON
//! out, the child's output (rpm scriptlet output included) captured and
//! logged at debug level, its tail in the error when the child fails
//! without saying why.
//!
//! What it must not do: decide how the child is started. The caller passes
//! a ready [`Worker`] (its own executable and hidden subcommand).

use std::ffi::OsString;
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use strata_process::worker::{Isolation, JobError, Worker};

use crate::dnf::{Dnf, InstallReport};
use crate::error::{Error, Result};
use crate::options::{DepsolveRequest, DnfOptions, RepoConfig};

/// Everything needed to run one install, in any process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InstallJob {
    pub options: DnfOptions,
    pub repos: Vec<RepoConfig>,
    pub request: DepsolveRequest,
    /// The NEVRAs the caller resolved and checked (its policy, its plan):
    /// the install must resolve to exactly these, or fail before it
    /// installs anything.
    /// Empty: whatever the request resolves to.
    #[serde(default)]
    pub expected: Vec<String>,
    /// The time librpm stamps installed headers with (it reads
    /// `SOURCE_DATE_EPOCH`): [`run_in_child`] sets it in the child's
    /// environment, so no process changes its own.
    #[serde(default)]
    pub source_date_epoch: Option<u64>,
}

impl InstallJob {
    pub fn new(options: DnfOptions, repos: Vec<RepoConfig>, request: DepsolveRequest) -> Self {
        InstallJob {
            options,
            repos,
            request,
            expected: Vec::new(),
            source_date_epoch: None,
        }
    }

    /// The job, held to installing exactly `nevras`.
    pub fn expecting(mut self, nevras: impl IntoIterator<Item = String>) -> Self {
        self.expected = nevras.into_iter().collect();
        self.expected.sort();
        self
    }

    /// The job, its headers stamped with `seconds`.
    pub fn source_date_epoch(mut self, seconds: u64) -> Self {
        self.source_date_epoch = Some(seconds);
        self
    }

    /// Runs the job in this process (blocking while another `Dnf` exists).
    /// `SOURCE_DATE_EPOCH` must already be this process's when the job
    /// sets it.
    pub fn run(&self) -> Result<InstallReport> {
        if let Some(sde) = self.source_date_epoch {
            let have = std::env::var("SOURCE_DATE_EPOCH").ok();
            if have.as_deref() != Some(sde.to_string().as_str()) {
                return Err(Error::InvalidOptions(format!(
                    "the install must stamp headers with SOURCE_DATE_EPOCH={sde}, and this \
                     process has {have:?}: run it with run_in_child"
                )));
            }
        }
        let mut dnf = Dnf::new(self.options.clone(), self.repos.clone())?;
        let resolved = dnf.depsolve(&self.request)?;
        // Held to the plan before anything is downloaded or installed.
        if !self.expected.is_empty() {
            let mut resolved_to: Vec<String> = resolved
                .packages()
                .iter()
                .map(|p| p.nevra.clone())
                .collect();
            resolved_to.sort_unstable();
            if resolved_to != self.expected {
                return Err(Error::Unplanned {
                    resolved: resolved_to,
                    planned: self.expected.clone(),
                });
            }
        }
        resolved.install()
    }
}

/// Runs `job` in a child started from `worker`, which must serve it with
/// [`serve_child`]. The job's files (its install root and rpm macros
/// among them) are written under `scratch`: a staging directory of the
/// caller's workdir, so that a build killed mid-install leaves them where
/// the workdir's next writer removes abandoned staging, not in the host's
/// `/tmp`.
pub fn run_in_child(
    worker: &Worker,
    scratch: &std::path::Path,
    job: &InstallJob,
) -> Result<InstallReport> {
    let mut worker = worker.clone();
    if let Some(sde) = job.source_date_epoch {
        worker
            .envs
            .push(("SOURCE_DATE_EPOCH".into(), sde.to_string().into()));
    }
    tracing::debug!(root = %job.options.install_root.display(), "starting dnf child");
    strata_process::worker::run(&worker, &Isolation::Plain, scratch, job).map_err(|e| match e {
        JobError::Failed(message) => Error::Child {
            status: "failed".to_string(),
            message,
        },
        other => Error::Child {
            status: "did not finish".to_string(),
            message: other.to_string(),
        },
    })
}

/// The child side: `ARGS = JOB OUTCOME`; serves the job (see
/// [`strata_process::worker::serve`]).
pub fn serve_child(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    strata_process::worker::serve(args, |job: InstallJob| {
        job.run().map_err(|e| error_chain(&e))
    })
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_round_trips() {
        let job = InstallJob::new(
            DnfOptions::new("/r", "/c", "8"),
            vec![RepoConfig::new("base", "file:///b").with_gpgkey("/k")],
            DepsolveRequest::install(["bash"]),
        );
        let back: InstallJob = serde_json::from_str(&serde_json::to_string(&job).unwrap()).unwrap();
        assert_eq!(job, back);
    }
}
