//! `manifest-lock.x86_64.json`: the exact package set of a compose, in
//! rpm-ostree's lockfile format, so that each tool reads the other's.
//!
//! The format (rpm-ostree's `rust/src/lockfile.rs`, which refuses unknown
//! fields): `packages` maps a name to `evra` (or `evr`, any arch) and an
//! optional `digest` (`sha256:<hex>` of the .rpm, as the repodata has it)
//! and free-form `metadata`; the top-level `metadata` has `generated` (RFC
//! 3339) and `rpmmd_repos`, each repo's metadata timestamp (the newest
//! `<timestamp>` of its repomd.xml, what libdnf calls the repo's
//! `timestamp_generated`). strata writes per package the metadata
//! rpm-ostree writes (`sourcerpm`, the source package's name) plus `repo`,
//! the repo it came from; it reads lockfiles of either tool.
//!
//! Written by every compose; `--lockfile F` composes exactly the packages
//! it lists and fails naming any it cannot find, or whose file or repo is
//! not the locked one.
//!
//! Overrides files (`--overrides F`, coreos-assembler's
//! `manifest-lock.overrides.yaml`) are lockfiles too, YAML or JSON, whose
//! entries win over the lockfile's by name, as rpm-ostree applies several
//! lockfiles in order (cosa passes them with `--ex-lockfile`).
//!
//! Both are read as every file a user gives strata is (`strata_manifest`'s
//! bounded reader: a regular file of at most 1 MiB, the manifest limits,
//! no key twice in a mapping), and an entry must mean something: a package
//! name rpm could have, an `evra` that is `[epoch:]version-release.arch`,
//! dates in RFC 3339. Values echoed in errors are escaped and cut.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use strata_dnf::Package;
use strata_manifest::{escaped, shown};
use strata_workdir::record::nevra_name;

pub const FILE_NAME: &str = "manifest-lock.x86_64.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub packages: BTreeMap<String, LockedPackage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<LockMetadata>,
}

/// One locked package: `evra`, or `evr` for any arch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evra: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evr: Option<String>,
    /// `sha256:<hex>` of the .rpm file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, serde_json::Value>>,
}

