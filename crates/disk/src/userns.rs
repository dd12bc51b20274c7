//! The user namespace a disk build does its sysroot work in.
//!
//! A deployed sysroot holds files the image gives to system users
//! (polkit's rules.d belongs to polkitd, ssh-keysign to the ssh_keys
//! group). Creating, reading, clamping and removing them needs a namespace
//! in which those ids exist, so every step that touches the sysroot runs in
//! a child process started through [`Namespace::run`]: the deployment, each
//! `mkfs.ext4 -d` (which records owners as the namespace sees them) and the
//! removal. Each child gets a fresh namespace with the same [`IdMap`], so
//! all of them see the same owners. As root the map is the identity, so
//! only the deployment (which must never run in the initial namespace)
//! needs a child.
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
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::deploy::{DeployJob, Deployed};
use crate::fs::Ext4;
use crate::node::{NodeJob, NodeState};

/// How many ids a build as root maps onto themselves: every system and
/// regular account of a RHEL tree.
const MAPPED_IDS: u32 = 65536;

/// A range of host ids a user may map (`/etc/subuid`, `/etc/subgid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubIds {
    pub start: u32,
    pub count: u32,
}

/// How the ids of the build's namespaces map onto the host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdMap {
    /// strata runs as root: ids 0..65536 onto themselves. The parent
    /// writes the child's maps (newuidmap would want /etc/subuid entries
    /// for root), and the child waits for them ([`AWAIT_ID_MAP`]).
    Identity,
    /// A user with subordinate ids and newuidmap (package uidmap), as
    /// rootless podman uses them: the user is root, ids 1.. are its
    /// ranges.
    Subordinate { uids: SubIds, gids: SubIds },
    /// Any other user: only itself, as root. Content owned by anyone else
    /// cannot be deployed.
    Own,
}

impl IdMap {
    /// The map this process can have: [`IdMap::Identity`] as root, else
    /// [`IdMap::Subordinate`] when `/etc/subuid` and `/etc/subgid` give
    /// the user ranges and newuidmap/newgidmap are installed, else
    /// [`IdMap::Own`].
    pub fn for_this_process() -> Result<IdMap> {
        let uid = effective_id("Uid:")?;
        if uid == 0 {
            return Ok(IdMap::Identity);
        }
        let name = read_optional(Path::new("/etc/passwd"))
            .and_then(|passwd| name_of(&passwd, uid).map(str::to_string));
        let ranges = (
            read_optional(Path::new("/etc/subuid"))
                .and_then(|t| subordinate_ids(&t, name.as_deref(), uid)),
            // newgidmap, too, looks the ranges up by user name or uid.
            read_optional(Path::new("/etc/subgid"))
                .and_then(|t| subordinate_ids(&t, name.as_deref(), uid)),
        );
        let tools = strata_process::require("newuidmap").is_ok()
            && strata_process::require("newgidmap").is_ok();
        Ok(match ranges {
            (Some(uids), Some(gids)) if tools => IdMap::Subordinate { uids, gids },
            _ => IdMap::Own,
        })
    }

    /// Whether files owned by `uid`:`gid` can exist in the namespace.
    pub fn covers(&self, uid: u32, gid: u32) -> bool {
        match self {
            IdMap::Identity => uid < 65536 && gid < 65536,
            IdMap::Subordinate { uids, gids } => uid <= uids.count && gid <= gids.count,
            IdMap::Own => uid == 0 && gid == 0,
        }
    }

    /// What to do about an owner the map does not cover, in words.
    pub fn advice(&self) -> String {
        match self {
            IdMap::Subordinate { uids, gids } => format!(
                "beyond the {} subordinate uids and {} gids /etc/subuid and /etc/subgid give \
                 this user: give it larger ranges, or build as root",
                uids.count, gids.count
            ),
            IdMap::Own => "an ordinary user maps the image's other users through subordinate \
                 ids, which this user lacks: add ranges to /etc/subuid and /etc/subgid \
                 (usermod --add-subuids/--add-subgids), install newuidmap (package uidmap), or \
                 build as root"
                .to_string(),
            IdMap::Identity => "ids above 65535 are not mapped".to_string(),
        }
    }

