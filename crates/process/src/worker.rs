//! Worker processes: one piece of a stage's work done by a child.
//!
//! Why children: libdnf and rpm are process-global (rpm even chroots the
//! whole process during a transaction), releases install concurrently,
//! mounts must live in a namespace that dies with the work, and some work
//! must run in a user namespace of its own. Every stage starts its workers
//! the same way: the caller's own program with a hidden subcommand (or a
//! crate's test binary) — a [`Worker`] — with two file paths appended: the
//! job as JSON in, the outcome as JSON out. The child calls [`serve`].
//!
//! The child's stdout and stderr (rpm's scriptlet output, the worker's own
//! log) are captured and logged at debug level; they never reach the
//! parent's stdout, which stays clean for `--json` results. When the child
//! fails without saying why, the tail of that output is the error.
//!
//! What it must not do: interpret a job. The caller's types are the
//! protocol; this module only moves them and starts the child where
//! [`Isolation`] says.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::userns::IdMap;

/// How many bytes of a worker's output go into an error.
const OUTPUT_TAIL: usize = 4000;

/// How a worker is started: a program and the arguments before the two
/// file paths (`strata __derive-worker`, a test binary), and environment
/// on top of this process's (the log level, say: set here rather than in
/// this process's environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub envs: Vec<(OsString, OsString)>,
}

impl Worker {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            envs: Vec::new(),
        }
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// The program with its leading arguments and environment, ready for
    /// more.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.args);
        c.envs(self.envs.iter().map(|(k, v)| (k, v)));
        c
    }
}

/// Where a worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// A plain child, in this process's namespaces.
    Plain,
    /// A private mount namespace (`unshare --mount`; this process must be
    /// root, of the host or of its user namespace): mounts die with it.
    Mount,
    /// A fresh user and mount namespace with this map.
    User(IdMap),
}

/// A job that did not give its answer.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The worker reported the job failed; its message.
    #[error("{0}")]
    Failed(String),
    /// The worker ended without reporting: its status and the tail of its
    /// output, on one line.
    #[error("the worker {status} without reporting why; its output ends with: {tail}")]
    Silent { status: String, tail: String },
    /// Starting it, or moving the job and outcome, failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Process(#[from] crate::Error),
}

impl JobError {
    fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        JobError::Io {
            what: what.into(),
            source,
        }
    }
}

/// What a worker writes back (read by [`run`]; public for a worker that
/// starts a worker of its own by other means).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome<T> {
    Ok { value: T },
    Err { message: String },
}

/// Runs `job` in a worker started from `worker` where `isolation` says;
/// its answer. The job and outcome files go into a directory of their own
/// under `scratch` (a build's staging directory, so that a killed build
/// leaves them to its next writer to remove), removed afterwards.
pub fn run<J: Serialize, T: DeserializeOwned>(
    worker: &Worker,
    isolation: &Isolation,
    scratch: &Path,
    job: &J,
) -> Result<T, JobError> {
    let dir = tempfile::Builder::new()
        .prefix("job-")
        .tempdir_in(scratch)
        .map_err(|e| {
            JobError::io(
                format!("creating a job directory in {}", scratch.display()),
                e,
            )
        })?;
    let job_path = dir.path().join("job.json");
    let outcome_path = dir.path().join("outcome.json");
    let text =
        serde_json::to_vec_pretty(job).map_err(|e| JobError::io("serialising a job", e.into()))?;
    std::fs::write(&job_path, text)
        .map_err(|e| JobError::io(format!("writing {}", job_path.display()), e))?;
    let mut cmd = match isolation {
        Isolation::Plain => Command::new(&worker.program),
        Isolation::Mount => {
            crate::require("unshare")?;
            let mut c = Command::new("unshare");
            c.args(["--mount", "--propagation", "private", "--"])
                .arg(&worker.program);
            c
        }
        Isolation::User(map) => {
            if !matches!(map, IdMap::Own) {
                crate::userns::refuse_no_new_privs("a worker")?;
            }
            crate::require("unshare")?;
            let mut c = map.unshare();
            c.arg(&worker.program);
            c
        }
    };
    cmd.args(&worker.args)
        .arg(&job_path)
        .arg(&outcome_path)
        .envs(worker.envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let command = crate::display(&cmd);
    tracing::debug!(target: "strata::cmd", "{command}");
    let child = cmd
        .spawn()
        .map_err(|e| JobError::io(format!("starting `{command}`"), e))?;
    if let Isolation::User(map) = isolation {
        if let Err(e) = map.map_child(child.id()) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(JobError::io("mapping the worker's ids", e));
        }
    }
    let output = child
        .wait_with_output()
        .map_err(|e| JobError::io(format!("waiting for `{command}`"), e))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    tracing::debug!(status = %output.status, "worker output:\n{text}");
    let outcome = std::fs::read(&outcome_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Outcome<T>>(&b).ok());
    match outcome {
        Some(Outcome::Ok { value }) if output.status.success() => Ok(value),
        Some(Outcome::Err { message }) => Err(JobError::Failed(message)),
        _ => Err(JobError::Silent {
            status: if output.status.success() {
                "exited".to_string()
            } else {
                format!("failed ({})", output.status)
            },
            tail: one_line_tail(&text),
        }),
    }
}

