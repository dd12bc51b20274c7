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

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use strata_dnf::Package;
use strata_workdir::record::nevra_name;

pub const FILE_NAME: &str = "manifest-lock.x86_64.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the lockfile {}", path.display()))?;
        let lock: Lockfile = if text.trim_start().starts_with('{') {
            serde_json::from_str(&text)
                .with_context(|| format!("parsing the lockfile {}", path.display()))?
        } else {
            strata_manifest::parse_yaml(&text)
                .map_err(|e| anyhow::anyhow!("parsing the lockfile {}: {e}", path.display()))?
        };
        for (name, p) in &lock.packages {
            if p.evra.is_some() == p.evr.is_some() {
                bail!(
                    "{}: package {name} needs exactly one of evra and evr",
                    path.display()
                );
            }
        }
        Ok(lock)
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
            extra.join(", ")
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
            differ.join("; ")
        );
    }
    Ok(())
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
