//! Running one side of a comparison as child processes and measuring it:
//! wall-clock time and peak memory.
//!
//! Every measured step, strata's stages as much as the baselines, is a
//! process of its own started under GNU time (`/usr/bin/time -f %M`),
//! which reports the child's peak resident set from `wait4`: the largest
//! RSS any single process of that child's tree reached (the child and the
//! descendants it waited for), exact and at no sampling cost. It is not
//! the sum of processes that ran at the same time; strata's stages run
//! their helpers (the installer, the deploy worker) one at a time beside a
//! parent that mostly waits, so the largest process is what a 1 GiB limit
//! is about. strata's stages run as the `strata` binary users run, so
//! nothing of the bench's own memory counts against them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Deserialize;

/// One measured run (or several, combined).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Run {
    pub wall: Duration,
    /// Peak resident set of the largest process, bytes.
    pub rss: u64,
}

impl Run {
    /// Two steps one after the other: times add, the peak is the larger.
    pub fn then(self, next: Run) -> Run {
        Run {
            wall: self.wall + next.wall,
            rss: self.rss.max(next.rss),
        }
    }

    pub fn secs(&self) -> f64 {
        self.wall.as_secs_f64()
    }
}

/// The middle run by time of several rounds of one side, with the highest
/// peak memory of them all.
pub fn median(mut runs: Vec<Run>) -> Run {
    runs.sort_by_key(|r| r.wall);
    let rss = runs.iter().map(|r| r.rss).max().unwrap_or(0);
    Run {
        wall: runs[runs.len() / 2].wall,
        rss,
    }
}

/// Runs `cmd` under GNU time and returns the measurement and its stdout.
pub fn run(cmd: &mut Command) -> Result<(Run, String)> {
    let report = tempfile::NamedTempFile::new().context("a file for GNU time's report")?;
    let mut timed = Command::new(time()?);
    timed
        .args(["-f", "%M", "-o"])
        .arg(report.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    // Each step starts with no dirty data of earlier ones to write back
    // (the fixture just generated, the previous side's tree): writeback
    // during a step slowed the first compose of a run by half.
    strata_process::run(&mut Command::new("sync"))?;
    let start = Instant::now();
    let out = strata_process::run(&mut timed)?;
    let wall = start.elapsed();
    // The step's own log (strata's stages log their timings with
    // RUST_LOG=info), for finding where a side spends its time.
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(report.path()).context("reading GNU time's report")?;
    // The last line is the figure; a line before it says when the command
    // was killed by a signal.
    let kib: u64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("GNU time reported {text:?}"))?;
    Ok((
        Run {
            wall,
            rss: kib * 1024,
        },
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

fn time() -> Result<PathBuf> {
    let path = PathBuf::from("/usr/bin/time");
    anyhow::ensure!(
        path.exists(),
        "the bench measures peak memory with GNU time: install the Debian package `time`"
    );
    Ok(path)
}

/// The `strata` binary of this workspace's release build (`make build`).
pub fn strata() -> Result<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/strata");
    anyhow::ensure!(
        path.exists(),
        "{} is missing: `make bench` builds it (cargo build --release -p strata-cli)",
        path.display()
    );
    Ok(path)
}

/// What `strata compose --json` prints, of what the bench reads.
#[derive(Clone, Debug, Deserialize)]
pub struct Composed {
    pub image: String,
    pub digest: String,
    pub changed: bool,
    pub ostree_commit: String,
    pub inputhash: String,
    pub lockfile: PathBuf,
    pub build_dir: PathBuf,
    pub packages: usize,
}

/// `strata compose` of `manifest` into `workdir`, measured.
pub fn compose(workdir: &Path, manifest: &Path, vars: &[String]) -> Result<(Run, Composed)> {
    let mut cmd = Command::new(strata()?);
    cmd.arg("compose")
        .arg("--workdir")
        .arg(workdir)
        .arg(manifest);
    for v in vars {
        cmd.arg("--var").arg(v);
    }
    cmd.arg("--json");
    let (run, out) = self::run(&mut cmd)?;
    let composed = serde_json::from_str(&out)
        .with_context(|| format!("reading strata compose's result {out:?}"))?;
    Ok((run, composed))
}

/// `strata disk` of `image` for `platforms` (comma-separated), measured.
pub fn disk(workdir: &Path, image: &str, platforms: &str) -> Result<(Run, u64)> {
    let mut cmd = Command::new(strata()?);
    cmd.arg("disk").arg("--workdir").arg(workdir).args([
        "--image",
        image,
        "--platform",
        platforms,
        "--json",
    ]);
    let (run, out) = self::run(&mut cmd)?;
    let v: serde_json::Value = serde_json::from_str(&out)
        .with_context(|| format!("reading strata disk's result {out:?}"))?;
    let raw = v["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["format"] == "raw"))
        .and_then(|a| a["size"].as_u64())
        .unwrap_or(0);
    Ok((run, raw))
}

/// What `strata derive --json` prints, of what the bench reads.
#[derive(Clone, Debug, Deserialize)]
pub struct Derived {
    pub changed: bool,
    pub packages: Vec<String>,
    #[serde(default)]
    pub overrides: Vec<serde_json::Value>,
}

/// `strata derive` of `manifest` on `base` in `workdir`, measured.
pub fn derive(
    workdir: &Path,
    base: &str,
    manifest: &Path,
    vars: &[String],
    overrides: &[PathBuf],
) -> Result<(Run, Derived)> {
    let mut cmd = Command::new(strata()?);
    cmd.arg("derive")
        .arg("--workdir")
        .arg(workdir)
        .args(["--base", base])
        .arg(manifest);
    for v in vars {
        cmd.arg("--var").arg(v);
    }
    for o in overrides {
        cmd.arg("--override-rpm").arg(o);
    }
    cmd.arg("--json");
    let (run, out) = self::run(&mut cmd)?;
    let derived = serde_json::from_str(&out)
        .with_context(|| format!("reading strata derive's result {out:?}"))?;
    Ok((run, derived))
}

/// An in-process step's wall-clock time (its lines say so, and carry no
/// peak memory: the bench's own would count).
pub fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let start = Instant::now();
    let v = f()?;
    Ok((start.elapsed(), v))
}