impl LockedPackage {
    /// The repo strata recorded the package from, if the lockfile says.
    pub fn repo(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("repo")?.as_str()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockMetadata {
    /// When the set was resolved (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<String>,
    /// Repo id -> its metadata timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpmmd_repos: Option<BTreeMap<String, RepoTimestamp>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoTimestamp {
    /// RFC 3339.
    pub generated: String,
}

impl Lockfile {
    /// Reads a lockfile or an overrides file: JSON, or YAML (what cosa's
    /// overrides files are).
    pub fn load(path: &Path) -> Result<Self> {
        let text = strata_manifest::read_input(path).with_context(|| {
            format!(
                "reading the lockfile {}",
                escaped(&path.display().to_string())
            )
        })?;
        Self::parse(&text, path)
    }

    /// A lockfile's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let lock: Lockfile = strata_manifest::parse_data(text, path)?;
        lock.check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", escaped(&path.display().to_string())))?;
        Ok(lock)
    }

    /// Refuses entries that mean nothing: a name no package can have, an
    /// evra or evr that selects no version, a date that is none.
    fn check(&self) -> Result<(), String> {
        for (name, p) in &self.packages {
            if !is_package_name(name) {
                return Err(format!(
                    "`{}` is not a package name (letters, digits, `-._+`)",
                    shown(name)
                ));
            }
            let name = shown(name);
            match (&p.evra, &p.evr) {
                (Some(evra), None) => {
                    if !is_evra(evra) {
                        return Err(format!(
                            "package {name}: evra `{}` is not [epoch:]version-release.arch (4.4.20-4.el8_6.x86_64)",
                            shown(evra)
                        ));
                    }
                }
                (None, Some(evr)) => {
                    if !is_evr(evr) {
                        return Err(format!(
                            "package {name}: evr `{}` is not [epoch:]version-release (4.4.20-4.el8_6)",
                            shown(evr)
                        ));
                    }
                }
                _ => return Err(format!("package {name} needs exactly one of evra and evr")),
            }
        }
        let date =
            |field: String, value: &str| match strata_manifest::UtcDateTime::parse_rfc3339(value) {
                Some(_) => Ok(()),
                None => Err(format!(
                    "{field} `{}` is not an RFC 3339 date and time (2026-10-15T00:00:00Z)",
                    shown(value)
                )),
            };
        if let Some(m) = &self.metadata {
            if let Some(generated) = &m.generated {
                date("metadata.generated".to_string(), generated)?;
            }
            for (repo, t) in m.rpmmd_repos.iter().flatten() {
                date(
                    format!("metadata.rpmmd_repos.{}.generated", shown(repo)),
                    &t.generated,
                )?;
            }
        }
        Ok(())
    }

    /// The entries of `overrides` over this lockfile's, by name.
    pub fn overridden_by(&mut self, overrides: &Lockfile) {
        for (name, p) in &overrides.packages {
            self.packages.insert(name.clone(), p.clone());
        }
    }

    /// The spec that selects one locked package: `name-evr[.arch]`.
    pub fn spec(name: &str, p: &LockedPackage) -> String {
        let evr = p.evra.as_deref().or(p.evr.as_deref()).unwrap_or_default();
        let evr = evr.split_once(':').map_or(evr, |(_, rest)| rest);
        format!("{name}-{evr}")
    }

    /// `name-evr[.arch]` specs that select exactly the locked packages.
    pub fn specs(&self) -> Vec<String> {
        self.packages
            .iter()
            .map(|(name, p)| Self::spec(name, p))
            .collect()
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("lockfile serializes");
        out.push(b'\n');
        out
    }
}

/// Overrides files read in order: their entries, later files winning by
/// name, and the file each entry came from (for errors about it).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub lock: Lockfile,
    files: BTreeMap<String, PathBuf>,
}

impl Overrides {
    pub fn load(paths: &[PathBuf]) -> Result<Self> {
        let mut o = Overrides::default();
        for path in paths {
            let lock = Lockfile::load(path)?;
            for name in lock.packages.keys() {
                o.files.insert(name.clone(), path.clone());
            }
            o.lock.overridden_by(&lock);
        }
        Ok(o)
    }

    /// Replaces the entries of `lock` that an override names. An override
    /// of a package the lockfile does not list is no entry of it: it pins
    /// that package only if the resolution comes to need it
    /// ([`Overrides::resolve_pinned`]).
    pub fn replace_in(&self, lock: &mut Lockfile) {
        for (name, p) in &self.lock.packages {
            if let Some(entry) = lock.packages.get_mut(name) {
                *entry = p.clone();
            }
        }
    }

    /// Resolves `specs` with the overrides pinned as the package set
    /// needs them. An override constrains a package the set holds; it
    /// never adds one: `resolve` runs on the specs, and every override
    /// naming a package of the result that is not pinned yet (`pinned`:
    /// those the specs pin already) replaces the spec of that name and
    /// the specs are resolved again, until none is new. A fast-tracked
    /// package whose pinned version needs a new package with an override
    /// of its own is pinned that way. What the set never holds is refused
    /// ([`Overrides::check_in`]). A failed resolution is returned as it
    /// is (`Ok(Err)`), for the caller to explain.
    pub fn resolve_pinned<T, E>(
        &self,
        specs: &mut Vec<String>,
        mut pinned: BTreeSet<String>,
        mut resolve: impl FnMut(&[String]) -> Result<Result<T, E>>,
        names: impl Fn(&T) -> BTreeSet<String>,
    ) -> Result<Result<T, E>> {
        loop {
            let resolved = resolve(specs)?;
            let Ok(set) = &resolved else {
                return Ok(resolved);
            };
            let set = names(set);
            let new: Vec<(&String, &LockedPackage)> = self
                .lock
                .packages
                .iter()
                .filter(|(name, _)| set.contains(*name) && !pinned.contains(*name))
                .collect();
            if new.is_empty() {
                self.check_in(&set.iter().map(String::as_str).collect())?;
                return Ok(resolved);
            }
            for (name, p) in new {
                // In place of the manifest's own name for it, if any.
                specs.retain(|spec| spec != name);
                specs.push(Lockfile::spec(name, p));
                pinned.insert(name.clone());
            }
        }
    }

