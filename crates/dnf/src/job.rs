//! Running an install in a child process.
//!
//! Why it exists: libdnf is process-global and rpm takes a per-process lock on
//! the rpmdb, so a process runs one [`crate::Dnf`] at a time. Stages that
//! install into several roots at once (derive builds one layer per OpenShift
//! release) run each install in its own process: the parent describes the
//! work as an [`InstallJob`], [`run_in_child`] starts the caller's own binary
//! with a hidden subcommand, and that subcommand calls [`serve_child`].
//!
//! The protocol is two files: the job as JSON, and the outcome written back
//! as JSON. The child's stdout and stderr (rpm scriptlet output included) are
//! captured, logged at debug level, and their tail is put into the error when
//! the child fails — they never reach the parent's stdout, which stays clean
//! for `--json` results.
//!
//! What it must not do: decide how the child is started. The caller passes a
//! ready `Command` (its own executable and hidden subcommand); this module
//! only appends the two file paths.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

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
}

impl InstallJob {
    pub fn new(options: DnfOptions, repos: Vec<RepoConfig>, request: DepsolveRequest) -> Self {
        InstallJob {
            options,
            repos,
            request,
        }
    }

    /// Runs the job in this process (blocking while another `Dnf` exists).
    pub fn run(&self) -> Result<InstallReport> {
        let mut dnf = Dnf::new(self.options.clone(), self.repos.clone())?;
        dnf.install(&self.request)
    }
}

/// What the child writes back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Outcome {
    Ok { report: InstallReport },
    Err { message: String },
}

/// How many bytes of the child's output go into an error.
const OUTPUT_TAIL: usize = 4000;

/// Runs `job` in a child started from `command`, with the job file and the
/// outcome file appended as its last two arguments; the child must call
/// [`serve_child`] with them.
pub fn run_in_child(mut command: Command, job: &InstallJob) -> Result<InstallReport> {
    let dir = tempfile::Builder::new()
        .prefix("strata-dnf-job-")
        .tempdir()
        .map_err(|e| Error::io("creating a temporary dir for a dnf job", e))?;
    let job_path = dir.path().join("job.json");
    let outcome_path = dir.path().join("outcome.json");
    let text = serde_json::to_vec_pretty(job)
        .map_err(|e| Error::InvalidOptions(format!("serialising job: {e}")))?;
    fs::write(&job_path, text)
        .map_err(|e| Error::io(format!("writing {}", job_path.display()), e))?;

    command
        .arg(&job_path)
        .arg(&outcome_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tracing::debug!(?command, root = %job.options.install_root.display(), "starting dnf child");
    let output = command
        .output()
        .map_err(|e| Error::io(format!("starting dnf child {:?}", command.get_program()), e))?;
    let mut combined = String::from_utf8_lossy(&output.stdout).into_owned();
    combined.push_str(&String::from_utf8_lossy(&output.stderr));
    tracing::debug!(status = %output.status, output = %combined, "dnf child finished");

    let outcome = fs::read(&outcome_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Outcome>(&b).ok());
    match (outcome, output.status.success()) {
        (Some(Outcome::Ok { report }), true) => Ok(report),
        (Some(Outcome::Err { message }), _) => Err(Error::Child {
            status: format!("failed ({})", output.status),
            message,
        }),
        (_, _) => Err(Error::Child {
            status: format!("exited without a result ({})", output.status),
            message: tail(&combined, OUTPUT_TAIL).to_string(),
        }),
    }
}

/// The child side: reads the job, runs it, writes the outcome. Returns `Err`
/// only when the files cannot be read or written; a failed install is
/// reported through the outcome file (and the caller should then exit
/// non-zero, which `run_in_child` tolerates).
pub fn serve_child(job_path: &Path, outcome_path: &Path) -> Result<bool> {
    let bytes =
        fs::read(job_path).map_err(|e| Error::io(format!("reading {}", job_path.display()), e))?;
    let job: InstallJob = serde_json::from_slice(&bytes)
        .map_err(|e| Error::InvalidOptions(format!("parsing {}: {e}", job_path.display())))?;
    let (outcome, ok) = match job.run() {
        Ok(report) => (Outcome::Ok { report }, true),
        Err(e) => (
            Outcome::Err {
                message: error_chain(&e),
            },
            false,
        ),
    };
    let text = serde_json::to_vec(&outcome)
        .map_err(|e| Error::InvalidOptions(format!("serialising outcome: {e}")))?;
    fs::write(outcome_path, text)
        .map_err(|e| Error::io(format!("writing {}", outcome_path.display()), e))?;
    Ok(ok)
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

/// The last `max` bytes of `s`, cut at a character boundary.
pub(crate) fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_cuts_at_char_boundary() {
        assert_eq!(tail("abc", 10), "abc");
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("aé", 1), "");
        assert_eq!(tail("aéb", 2), "b");
    }

    #[test]
    fn outcome_json_shape() {
        let o = Outcome::Err {
            message: "boom".into(),
        };
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            r#"{"outcome":"err","message":"boom"}"#
        );
    }

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

    #[test]
    fn child_without_outcome_reports_its_output() {
        let job = InstallJob::new(
            DnfOptions::new("/r", "/c", "8"),
            vec![],
            DepsolveRequest::install(["bash"]),
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo scriptlet noise; echo oops >&2; exit 3", "sh"]);
        let err = run_in_child(cmd, &job).unwrap_err().to_string();
        assert!(err.contains("exited without a result"), "{err}");
        assert!(err.contains("oops"), "{err}");
    }
}
