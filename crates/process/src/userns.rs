//! User namespaces: how an ordinary user writes trees whose files belong to
//! many users.
//!
//! An OS tree holds files of its system users (sshd is uid 74 on RHEL,
//! polkit's rules belong to polkitd). Installing, reading and removing them
//! needs a namespace in which those ids exist. As root they exist already.
//! An ordinary user gets them the way rootless podman does: in a user
//! namespace the user is root and its subordinate ids (`/etc/subuid`,
//! `/etc/subgid`, mapped by newuidmap) are ids 1 and up, every range the
//! tables give it one after the other (a pod's non-root user typically has
//! two, below and above its own id).
//!
//! Two ways in:
//! - [`become_root`]: a stage that installs packages (compose, derive, a
//!   whole build) re-executes its own program in such a namespace (user and
//!   mount) before it does anything. Everything after sees the image's own
//!   ids, as a root build does, so it writes the same bytes; what it
//!   creates in the workdir belongs to the user on the host.
//! - [`IdMap::unshare`] and [`IdMap::map_child`]: one job in a fresh
//!   namespace of its own (see [`crate::worker`]), for work that must never
//!   run in the caller's namespace (disk's deployment).
//!
//! What it must not do: guess. A user without subordinate ids is told what
//! to add, before anything is written.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::Error;

/// How many ids a tree may use: 0 to 65534, every system and regular
/// account of RHEL up to `nobody` (65534), the highest id it assigns;
/// 65535 is the 16-bit -1, never an owner. A pod's 65536 ids, less the one
/// its non-root user holds, are exactly these.
pub const TREE_IDS: u32 = 65535;

/// Set in the environment of a program [`become_root`] re-executed.
const REEXECUTED: &str = "STRATA_USERNS";

/// A range of host ids a user may map (`/etc/subuid`, `/etc/subgid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubIds {
    pub start: u32,
    pub count: u32,
}

/// One line of an id map: `count` ids from `inside` in the namespace are
/// the ids from `outside` in its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub inside: u32,
    pub outside: u32,
    pub count: u32,
}

/// How the ids of a namespace made from this process map onto this
/// process's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdMap {
    /// This process is root (of the host, or of a namespace holding
    /// `count` ids from 0): ids 0..count onto themselves. The parent
    /// writes the child's maps (newuidmap would want /etc/subuid entries
    /// for root), and the child waits for them ([`AWAIT_ID_MAP`]).
    Identity { count: u32 },
    /// A user with subordinate ids and newuidmap (package uidmap): the
    /// user is root, ids 1.. are its ranges, in the order the tables give
    /// them (see [`subordinate_map`]). newgidmap and newuidmap write the
    /// child's maps.
    Subordinate {
        uids: Vec<Extent>,
        gids: Vec<Extent>,
    },
    /// Any other user: only itself, as root. Content owned by anyone else
    /// cannot be written.
    Own,
}

impl IdMap {
    /// The map this process can give a namespace: [`IdMap::Identity`] as
    /// root, else [`IdMap::Subordinate`] when `/etc/subuid` and
    /// `/etc/subgid` give the user ranges and newuidmap/newgidmap are
    /// installed, else [`IdMap::Own`].
    pub fn for_this_process() -> Result<IdMap, Error> {
        let uid = effective_id("Uid:")?;
        if uid == 0 {
            let mapped = |file: &str| {
                std::fs::read_to_string(file)
                    .map(|t| mapped_from_zero(&t))
                    .unwrap_or(0)
            };
            let count = mapped("/proc/self/uid_map")
                .min(mapped("/proc/self/gid_map"))
                .min(TREE_IDS);
            return Ok(IdMap::Identity { count });
        }
        let name = read_optional(Path::new("/etc/passwd"))
            .and_then(|passwd| name_of(&passwd, uid).map(str::to_string));
        let gid = effective_id("Gid:")?;
        // newgidmap, too, looks the ranges up by user name or uid.
        let ranges = |table: &str| {
            read_optional(Path::new(table))
                .map(|t| subordinate_ids(&t, name.as_deref(), uid))
                .unwrap_or_default()
        };
        let (uids, gids) = (ranges("/etc/subuid"), ranges("/etc/subgid"));
        let tools = crate::require("newuidmap").is_ok() && crate::require("newgidmap").is_ok();
        Ok(if uids.is_empty() || gids.is_empty() || !tools {
            IdMap::Own
        } else {
            IdMap::Subordinate {
                uids: subordinate_map(uid, &uids),
                gids: subordinate_map(gid, &gids),
            }
        })
    }