    /// Refuses an entry that names a package outside `set` (the names of
    /// the resolved package set, the pins applied): it would pin nothing.
    pub fn check_in(&self, set: &BTreeSet<&str>) -> Result<()> {
        for name in self.lock.packages.keys() {
            if !set.contains(name.as_str()) {
                let file = self.files.get(name).map(|p| p.display().to_string());
                bail!(
                    "{}: override {}: no package of that name is in the package set (it would pin nothing); remove the entry or add the package to the manifest's packages",
                    escaped(file.as_deref().unwrap_or("--overrides")),
                    shown(name)
                );
            }
        }
        Ok(())
    }
}

/// A name rpm could give a package: letters, digits and `-._+`, starting
/// with a letter, a digit or `_`.
fn is_package_name(name: &str) -> bool {
    name.len() <= 256
        && name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._+".contains(c))
}

/// `[epoch:]version-release`: a numeric epoch, a version and a release of
/// the characters rpm allows in them (no `-` in either).
fn is_evr(evr: &str) -> bool {
    let (epoch, vr) = match evr.split_once(':') {
        Some((e, vr)) => (Some(e), vr),
        None => (None, evr),
    };
    let part = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+~^".contains(c))
    };
    epoch.is_none_or(|e| !e.is_empty() && e.len() <= 10 && e.bytes().all(|b| b.is_ascii_digit()))
        && evr.len() <= 512
        && vr.split_once('-').is_some_and(|(v, r)| part(v) && part(r))
}

/// The architectures a package of an RPM distribution is built for (rpm's
/// own table of canonical arches, `rpmrc`): what follows the last `.` of
/// an evra must be one (`4.4.20-4.el8_6` has no arch, though `el8_6` is
/// spelled like one).
const ARCHES: &str = "noarch \
    i386 i486 i586 i686 athlon geode pentium3 pentium4 \
    x86_64 amd64 ia32e x86_64_v2 x86_64_v3 x86_64_v4 \
    armv5tel armv5tejl armv6l armv6hl armv7l armv7hl armv7hnl armv8l armv8hl aarch64 \
    ppc ppc64 ppc64le ppc64p7 s390 s390x \
    riscv64 loongarch64 mips mipsel mips64 mips64el sparc sparcv9 sparc64 alpha ia64 sh4 m68k";

/// `[epoch:]version-release.arch`, as rpm-ostree's lockfiles have it.
fn is_evra(evra: &str) -> bool {
    evra.rsplit_once('.')
        .is_some_and(|(evr, arch)| is_evr(evr) && ARCHES.split_whitespace().any(|a| a == arch))
}

/// The source package's name from its file name (`bash-4.4.20-4.el8_6.src.rpm`
/// -> `bash`), as rpm-ostree records it.
pub fn source_name(source_rpm: &str) -> Option<&str> {
    // The file name is a NEVRA with `.src.rpm` for the arch; one without
    // version and release comes back whole.
    let name = nevra_name(source_rpm);
    (name.len() < source_rpm.len()).then_some(name)
}

/// The newest `<timestamp>` of a repo's repomd.xml: the repo's metadata
/// time as libdnf and rpm-ostree take it.
pub fn repomd_generated(repomd: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(repomd).ok()?;
    text.split("<timestamp>")
        .skip(1)
        .filter_map(|rest| rest.split("</timestamp>").next()?.trim().parse().ok())
        .max()
}