    /// The `unshare` command that runs `program` in a fresh user and mount
    /// namespace with this map.
    fn unshare(&self) -> Command {
        let mut cmd = Command::new("unshare");
        cmd.args(["--user", "--mount"]);
        match self {
            IdMap::Identity => {
                cmd.args(["--", "sh", "-c", AWAIT_ID_MAP, "sh"]);
            }
            IdMap::Subordinate { uids, gids } => {
                cmd.arg("--map-root-user")
                    .arg(format!("--map-users={},1,{}", uids.start, uids.count))
                    .arg(format!("--map-groups={},1,{}", gids.start, gids.count))
                    .arg("--");
            }
            IdMap::Own => {
                cmd.args(["--map-root-user", "--"]);
            }
        }
        cmd
    }
}

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
    /// The live initramfs, by the image's dracut in its deployment.
    LiveInitramfs(crate::live::InitramfsJob),
    /// Clamp a tree's times, then write its squashfs.
    Squashfs(crate::live::SquashfsJob),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Outcome {
    Ok { value: serde_json::Value },
    Err { message: String },
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
        if self.map == IdMap::Identity && !matches!(job, Job::Deploy(_) | Job::Node(_)) {
            return serde_json::from_value(run_job(job)?).context("reading the job's answer");
        }
        strata_process::require("unshare")?;
        let dir = tempfile::Builder::new()
            .prefix("userns-")
            .tempdir_in(self.scratch)
            .context("creating a temporary directory for a namespaced job")?;
        let job_path = dir.path().join("job.json");
        let outcome_path = dir.path().join("outcome.json");
        std::fs::write(&job_path, serde_json::to_vec_pretty(job)?)
            .with_context(|| format!("writing {}", job_path.display()))?;
        let mut cmd = self.map.unshare();
        cmd.arg(self.worker.get_program())
            .args(self.worker.get_args())
            .arg(&job_path)
            .arg(&outcome_path)
            // No syncfs()/sync() after a deployment: with FIFREEZE refused,
            // libostree falls back to a sync() of the whole machine, which
            // waits for every other process's dirty data. The sysroot is
            // scratch space (see `deploy`).
            .env("OSTREE_SYSROOT_OPTS", "skip-sync")
            .stdin(Stdio::null());
        for (k, v) in self.worker.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let output = strata_process::run_started(&mut cmd, None, |pid| match self.map {
            IdMap::Identity => map_identity(pid),
            _ => Ok(()),
        });
        let outcome = std::fs::read(&outcome_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Outcome>(&b).ok());
        match (outcome, output) {
            (Some(Outcome::Ok { value }), Ok(_)) => {
                serde_json::from_value(value).context("reading the worker's answer")
            }
            (Some(Outcome::Err { message }), _) if message.contains("chown") => {
                bail!(
                    "{message} (an owner of the image's files {})",
                    self.map.advice()
                )
            }
            (Some(Outcome::Err { message }), _) => bail!("{message}"),
            (_, Err(e)) => Err(e).context("the namespaced worker failed"),
            (_, Ok(_)) => bail!("the namespaced worker exited without a result"),
        }
    }
}

/// Once process `pid` is in a user namespace of its own, maps ids
/// 0..[`MAPPED_IDS`] of it onto the same ids outside.
fn map_identity(pid: u32) -> std::io::Result<()> {
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
                    "the worker did not enter a user namespace within 30 s",
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

/// The child side: `ARGS = JOB OUTCOME`. Exit 0 when the job worked.
pub fn worker_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    strata_process::die_with_parent();
    let args: Vec<OsString> = args.into_iter().collect();
    let [job, outcome] = args.as_slice() else {
        eprintln!("usage: <worker> JOB.json OUTCOME.json");
        return ExitCode::from(2);
    };
    let result = std::fs::read(job)
        .with_context(|| format!("reading {}", Path::new(job).display()))
        .and_then(|b| Ok(serde_json::from_slice::<Job>(&b)?))
        .and_then(|job| run_job(&job));
    let (out, code) = match result {
        Ok(value) => (Outcome::Ok { value }, ExitCode::SUCCESS),
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
        Job::Ext4(fs) => {
            crate::fs::clamp_times(&fs.source, fs.epoch)?;
            crate::fs::mkfs_ext4(fs)?;
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

/// An effective id of this process (`Uid:` or `Gid:` of /proc/self/status).
fn effective_id(field: &str) -> Result<u32> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse().ok())
        .with_context(|| format!("no effective {field} in /proc/self/status"))
}

fn read_optional(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The name of `id` in a passwd-format table.
fn name_of(table: &str, id: u32) -> Option<&str> {
    table.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == id).then_some(name)
    })
}

/// The first range of `/etc/subuid`-format `table` for `name` or `id` (both
/// forms are valid there), as newuidmap reads it.
fn subordinate_ids(table: &str, name: Option<&str>, id: u32) -> Option<SubIds> {
    let id = id.to_string();
    table.lines().find_map(|l| {
        let mut f = l.trim().split(':');
        let owner = f.next()?;
        if owner != id && Some(owner) != name {
            return None;
        }
        let start = f.next()?.parse().ok()?;
        let count = f.next()?.parse().ok()?;
        (count > 0).then_some(SubIds { start, count })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subordinate_ranges_by_name_or_id() {
        let table = "alice:100000:65536\n# not a user\n1002:300000:1000\nbob:200000:0\n";
        let alice = SubIds {
            start: 100000,
            count: 65536,
        };
        for (name, id, want) in [
            (Some("alice"), 1000, Some(alice)),
            (
                None,
                1002,
                Some(SubIds {
                    start: 300000,
                    count: 1000,
                }),
            ),
            (
                Some("carol"),
                1002,
                Some(SubIds {
                    start: 300000,
                    count: 1000,
                }),
            ),
            (Some("bob"), 1001, None),
            (Some("dave"), 1003, None),
        ] {
            assert_eq!(subordinate_ids(table, name, id), want, "{name:?} {id}");
        }
        let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(name_of(passwd, 1000), Some("alice"));
        assert_eq!(name_of(passwd, 0), Some("root"));
        assert_eq!(name_of(passwd, 7), None);
    }

    #[test]
    fn namespace_commands() {
        let sub = IdMap::Subordinate {
            uids: SubIds {
                start: 100000,
                count: 65536,
            },
            gids: SubIds {
                start: 200000,
                count: 1000,
            },
        };
        let args = |m: &IdMap| -> Vec<String> {
            m.unshare()
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            args(&sub),
            [
                "--user",
                "--mount",
                "--map-root-user",
                "--map-users=100000,1,65536",
                "--map-groups=200000,1,1000",
                "--"
            ]
        );
        assert_eq!(
            args(&IdMap::Own),
            ["--user", "--mount", "--map-root-user", "--"]
        );
        assert_eq!(
            args(&IdMap::Identity)[..5],
            ["--user", "--mount", "--", "sh", "-c"]
        );
    }
}