    /// Whether files owned by `uid`:`gid` can exist in the namespace.
    pub fn covers(&self, uid: u32, gid: u32) -> bool {
        match self {
            IdMap::Identity { count } => uid < *count && gid < *count,
            IdMap::Subordinate { uids, gids } => uid < mapped(uids) && gid < mapped(gids),
            IdMap::Own => uid == 0 && gid == 0,
        }
    }

    /// Whether every id a tree may use ([`TREE_IDS`]) is covered.
    pub fn covers_trees(&self) -> bool {
        self.covers(TREE_IDS - 1, TREE_IDS - 1)
    }

    /// What to do about an owner the map does not cover, in words.
    pub fn advice(&self) -> String {
        match self {
            IdMap::Subordinate { uids, gids } => format!(
                "beyond the {} uids and {} gids this user maps (its own and the ranges \
                 /etc/subuid and /etc/subgid give it): give it {} more of each \
                 (usermod --add-subuids/--add-subgids), or run as root",
                mapped(uids),
                mapped(gids),
                TREE_IDS.saturating_sub(mapped(uids).min(mapped(gids)))
            ),
            IdMap::Own => format!(
                "an ordinary user maps the image's other users through subordinate ids, which \
                 this user lacks: add ranges of {} ids to /etc/subuid and /etc/subgid (usermod \
                 --add-subuids/--add-subgids), install newuidmap (package uidmap), or run as \
                 root",
                TREE_IDS - 1
            ),
            IdMap::Identity { count } => format!(
                "ids from {count} on are not mapped in this user namespace: start strata as \
                 root, or as a user whose /etc/subuid and /etc/subgid ranges hold {} ids",
                TREE_IDS - 1
            ),
        }
    }

    /// The `unshare` command that runs a program (appended by the caller)
    /// in a fresh user and mount namespace with this map. For
    /// [`IdMap::Identity`] and [`IdMap::Subordinate`] the child waits for
    /// its map: call [`IdMap::map_child`] with its pid. For [`IdMap::Own`]
    /// unshare writes the map itself.
    pub fn unshare(&self) -> Command {
        let mut cmd = Command::new("unshare");
        cmd.args(["--user", "--mount"]);
        match self {
            IdMap::Identity { .. } | IdMap::Subordinate { .. } => {
                cmd.args(["--", "sh", "-c", AWAIT_ID_MAP, "sh"]);
            }
            IdMap::Own => {
                cmd.args(["--map-root-user", "--"]);
            }
        }
        cmd
    }

    /// Once process `pid` (started from [`IdMap::unshare`]) is in a user
    /// namespace of its own, writes its id maps: for
    /// [`IdMap::Identity`], ids 0..count onto the same ids here; for
    /// [`IdMap::Subordinate`], through newgidmap and newuidmap. Nothing to
    /// do for [`IdMap::Own`] (unshare writes it).
    pub fn map_child(&self, pid: u32) -> std::io::Result<()> {
        let count = match self {
            IdMap::Identity { count } => *count,
            IdMap::Subordinate { .. } => return self.map_when_unshared(pid, false),
            IdMap::Own => return Ok(()),
        };
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
        // Each line must lie within one line of this process's own map.
        for file in ["gid_map", "uid_map"] {
            let own = std::fs::read_to_string(format!("/proc/self/{file}"))?;
            std::fs::write(format!("/proc/{pid}/{file}"), identity_lines(&own, count))?;
        }
        Ok(())
    }

    /// For [`IdMap::Subordinate`]: a shell that waits for process `pid` to
    /// enter a user namespace of its own, then maps its ids with newgidmap
    /// and newuidmap (gids first: the child waits for its uid map), or ends
    /// it when they fail. With `detach`, the shell runs on in the
    /// background and this returns at once: for a process that is about to
    /// exec into its namespace (see [`become_root`]), which keeps its pid.
    fn map_when_unshared(&self, pid: u32, detach: bool) -> std::io::Result<()> {
        let IdMap::Subordinate { uids, gids } = self else {
            return Ok(());
        };
        let lines = |map: &[Extent]| {
            map.iter()
                .map(|e| format!("{} {} {}", e.inside, e.outside, e.count))
                .collect::<Vec<_>>()
                .join(" ")
        };
        // Every value interpolated is a number.
        let map = format!(
            "{MAP_WHEN_UNSHARED}\nnewgidmap {pid} {} && newuidmap {pid} {} || {{ kill {pid}; exit 1; }}",
            lines(gids),
            lines(uids)
        );
        let script = if detach {
            format!("{{\n{map}\n}} &")
        } else {
            map
        };
        crate::require("newuidmap").map_err(std::io::Error::other)?;
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script, "sh", &pid.to_string()]);
        tracing::debug!(target: "strata::cmd", "{}", crate::display(&cmd));
        let status = cmd.status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "mapping the ids of process {pid} with newuidmap/newgidmap failed ({status})"
            )))
        }
    }
}