/// Where a repo's repomd.xml is: in the repo itself for `file://`, else in
/// libdnf's metadata cache under `dnf_cache` (`<id>-<releasever>-<arch>`).
pub fn repomd_path(baseurl: &str, id: &str, dnf_cache: &Path) -> Option<std::path::PathBuf> {
    if let Some(dir) = baseurl.strip_prefix("file://") {
        return Some(Path::new(dir).join("repodata/repomd.xml"));
    }
    let prefix = format!("{id}-");
    std::fs::read_dir(dnf_cache.join("metadata"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path().join("repodata/repomd.xml"))
        .find(|p| p.is_file())
}

/// RFC 3339 of a Unix time, in UTC, to the second.
pub fn rfc3339(secs: i64) -> String {
    strata_manifest::UtcDateTime::from_unix_seconds(secs).rfc3339()
}

/// The resolved set against the lockfile: no package it does not list, each
/// the locked file from the locked repo.
pub fn check_against_lockfile(lock: &Lockfile, packages: &[Package]) -> Result<()> {
    let extra: Vec<&str> = packages
        .iter()
        .filter(|p| !lock.packages.contains_key(&p.name))
        .map(|p| p.nevra.as_str())
        .collect();
    if !extra.is_empty() {
        bail!(
            "the locked packages need packages the lockfile does not list: {}",
            shown_list(&extra)
        );
    }
    // A lock pins bytes, not names: what the repos offer now under a locked
    // NEVRA must be the same file, from the same repo.
    let mut differ = Vec::new();
    for p in packages {
        let Some(locked) = lock.packages.get(&p.name) else {
            continue;
        };
        let found = p
            .checksum
            .as_ref()
            .map(|c| format!("{}:{}", c.kind, c.hex))
            .unwrap_or_default();
        if let Some(digest) = locked.digest.as_deref().filter(|d| *d != found) {
            differ.push(format!(
                "{} from repo {} is {found}, the lockfile says {digest}",
                p.nevra, p.repo_id
            ));
        }
        if let Some(repo) = locked.repo().filter(|r| *r != p.repo_id) {
            differ.push(format!(
                "{} comes from repo {}, the lockfile says repo {repo}",
                p.nevra, p.repo_id
            ));
        }
    }
    if !differ.is_empty() {
        bail!(
            "the repos no longer offer what the lockfile locks: {}",
            escaped(&differ.join("; "))
        );
    }
    Ok(())
}

/// Names from a repository, each escaped and cut.
fn shown_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| shown(n))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lockfile of a resolved set, as rpm-ostree writes one: dated by the
/// build's SOURCE_DATE_EPOCH (rpm-ostree uses the day it ran; a date from
/// the inputs keeps the file reproducible), each repo by its metadata
/// timestamp.
pub fn lockfile_for(
    packages: &[Package],
    repos: &[&strata_manifest::Repo],
    dnf_cache: &Path,
    sde: u64,
) -> Lockfile {
    let rpmmd_repos = repos
        .iter()
        .filter_map(|r| {
            let baseurl = r.baseurl.first()?;
            let repomd = repomd_path(baseurl, &r.id, dnf_cache)?;
            let generated = repomd_generated(&repomd)?;
            Some((
                r.id.clone(),
                RepoTimestamp {
                    generated: rfc3339(generated),
                },
            ))
        })
        .collect();
    Lockfile {
        packages: packages
            .iter()
            .map(|p| {
                let mut metadata = BTreeMap::new();
                if let Some(name) = p.source_rpm.as_deref().and_then(source_name) {
                    metadata.insert("sourcerpm".to_string(), name.into());
                }
                metadata.insert("repo".to_string(), p.repo_id.clone().into());
                (
                    p.name.clone(),
                    LockedPackage {
                        evra: Some(format!("{}.{}", p.evr(), p.arch)),
                        evr: None,
                        digest: p.checksum.as_ref().map(|c| format!("{}:{}", c.kind, c.hex)),
                        metadata: Some(metadata),
                    },
                )
            })
            .collect(),
        metadata: Some(LockMetadata {
            generated: Some(rfc3339(sde as i64)),
            rpmmd_repos: Some(rpmmd_repos),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lockfile as rpm-ostree writes it (evra, digest, sourcerpm), and an
    /// override as rpm-ostree accepts it (evr, no digest).
    const RPM_OSTREE: &str = r#"{
  "packages": {
    "bash": {
      "evra": "4.4.20-4.el8_6.x86_64",
      "digest": "sha256:8d3f0e9c9b0f0b7d3f0e9c9b0f0b7d3f0e9c9b0f0b7d3f0e9c9b0f0b7d3f0e9c",
      "metadata": {"sourcerpm": "bash"}
    },
    "gmp": {"evr": "1:6.1.2-10.el8"}
  },
  "metadata": {
    "generated": "2026-10-15T00:00:00Z",
    "rpmmd_repos": {"rhel-8.6-baseos": {"generated": "2026-10-15T00:00:00Z"}}
  }
}"#;

    #[test]
    fn reads_rpm_ostree_lockfiles() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        std::fs::write(&path, RPM_OSTREE).unwrap();
        let lock = Lockfile::load(&path).unwrap();
        assert_eq!(
            lock.specs(),
            ["bash-4.4.20-4.el8_6.x86_64", "gmp-6.1.2-10.el8"]
        );
        assert_eq!(lock.packages["bash"].repo(), None);
        // What strata writes reads back the same.
        let again: Lockfile = serde_json::from_slice(&lock.to_json()).unwrap();
        assert_eq!(again, lock);
    }

    /// An overrides file as coreos-assembler keeps one
    /// (`manifest-lock.overrides.yaml`: YAML, `evr` or `evra`, free-form
    /// metadata): its entries win by name.
    #[test]
    fn overrides_files_win_by_name() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        std::fs::write(&path, RPM_OSTREE).unwrap();
        let mut lock = Lockfile::load(&path).unwrap();
        let o = d.path().join("manifest-lock.overrides.yaml");
        std::fs::write(
            &o,
            "packages:\n  bash:\n    evr: 4.4.20-5.el8_6\n    metadata:\n      type: fast-track\n      reason: https://issues.example/1\n  kernel:\n    evra: 4.18.0-372.9.1.el8.x86_64\n",
        )
        .unwrap();
        lock.overridden_by(&Lockfile::load(&o).unwrap());
        assert_eq!(
            lock.specs(),
            [
                "bash-4.4.20-5.el8_6",
                "gmp-6.1.2-10.el8",
                "kernel-4.18.0-372.9.1.el8.x86_64"
            ]
        );
        assert_eq!(
            lock.packages["bash"].digest, None,
            "the override's own entry"
        );
    }

    #[test]
    fn refuses_what_rpm_ostree_refuses() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (r#"{"packages": {}, "repos": {}}"#, "unknown field `repos`"),
            (
                r#"{"packages": {"bash": {"evra": "1-1.x86_64", "repo": "x"}}}"#,
                "unknown field `repo`",
            ),
            (
                r#"{"packages": {"bash": {"evra": "1-1.x86_64", "evr": "1-1"}}}"#,
                "package bash needs exactly one of evra and evr",
            ),
        ];
        for (text, want) in cases {
            let path = d.path().join("lock.json");
            std::fs::write(&path, text).unwrap();
            let e = format!("{:#}", Lockfile::load(&path).unwrap_err());
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    /// The error of loading `text` as a lockfile, its causes included.
    fn refusal(text: &str) -> String {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        std::fs::write(&path, text).unwrap();
        let e = format!("{:#}", Lockfile::load(&path).unwrap_err());
        e.replace(&d.path().display().to_string(), "D")
    }

    #[test]
    fn lock_entries_that_select_nothing_are_refused() {
        let cases = [
            (
                r#"{"packages": {"bash": {"evra": "*"}}}"#,
                "D/lock.json: package bash: evra `*` is not [epoch:]version-release.arch (4.4.20-4.el8_6.x86_64)",
            ),
            (
                "packages:\n  bash: {evra: \"4.4.20-4.el8_6\"}\n",
                "D/lock.json: package bash: evra `4.4.20-4.el8_6` is not [epoch:]version-release.arch (4.4.20-4.el8_6.x86_64)",
            ),
            (
                r#"{"packages": {"bash": {"evr": "x:1-1"}}}"#,
                "D/lock.json: package bash: evr `x:1-1` is not [epoch:]version-release (4.4.20-4.el8_6)",
            ),
            (
                r#"{"packages": {"bash": {"evr": "1-1-1"}}}"#,
                "D/lock.json: package bash: evr `1-1-1` is not [epoch:]version-release (4.4.20-4.el8_6)",
            ),
            (
                r#"{"packages": {"ba sh": {"evr": "1-1"}}}"#,
                "D/lock.json: `ba sh` is not a package name (letters, digits, `-._+`)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(refusal(text), want, "{text}");
        }
        for ok in [
            "1:6.1.2-10.el8.x86_64",
            "4.4.20-4.el8_6.noarch",
            "2.0~rc1-1.fc39^git.aarch64",
        ] {
            let text = format!(r#"{{"packages": {{"p": {{"evra": "{ok}"}}}}}}"#);
            Lockfile::parse(&text, Path::new("l")).unwrap();
        }
    }

    #[test]
    fn a_generated_date_that_is_no_date_is_refused() {
        assert_eq!(
            refusal(r#"{"packages": {}, "metadata": {"generated": "not-a-date"}}"#),
            "D/lock.json: metadata.generated `not-a-date` is not an RFC 3339 date and time (2026-10-15T00:00:00Z)"
        );
        assert_eq!(
            refusal(r#"{"packages": {}, "metadata": {"rpmmd_repos": {"r": {"generated": "yesterday"}}}}"#),
            "D/lock.json: metadata.rpmmd_repos.r.generated `yesterday` is not an RFC 3339 date and time (2026-10-15T00:00:00Z)"
        );
    }

    /// JSON kept the last of two entries for one package, silently.
    #[test]
    fn a_package_locked_twice_is_refused() {
        let e = refusal(r#"{"packages": {"bash": {"evr": "1-1"}, "bash": {"evr": "2-1"}}}"#);
        assert_eq!(
            e,
            "D/lock.json:1:44: the key `bash` is given twice in one mapping"
        );
        let e = refusal("packages:\n  bash: {evr: 1-1}\n  bash: {evr: 2-1}\n");
        assert_eq!(
            e,
            "D/lock.json:2:3: packages: the key `bash` is given twice in one mapping"
        );
    }

    /// A newline in a key printed a second `error:` line.
    #[test]
    fn a_newline_in_a_package_name_stays_on_the_error_line() {
        let e = refusal("{\"packages\": {\"bash\\nerror: forged\": {\"evr\": \"1-1\"}}}");
        assert_eq!(
            e,
            "D/lock.json: `bash\\nerror: forged` is not a package name (letters, digits, `-._+`)"
        );
        let e = refusal("{\"packages\": {\"bash\": {\"evr\": \"1\\n-1\"}}}");
        assert!(!e.contains('\n') && e.contains("`1\\n-1`"), "{e}");
    }

    /// `--lockfile /dev/zero` read the device whole; a 50 MB value was
    /// echoed whole into the error; 20,000-deep nesting took quadratic time.
    #[test]
    fn a_lockfile_of_dev_zero_is_refused_without_reading_it() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo (coreutils)");
        for (path, want) in [
            (
                Path::new("/dev/zero"),
                "a character device, not a regular file",
            ),
            (fifo.as_path(), "a FIFO, not a regular file"),
            (d.path(), "a directory, not a regular file"),
        ] {
            let e = format!("{:#}", Lockfile::load(path).unwrap_err());
            assert!(
                e.starts_with("reading the lockfile") && e.ends_with(want),
                "{e}"
            );
        }
        let big = format!(
            r#"{{"packages": {{"bash": {{"evr": "{}"}}}}}}"#,
            "1".repeat(50 << 20)
        );
        let e = refusal(&big);
        assert!(
            e.ends_with("larger than 1048576 bytes, the most strata reads of such a file"),
            "{e}"
        );
        let long = format!(
            r#"{{"packages": {{"bash": {{"evr": 1, "x": "{}"}}}}}}"#,
            "y".repeat(900_000)
        );
        let e = refusal(&long);
        assert!(e.len() < 300, "{e}");
        let started = std::time::Instant::now();
        let deep = format!("packages: {}{}\n", "[".repeat(20_000), "]".repeat(20_000));
        let e = refusal(&deep);
        assert!(e.contains("nested more than 64 deep"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    /// An override for a package the manifest does not install was a log
    /// line, and pinned nothing.
    #[test]
    fn an_override_for_a_package_not_in_the_set_is_an_error_naming_it_and_its_file() {
        let d = tempfile::tempdir().unwrap();
        let o = d.path().join("manifest-lock.overrides.yaml");
        std::fs::write(&o, "packages:\n  bash: {evr: 1-1}\n  nosuch: {evr: 1-1}\n").unwrap();
        let overrides = Overrides::load(std::slice::from_ref(&o)).unwrap();
        overrides
            .check_in(&["bash", "nosuch", "glibc"].into())
            .unwrap();
        let e = overrides.check_in(&["bash", "glibc"].into()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: override nosuch: no package of that name is in the package set (it would pin nothing); remove the entry or add the package to the manifest's packages",
                o.display()
            )
        );
    }

    /// x86_64_v2 (AlmaLinux's) and loongarch64 (openEuler's) packages
    /// were refused as evras without an arch.
    #[test]
    fn every_arch_rpm_distributions_ship_is_an_arch() {
        for arch in [
            "x86_64_v2",
            "x86_64_v3",
            "x86_64_v4",
            "loongarch64",
            "i386",
            "i686",
            "armv7hl",
            "aarch64",
            "ppc64le",
            "s390x",
            "riscv64",
            "noarch",
        ] {
            assert!(is_evra(&format!("1.0-1.el10.{arch}")), "{arch}");
        }
        for not in ["el8_6", "x86_64_v5", "*", ""] {
            assert!(!is_evra(&format!("1.0-1.{not}")), "{not}");
        }
    }

    /// A toy package set for [`Overrides::resolve_pinned`]: `a` 2.0 (the
    /// fast-tracked version) requires `b`, which `a` 1.0 does not.
    fn toy_resolve(specs: &[String]) -> Result<Result<BTreeSet<String>, String>> {
        let mut set: BTreeSet<String> = specs
            .iter()
            .map(|s| s.split('-').next().unwrap_or_default().to_string())
            .collect();
        if specs.iter().any(|s| s == "a-2.0-1") {
            set.insert("b".into());
        }
        Ok(Ok(set))
    }

    fn overrides(d: &Path, yaml: &str) -> Overrides {
        let o = d.join("o.yaml");
        std::fs::write(&o, yaml).unwrap();
        Overrides::load(std::slice::from_ref(&o)).unwrap()
    }

    /// Fedora CoreOS fast-tracks a package together with the new package
    /// its pinned version needs: the new one was refused as outside the
    /// set, which was taken before the pins.
    #[test]
    fn an_override_for_a_new_dependency_of_a_pinned_version_is_pinned_not_refused() {
        let d = tempfile::tempdir().unwrap();
        let o = overrides(
            d.path(),
            "packages:\n  a: {evr: 2.0-1}\n  b: {evr: 1.5-1}\n",
        );
        let mut specs = vec!["a".to_string(), "c".to_string()];
        let set = o
            .resolve_pinned(&mut specs, BTreeSet::new(), toy_resolve, Clone::clone)
            .unwrap()
            .unwrap();
        assert_eq!(specs, ["c", "a-2.0-1", "b-1.5-1"]);
        assert_eq!(set, ["a", "b", "c"].map(String::from).into());

        // One the set never comes to hold is refused, after the pins.
        let o = overrides(
            d.path(),
            "packages:\n  a: {evr: 2.0-1}\n  nosuch: {evr: 1-1}\n",
        );
        let mut specs = vec!["a".to_string()];
        let e = o
            .resolve_pinned(&mut specs, BTreeSet::new(), toy_resolve, Clone::clone)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("override nosuch: no package of that name is in the package set"),
            "{e}"
        );
    }

    /// With a lockfile, an override of a package the lockfile does not
    /// list was added to it and installed whatever the set needed: it
    /// replaces only what is listed, and pins the rest as the set needs.
    #[test]
    fn with_a_lockfile_an_override_replaces_only_what_it_lists() {
        let d = tempfile::tempdir().unwrap();
        let o = overrides(
            d.path(),
            "packages:\n  a: {evr: 2.0-1}\n  b: {evr: 1.5-1}\n",
        );
        let mut lock =
            Lockfile::parse(r#"{"packages": {"a": {"evr": "1.0-1"}}}"#, Path::new("l")).unwrap();
        o.replace_in(&mut lock);
        assert_eq!(lock.specs(), ["a-2.0-1"]);
        let mut specs = lock.specs();
        let pinned = BTreeSet::from(["a".to_string()]);
        o.resolve_pinned(&mut specs, pinned.clone(), toy_resolve, Clone::clone)
            .unwrap()
            .unwrap();
        assert_eq!(specs, ["a-2.0-1", "b-1.5-1"]);
        // No package of the lockfile's set needs b: refused, not added.
        let mut lock =
            Lockfile::parse(r#"{"packages": {"a": {"evr": "1.0-1"}}}"#, Path::new("l")).unwrap();
        let o = overrides(d.path(), "packages:\n  b: {evr: 1.5-1}\n");
        o.replace_in(&mut lock);
        let mut specs = lock.specs();
        let e = o
            .resolve_pinned(&mut specs, BTreeSet::new(), toy_resolve, Clone::clone)
            .unwrap_err();
        assert!(e.to_string().contains("override b: no package"), "{e}");
    }

    #[test]
    fn source_names_and_repomd_times() {
        assert_eq!(source_name("bash-4.4.20-4.el8_6.src.rpm"), Some("bash"));
        assert_eq!(
            source_name("kernel-rt-6.1.0-57.el8_6.src.rpm"),
            Some("kernel-rt")
        );
        assert_eq!(source_name("x.src.rpm"), None);
        assert_eq!(source_name("x-1.src.rpm"), None);
        let d = tempfile::tempdir().unwrap();
        let repomd = d.path().join("repomd.xml");
        std::fs::write(
            &repomd,
            "<repomd><revision>9</revision><data type=\"primary\"><timestamp>1792022400</timestamp></data>\
             <data type=\"filelists\"><timestamp>1792022500</timestamp></data></repomd>",
        )
        .unwrap();
        assert_eq!(repomd_generated(&repomd), Some(1_792_022_500));
        assert_eq!(rfc3339(1_792_022_400), "2026-10-15T00:00:00Z");
    }
}
