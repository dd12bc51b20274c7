//! `manifest-lock.x86_64.json`: the exact package set of a compose.
//!
//! Written by every compose; `--lockfile F` composes exactly the packages
//! it lists (name -> evra, arch, digest) and fails naming any it cannot
//! find. The repos' metadata checksums record what the set was resolved
//! against.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = "manifest-lock.x86_64.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockfile {
    pub packages: BTreeMap<String, LockedPackage>,
    /// repo id -> checksum of its repomd.xml when resolved.
    #[serde(default)]
    pub repos: BTreeMap<String, LockedRepo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedPackage {
    pub evra: String,
    /// `sha256:<hex>` of the .rpm file.
    pub digest: String,
    pub repo: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedRepo {
    pub baseurl: String,
    /// `sha256:<hex>` of repodata/repomd.xml, when the repo is local.
    pub repomd: Option<String>,
}

impl Lockfile {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the lockfile {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("parsing the lockfile {}", path.display()))
    }

    /// `name-evr.arch` specs that select exactly the locked packages.
    pub fn specs(&self) -> Vec<String> {
        self.packages
            .iter()
            .map(|(name, p)| {
                let evra = p
                    .evra
                    .split_once(':')
                    .map_or(p.evra.as_str(), |(_, rest)| rest);
                format!("{name}-{evra}")
            })
            .collect()
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("lockfile serializes");
        out.push(b'\n');
        out
    }
}

/// `sha256:<hex>` of a local repo's repomd.xml, if the URL is `file://`.
pub fn repomd_digest(baseurl: &str) -> Option<String> {
    use sha2::Digest;
    let dir = baseurl.strip_prefix("file://")?;
    let bytes = std::fs::read(Path::new(dir).join("repodata/repomd.xml")).ok()?;
    Some(format!(
        "sha256:{}",
        hex::encode(sha2::Sha256::digest(bytes))
    ))
}