/// The start of [`IdMap::map_when_unshared`]'s shell (`$1` the pid): waits
/// up to 30 s for the process to leave this user namespace; ends quietly
/// if it is gone.
const MAP_WHEN_UNSHARED: &str = "own=$(readlink /proc/self/ns/user)
i=0
while [ \"$(readlink \"/proc/$1/ns/user\")\" = \"$own\" ]; do
    i=$((i + 1))
    [ $i -lt 3000 ] || { echo \"process $1 did not enter a user namespace within 30 s\" >&2; exit 1; }
    sleep 0.01
done
[ -e \"/proc/$1\" ] || exit 0";

/// The map of a user with subordinate ranges: the user's own `id` as 0,
/// then its `ranges` one after the other from 1 (the user's own id cut
/// out of any range that holds it: one id cannot be mapped twice), up to
/// [`TREE_IDS`].
fn subordinate_map(id: u32, ranges: &[SubIds]) -> Vec<Extent> {
    let mut map = vec![Extent {
        inside: 0,
        outside: id,
        count: 1,
    }];
    let mut next = 1u32;
    for r in ranges {
        let end = r.start.saturating_add(r.count);
        let pieces = if (r.start..end).contains(&id) {
            vec![(r.start, id - r.start), (id + 1, end - id - 1)]
        } else {
            vec![(r.start, r.count)]
        };
        for (outside, count) in pieces {
            let count = count.min(TREE_IDS - next);
            if count > 0 {
                map.push(Extent {
                    inside: next,
                    outside,
                    count,
                });
                next += count;
            }
        }
    }
    map
}

/// How many ids from 0 a map made by [`subordinate_map`] maps.
fn mapped(map: &[Extent]) -> u32 {
    map.last().map_or(0, |e| e.inside + e.count)
}

/// Run by `sh` in the fresh namespace of an [`IdMap::Identity`] job: waits
/// for the parent to write the id maps, then executes the worker, which
/// gets its capabilities at that exec (as the namespace's root, now
/// mapped).
const AWAIT_ID_MAP: &str = "i=0
until read -r m < /proc/self/uid_map && [ -n \"$m\" ]; do
    i=$((i + 1))
    [ $i -lt 3000 ] || { echo 'no uid map after 30 s' >&2; exit 1; }
    sleep 0.01
done
exec \"$@\"";

/// Makes this process root with every id a tree uses, in a mount
/// namespace of its own unless it is root of the host, for `what` (the
/// stage, for the error): as root of the host, returns at once; as an
/// ordinary user with subordinate ids, re-executes this program with the
/// same arguments in a new user and mount namespace (see the module
/// docs), and as root of a namespace holding [`TREE_IDS`] ids (a pod's),
/// in a new mount namespace; then does not return unless that fails.
/// Without subordinate ids: an error saying what to add.
///
/// The re-executed program keeps this process's pid (unshare and the
/// shell waiting for the map exec in turn), so signals sent to it reach
/// the build; a detached shell writes the map.
///
/// Call it first, before anything is read or written: the re-executed
/// program starts again from the top.
pub fn become_root(what: &str) -> Result<(), Error> {
    let map = IdMap::for_this_process()?;
    let reexecuted = std::env::var_os(REEXECUTED).is_some();
    let mut cmd = match &map {
        IdMap::Identity { .. } if !map.covers_trees() => {
            return Err(Error::Unprivileged {
                what: what.to_string(),
                advice: map.advice(),
            })
        }
        IdMap::Identity { .. } if reexecuted || in_initial_namespace() => return Ok(()),
        // Root of a namespace made by someone else (a pod's own user
        // namespace): a mount namespace of its own, so that the install
        // root's mounts die with the process.
        IdMap::Identity { .. } => {
            let mut c = Command::new("unshare");
            c.args(["--mount", "--propagation", "private", "--"]);
            c
        }
        IdMap::Subordinate { .. } if map.covers_trees() && !reexecuted => map.unshare(),
        // Re-executed already, and still not root: the map did not apply.
        IdMap::Subordinate { .. } if reexecuted => {
            return Err(Error::Unprivileged {
                what: what.to_string(),
                advice: "the user namespace strata entered did not make it root".to_string(),
            })
        }
        _ => {
            return Err(Error::Unprivileged {
                what: what.to_string(),
                advice: map.advice(),
            })
        }
    };
    if matches!(map, IdMap::Subordinate { .. }) {
        refuse_no_new_privs(what)?;
    }
    crate::require("unshare")?;
    let exe = std::env::current_exe().map_err(|source| Error::Spawn {
        command: "/proc/self/exe".to_string(),
        source,
    })?;
    map.map_when_unshared(std::process::id(), true)
        .map_err(|source| Error::Spawn {
            command: "newuidmap".to_string(),
            source,
        })?;
    cmd.arg(exe)
        .args(std::env::args_os().skip(1))
        .env(REEXECUTED, "1");
    tracing::debug!(target: "strata::cmd", "{}", crate::display(&cmd));
    let source = cmd.exec();
    Err(Error::Spawn {
        command: crate::display(&cmd),
        source,
    })
}

/// Refuses `what` when no_new_privs is set on this process. A namespace's
/// root gets its capabilities when it executes a program as uid 0; strata's
/// namespaces are entered unmapped (by `unshare`, then a shell waiting for
/// the map, see [`IdMap::unshare`]), which drops them, and with
/// no_new_privs the later exec as root cannot get them back: every mount
/// and chown in the namespace would fail with "permission denied".
/// [`IdMap::Own`] needs no check (unshare maps root before it executes).
pub fn refuse_no_new_privs(what: &str) -> Result<(), Error> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if no_new_privs(&status) {
        return Err(Error::NoNewPrivs {
            what: what.to_string(),
        });
    }
    Ok(())
}

/// Whether `/proc/self/status` text says no_new_privs is set.
fn no_new_privs(status: &str) -> bool {
    status
        .lines()
        .filter_map(|l| l.strip_prefix("NoNewPrivs:"))
        .any(|v| v.trim() == "1")
}

/// Whether this process is in the host's user namespace (its uid map is
/// the whole range onto itself): overlay mounts in any other namespace
/// keep their metadata in `user.` xattrs (`userxattr`).
pub fn in_initial_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

/// The lines of an id map (`/proc/self/uid_map` format) as (first id
/// inside, count), in order.
fn extents(map: &str) -> Vec<(u64, u64)> {
    let mut extents: Vec<(u64, u64)> = map
        .lines()
        .filter_map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (f.len() == 3).then(|| (f[0], f[2]))
        })
        .collect();
    extents.sort();
    extents
}

/// How many ids from 0 an id map (`/proc/self/uid_map` format) maps
/// without a gap.
fn mapped_from_zero(map: &str) -> u32 {
    let mut next = 0u64;
    for (inside, count) in extents(map) {
        if inside > next {
            break;
        }
        next = next.max(inside + count);
    }
    next.min(u64::from(u32::MAX)) as u32
}

/// The lines of an id map that maps ids 0..count onto themselves, split
/// where `own` (this process's map, `/proc/self/uid_map` format) is: the
/// kernel takes a line only when the ids it maps lie within one line of
/// the writer's own map.
fn identity_lines(own: &str, count: u32) -> String {
    let end = u64::from(count);
    let mut out = String::new();
    for (first, len) in extents(own) {
        if first >= end {
            break;
        }
        let len = len.min(end - first);
        out.push_str(&format!("{first} {first} {len}\n"));
    }
    out
}

/// An effective id of this process (`Uid:` or `Gid:` of /proc/self/status).
fn effective_id(field: &str) -> Result<u32, Error> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|source| Error::Spawn {
        command: "reading /proc/self/status".to_string(),
        source,
    })?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| Error::Spawn {
            command: "reading /proc/self/status".to_string(),
            source: std::io::Error::other(format!("no effective {field}")),
        })
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