/// The worker's side: `ARGS = JOB OUTCOME`. Reads the job, runs `serve_job`
/// on it, writes its answer or error; exits 0 when the job worked, 1 when
/// it failed (the outcome says why), 2 on bad arguments. The worker dies
/// with the process that started it.
pub fn serve<J, T>(
    args: impl IntoIterator<Item = OsString>,
    serve_job: impl FnOnce(J) -> Result<T, String>,
) -> ExitCode
where
    J: DeserializeOwned,
    T: Serialize,
{
    crate::die_with_parent();
    let args: Vec<OsString> = args.into_iter().collect();
    let [job, outcome] = args.as_slice() else {
        eprintln!("usage: <worker> JOB.json OUTCOME.json");
        return ExitCode::from(2);
    };
    let result = std::fs::read(job)
        .map_err(|e| format!("reading {}: {e}", Path::new(job).display()))
        .and_then(|b| {
            serde_json::from_slice::<J>(&b)
                .map_err(|e| format!("parsing {}: {e}", Path::new(job).display()))
        })
        .and_then(serve_job);
    let (out, code) = match result {
        Ok(value) => (Outcome::Ok { value }, ExitCode::SUCCESS),
        Err(message) => (Outcome::Err { message }, ExitCode::FAILURE),
    };
    match serde_json::to_vec(&out).map(|b| std::fs::write(outcome, b)) {
        Ok(Ok(())) => code,
        Ok(Err(e)) => {
            eprintln!("writing {}: {e}", Path::new(outcome).display());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("serialising the outcome: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The last lines of `s` (at most [`OUTPUT_TAIL`] bytes), joined on one
/// line: an `error:` line stays one line.
fn one_line_tail(s: &str) -> String {
    tail(s, OUTPUT_TAIL)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// How a program that runs one stage for tests (the crates' `strata-compose`,
/// `strata-derive-worker derive`, `strata-disk-worker build`) ends: the
/// result as one line of JSON on stdout and success, or one `error:` line
/// (the whole chain, `{e:#}`) and failure.
pub fn print_result<T: Serialize, E: std::fmt::Display>(result: Result<T, E>) -> ExitCode {
    match result.map(|r| serde_json::to_string(&r)) {
        Ok(Ok(json)) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("error: writing the result: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The last `max` bytes of `s`, cut at a character boundary.
pub fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
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
        assert_eq!(tail("ééé", 3), "é");
        assert_eq!(tail("abc", 10), "abc");
        assert_eq!(one_line_tail("a\n\n  b \nc\n"), "a | b | c");
    }

    #[test]
    fn a_silent_worker_reports_its_output_and_a_failed_one_its_message() {
        let scratch = tempfile::tempdir().unwrap();
        let sh = |script: &str| Worker::new("/bin/sh").arg("-c").arg(script).arg("sh");
        let err = run::<_, u32>(
            &sh("echo worker-said-this; exit 3"),
            &Isolation::Plain,
            scratch.path(),
            &"job",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("worker-said-this") && msg.contains("failed"),
            "{msg}"
        );
        // The outcome file is the second path appended.
        let err = run::<_, u32>(
            &sh(r#"printf '{"outcome":"err","message":"no room"}' > "$2"; exit 1"#),
            &Isolation::Plain,
            scratch.path(),
            &"job",
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "no room");
        let ok: u32 = run(
            &sh(r#"grep -q '"job"' "$1" && printf '{"outcome":"ok","value":7}' > "$2""#),
            &Isolation::Plain,
            scratch.path(),
            &"job",
        )
        .unwrap();
        assert_eq!(ok, 7);
        assert_eq!(
            std::fs::read_dir(scratch.path()).unwrap().count(),
            0,
            "the job files are removed"
        );
    }

    #[test]
    fn outcome_json_shape() {
        let ok = serde_json::to_value(Outcome::Ok { value: 1 }).unwrap();
        assert_eq!(ok, serde_json::json!({"outcome": "ok", "value": 1}));
        let err = serde_json::to_value(Outcome::<u8>::Err {
            message: "m".into(),
        })
        .unwrap();
        assert_eq!(err, serde_json::json!({"outcome": "err", "message": "m"}));
    }
}