/// The ranges of `/etc/subuid`-format `table` for `name` or `id` (both
/// forms are valid there), in order, as newuidmap reads them.
fn subordinate_ids(table: &str, name: Option<&str>, id: u32) -> Vec<SubIds> {
    let id = id.to_string();
    table
        .lines()
        .filter_map(|l| {
            let mut f = l.trim().split(':');
            let owner = f.next()?;
            if owner != id && Some(owner) != name {
                return None;
            }
            let start = f.next()?.parse().ok()?;
            let count = f.next()?.parse().ok()?;
            (count > 0).then_some(SubIds { start, count })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_new_privs_from_status() {
        for (status, want) in [
            ("Name:\tsh\nNoNewPrivs:\t1\nSeccomp:\t0\n", true),
            ("Name:\tsh\nNoNewPrivs:\t0\n", false),
            // Kernels before 4.10 do not say.
            ("Name:\tsh\n", false),
        ] {
            assert_eq!(no_new_privs(status), want, "{status:?}");
        }
    }

    #[test]
    fn subordinate_ranges_by_name_or_id() {
        let table = "alice:100000:65536\n# not a user\n1002:300000:1000\nbob:200000:0\n\
                     alice:400000:10\n";
        let range = |start, count| SubIds { start, count };
        for (name, id, want) in [
            (
                Some("alice"),
                1000,
                vec![range(100000, 65536), range(400000, 10)],
            ),
            (None, 1002, vec![range(300000, 1000)]),
            (Some("carol"), 1002, vec![range(300000, 1000)]),
            (Some("bob"), 1001, vec![]),
            (Some("dave"), 1003, vec![]),
        ] {
            assert_eq!(subordinate_ids(table, name, id), want, "{name:?} {id}");
        }
        let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(name_of(passwd, 1000), Some("alice"));
        assert_eq!(name_of(passwd, 0), Some("root"));
        assert_eq!(name_of(passwd, 7), None);
    }

    #[test]
    fn subordinate_maps() {
        let e = |inside, outside, count| Extent {
            inside,
            outside,
            count,
        };
        // A host user with one range of 65536: capped at the tree's ids.
        let host = subordinate_map(
            1000,
            &[SubIds {
                start: 100000,
                count: 65536,
            }],
        );
        assert_eq!(host, [e(0, 1000, 1), e(1, 100000, 65534)]);
        // A pod's user 1000 in a namespace of 65536 ids, its ranges below
        // and above its own id: exactly the tree's ids.
        let pod = subordinate_map(
            1000,
            &[
                SubIds {
                    start: 1,
                    count: 999,
                },
                SubIds {
                    start: 1001,
                    count: 64535,
                },
            ],
        );
        assert_eq!(pod, [e(0, 1000, 1), e(1, 1, 999), e(1000, 1001, 64535)]);
        assert_eq!(mapped(&pod), TREE_IDS);
        // One range that holds the user's own id: cut around it.
        let around = subordinate_map(
            1000,
            &[SubIds {
                start: 1,
                count: 65535,
            }],
        );
        assert_eq!(around, [e(0, 1000, 1), e(1, 1, 999), e(1000, 1001, 64535)]);
        let sub = IdMap::Subordinate {
            uids: pod.clone(),
            gids: pod,
        };
        assert!(sub.covers_trees() && sub.covers(65534, 65534) && !sub.covers(65535, 0));
        let small = IdMap::Subordinate {
            uids: subordinate_map(
                1000,
                &[SubIds {
                    start: 1,
                    count: 999,
                }],
            ),
            gids: host,
        };
        assert!(small.covers(999, 999) && !small.covers(1000, 0) && !small.covers_trees());
        assert!(small
            .advice()
            .contains("beyond the 1000 uids and 65535 gids"));
    }

    #[test]
    fn ids_mapped_from_zero() {
        assert_eq!(mapped_from_zero("0 0 4294967295\n"), u32::MAX);
        assert_eq!(mapped_from_zero("0 1001 1\n1 100000 65536\n"), 65537);
        assert_eq!(mapped_from_zero("0 1001 1\n"), 1);
        assert_eq!(mapped_from_zero("0 1001 1\n5 100000 10\n"), 1);
        assert_eq!(mapped_from_zero(""), 0);
        let own = IdMap::Identity {
            count: mapped_from_zero("0 1001 1\n"),
        };
        assert!(own.covers(0, 0) && !own.covers(74, 74) && !own.covers_trees());
        assert!(IdMap::Identity { count: TREE_IDS }.covers_trees());
    }

    #[test]
    fn identity_maps_follow_the_writers_own_lines() {
        assert_eq!(identity_lines("0 0 4294967295\n", TREE_IDS), "0 0 65535\n");
        assert_eq!(
            identity_lines(
                "         0       1001          1\n         1     100000      65536\n",
                TREE_IDS
            ),
            "0 0 1\n1 1 65534\n"
        );
        assert_eq!(identity_lines("0 1001 1\n", 1), "0 0 1\n");
    }

    #[test]
    fn namespace_commands() {
        let args = |m: &IdMap| -> Vec<String> {
            m.unshare()
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            args(&IdMap::Own),
            ["--user", "--mount", "--map-root-user", "--"]
        );
        let sub = IdMap::Subordinate {
            uids: subordinate_map(1000, &[SubIds { start: 1, count: 9 }]),
            gids: subordinate_map(1000, &[SubIds { start: 1, count: 9 }]),
        };
        for map in [IdMap::Identity { count: TREE_IDS }, sub] {
            assert_eq!(args(&map)[..5], ["--user", "--mount", "--", "sh", "-c"]);
        }
    }
}
