//! Enforces the RHEL-only input policy on a resolved package set.
//!
//! Two rules, checked by strata itself, independently of libdnf's gpgcheck:
//! every package comes from a repo that `inputs.repos` allows, and carries
//! a signature that verifies with a key that `inputs.keys` allows. Any
//! breach fails the build with every offending NEVRA, its repo and the rule
//! it broke. Keys are read from the repos' `gpgkey` files and from key
//! files the policy names; a fingerprint the policy lists but no file holds
//! is an error too (nothing could verify against it).
//!
//! Why a second verifier beside libdnf's gpgcheck (librpm's keyring): the
//! two answer different questions. gpgcheck asks whether a package is
//! signed by *any* key its repo's `gpgkey` names, and a repo file is input
//! like any other (an EPEL repo names EPEL's key). The policy asks *which*
//! key signed it and whether the manifest allows that key for that repo,
//! and must name the fingerprint when it refuses; librpm's keyring answers
//! yes or no only. The policy check runs on the downloaded files before any
//! scriptlet runs, in strata's own code (the rpm crate, pure Rust), so a
//! libdnf that skipped gpgcheck (a repo with `gpgcheck=0`) still cannot let
//! a package through.
//!
//! The check reads each package whole and holds its payload to the digest
//! in the signed header (a mismatch is a [`Rule::BadSignature`] naming the
//! digest). Installs of packages that passed it rely on that:
//! `DnfOptions::payloads_verified` tells librpm not to read every package
//! again, on one core, to check the same digests. The payload is hashed as
//! it streams from the file, not held in memory; only a package whose
//! payload digests are not the single SHA-256 one RHEL's rpm writes is read
//! whole, by the rpm crate, so that every digest it carries is checked.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rayon::prelude::*;
use strata_process::text::escaped;

/// A public key the policy allows.
#[derive(Debug, Clone)]
pub struct AllowedKey {
    /// Upper-case hex.
    pub fingerprint: String,
    /// The armored file it came from (possibly holding other keys too).
    pub file: PathBuf,
    armored: Vec<u8>,
}

/// The policy, with its keys loaded.
#[derive(Debug, Clone)]
pub struct Policy {
    pub repos: Vec<String>,
    pub keys: Vec<AllowedKey>,
    /// Where the packages verified before are remembered (see
    /// [`Policy::remembering`]).
    remembered: Option<PathBuf>,
}

/// One package to check.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub nevra: String,
    pub repo: String,
    pub path: PathBuf,
}

/// Which rule a package broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Its repo is not in `inputs.repos`.
    RepoNotAllowed,
    /// It carries no OpenPGP signature.
    Unsigned,
    /// Signed, but by a key `inputs.keys` does not list.
    KeyNotAllowed { signer: String },
    /// Signed by an allowed key, but the signature does not verify.
    BadSignature { detail: String },
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::RepoNotAllowed => write!(f, "its repo is not in inputs.repos"),
            Rule::Unsigned => write!(f, "it is not signed (inputs.keys requires a signature)"),
            Rule::KeyNotAllowed { signer } => {
                write!(
                    f,
                    "it is signed by key {signer}, which inputs.keys does not allow"
                )
            }
            Rule::BadSignature { detail } => write!(f, "its signature does not verify: {detail}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub nevra: String,
    pub repo: String,
    pub rule: Rule,
}

/// The packages that broke the policy; the build refuses them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    pub violations: Vec<Violation>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line: the `error:` line of a CI log names every offender.
        write!(
            f,
            "{} package(s) break the input policy: ",
            self.violations.len()
        )?;
        for (i, v) in self.violations.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{} from repo {}: {}", v.nevra, v.repo, v.rule)?;
        }
        Ok(())
    }
}

/// A package the solver could not find among the allowed repos but that a
/// disallowed repo offers: named with the repo and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("package {name} is only available from repo {repo}, which inputs.repos does not allow ({nevra})")]
pub struct OnlyInDisallowedRepo {
    pub name: String,
    pub nevra: String,
    pub repo: String,
}

impl Policy {
    /// Loads the allowed keys: every key in `key_files` (the repos' gpgkey
    /// files and files the policy names) whose fingerprint `fingerprints`
    /// lists, plus every key of `policy_files` (named by the policy itself).
    pub fn load(
        repos: Vec<String>,
        fingerprints: &[String],
        key_files: &[PathBuf],
        policy_files: &[PathBuf],
    ) -> Result<Self> {
        let mut keys: BTreeMap<String, AllowedKey> = BTreeMap::new();
        let wanted: Vec<String> = fingerprints.iter().map(|f| normalize(f)).collect();
        for (file, take_all) in key_files
            .iter()
            .map(|f| (f, false))
            .chain(policy_files.iter().map(|f| (f, true)))
        {
            let armored = read_key(file).with_context(|| {
                format!(
                    "reading the key file {}",
                    escaped(&file.display().to_string())
                )
            })?;
            for fp in fingerprints_of(&armored)
                .with_context(|| format!("parsing the key file {}", file.display()))?
            {
                if take_all || wanted.contains(&fp) {
                    keys.entry(fp.clone()).or_insert(AllowedKey {
                        fingerprint: fp,
                        file: file.clone(),
                        armored: armored.clone(),
                    });
                }
            }
        }
        if let Some(missing) = wanted.iter().find(|f| !keys.contains_key(*f)) {
            anyhow::bail!(
                "inputs.keys allows key {missing}, but no gpgkey file of the manifest's repos holds it"
            );
        }
        Ok(Self {
            repos,
            keys: keys.into_values().collect(),
            remembered: None,
        })
    }

    /// The policy, remembering in `dir` each package file whose signature
    /// and payload digest it verified, by the file's device, inode, size,
    /// modification and change times and the key that verified it: a
    /// later check of the same file, unchanged since, trusts that (the
    /// repository rule is checked every time). A file changed in any way
    /// has another change time, which no process can set back.
    pub fn remembering(mut self, dir: &Path) -> Self {
        self.remembered = Some(dir.to_path_buf());
        self
    }

    /// Checks every candidate; returns all violations at once.
    pub fn check(&self, candidates: &[Candidate]) -> Result<(), PolicyError> {
        let mut violations: Vec<Violation> = candidates
            .par_iter()
            .filter_map(|c| {
                self.rule_broken(c).map(|rule| Violation {
                    nevra: c.nevra.clone(),
                    repo: c.repo.clone(),
                    rule,
                })
            })
            .collect();
        violations.sort_by(|a, b| a.nevra.cmp(&b.nevra));
        if violations.is_empty() {
            Ok(())
        } else {
            Err(PolicyError { violations })
        }
    }

    fn rule_broken(&self, c: &Candidate) -> Option<Rule> {
        if !self.repos.iter().any(|r| r == &c.repo) {
            return Some(Rule::RepoNotAllowed);
        }
        let pkg = match PackageFile::open(&c.path) {
            Ok(p) => p,
            Err(e) => {
                return Some(Rule::BadSignature {
                    detail: format!("cannot read {}: {e}", c.path.display()),
                })
            }
        };
        let signers: Vec<String> = match pkg.metadata.signatures() {
            Ok(s) => s
                .iter()
                .filter_map(|s| {
                    s.fingerprint()
                        .map(normalize)
                        .or_else(|| s.key_id().map(normalize))
                })
                .collect(),
            Err(e) => {
                return Some(Rule::BadSignature {
                    detail: e.to_string(),
                })
            }
        };
        let Some(first) = signers.first() else {
            return Some(Rule::Unsigned);
        };
        let Some(key) = self.keys.iter().find(|k| {
            signers
                .iter()
                .any(|s| k.fingerprint == *s || k.fingerprint.ends_with(s.as_str()))
        }) else {
            return Some(Rule::KeyNotAllowed {
                signer: first.clone(),
            });
        };
        let verifier = match rpm::signature::pgp::Verifier::from_asc_bytes(&key.armored) {
            Ok(v) => v,
            Err(e) => {
                return Some(Rule::BadSignature {
                    detail: format!("key file {}: {e}", key.file.display()),
                })
            }
        };
        let memo = self
            .remembered
            .as_deref()
            .and_then(|dir| Verified::of(dir, &c.path, &key.fingerprint));
        if memo.as_ref().is_some_and(Verified::recorded) {
            return None;
        }
        match pkg.verify(verifier) {
            Ok(()) => {
                if let Some(memo) = memo {
                    memo.record(&c.path);
                }
                None
            }
            Err(e) => Some(Rule::BadSignature {
                detail: e.to_string(),
            }),
        }
    }
}

/// The record that one state of a package file verified with one key: an
/// empty file named by the hash of both.
struct Verified {
    record: PathBuf,
    identity: String,
    fingerprint: String,
}

impl Verified {
    fn identity(path: &Path, fingerprint: &str) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(format!(
            "{} {} {} {}.{} {}.{} {fingerprint}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ))
    }

    fn of(dir: &Path, path: &Path, fingerprint: &str) -> Option<Verified> {
        use sha2::{Digest, Sha256};
        let identity = Self::identity(path, fingerprint)?;
        let name = hex::encode(Sha256::digest(identity.as_bytes()));
        Some(Verified {
            record: dir.join(name),
            identity,
            fingerprint: fingerprint.to_string(),
        })
    }

    fn recorded(&self) -> bool {
        self.record.exists()
    }

    /// Records it, unless the file changed while it was verified or was
    /// changed so recently that a change within the same clock tick could
    /// go unseen.
    fn record(self, path: &Path) {
        use std::os::unix::fs::MetadataExt;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let settled = std::fs::metadata(path).is_ok_and(|m| now - m.ctime() >= 2);
        if !settled || Self::identity(path, &self.fingerprint).as_deref() != Some(&self.identity) {
            return;
        }
        let written = self
            .record
            .parent()
            .map(std::fs::create_dir_all)
            .unwrap_or(Ok(()))
            .and_then(|()| std::fs::write(&self.record, b""));
        if let Err(e) = written {
            tracing::debug!(record = %self.record.display(), error = %e, "policy: not remembered");
        }
    }
}

/// A package file opened for the check: its headers parsed, its payload
/// still in the file. The payload is hashed as it is read, a buffer at a
/// time: a package is never held in memory whole (a kernel's modules are
/// hundreds of MiB, and the check runs on every core).
struct PackageFile {
    metadata: rpm::PackageMetadata,
    payload: std::io::BufReader<std::fs::File>,
}

impl PackageFile {
    fn open(path: &Path) -> Result<PackageFile, rpm::Error> {
        let mut payload = std::io::BufReader::new(std::fs::File::open(path)?);
        let metadata = rpm::PackageMetadata::parse(&mut payload)?;
        Ok(PackageFile { metadata, payload })
    }

    /// The header's signatures and digests, and the payload held to the
    /// SHA-256 digest the header carries (the one RHEL's rpm writes).
    /// A package whose payload carries other digests only is checked by the
    /// rpm crate reading it whole, so that no digest goes unchecked.
    fn verify(mut self, verifier: rpm::signature::pgp::Verifier) -> Result<(), rpm::Error> {
        use rpm::IndexTag;
        let header = &self.metadata.header;
        let sha256 = header
            .get_entry_data_as_string(IndexTag::RPMTAG_PAYLOADSHA256)
            .ok()
            .map(str::to_owned);
        let others = [
            IndexTag::RPMTAG_PAYLOAD_SHA512,
            IndexTag::RPMTAG_PAYLOAD_SHA3_256,
        ]
        .iter()
        .any(|t| header.entry_is_present(*t));
        let Some(expected) = sha256.filter(|_| !others) else {
            let mut whole = Vec::new();
            std::io::Read::read_to_end(&mut self.payload, &mut whole)?;
            let pkg = rpm::Package {
                metadata: self.metadata,
                payload: whole,
            };
            return pkg.verify_signature(verifier);
        };
        let mut report = self.metadata.check_signatures(&verifier)?;
        let (_, actual) =
            crate::initramfs_cache::copy_hashing(&mut self.payload, &mut std::io::sink())?;
        report.digests.payload_sha256 = if actual == expected {
            rpm::DigestStatus::Verified
        } else {
            rpm::DigestStatus::Mismatch { expected, actual }
        };
        report.into_result()
    }
}

fn normalize(fp: &str) -> String {
    fp.chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_uppercase()
}

/// Fingerprints of every key in an armored key file.
pub fn fingerprints_of(armored: &[u8]) -> Result<Vec<String>> {
    use pgp::composed::Deserializable;
    use pgp::types::KeyDetails;
    let (keys, _) = pgp::composed::SignedPublicKey::from_armor_many(armored)?;
    keys.map(|k| Ok(hex::encode_upper(k?.fingerprint().as_bytes())))
        .collect()
}

/// `file://` URLs and plain paths name local key files; others are refused.
pub fn key_path(url_or_path: &str) -> Result<PathBuf> {
    if let Some(p) = url_or_path.strip_prefix("file://") {
        Ok(PathBuf::from(p))
    } else if Path::new(url_or_path).is_absolute() {
        Ok(PathBuf::from(url_or_path))
    } else {
        anyhow::bail!(
            "gpgkey {url_or_path}: only local keys (file:// or absolute paths) are supported; download the key next to the manifest"
        )
    }
}

/// The most strata reads of a key file (an armored public key is a few
/// KiB; a keyring of many, some hundred).
pub(crate) const MAX_KEY_BYTES: u64 = 1 << 20;

/// A key file a manifest or a `.repo` file names: a regular file of at
/// most [`MAX_KEY_BYTES`] (`gpgkey=file:///dev/zero` is refused, not read
/// until memory runs out).
pub(crate) fn read_key(path: &Path) -> std::io::Result<Vec<u8>> {
    strata_process::regular::read_regular(path, MAX_KEY_BYTES)
}

#[cfg(test)]
mod key_file_tests {
    use super::*;

    /// `inputs.keys: [{file: /dev/zero}]` was read with fs::read: the
    /// device whole, until memory ran out.
    #[test]
    fn a_policy_key_file_that_is_a_device_or_too_large_is_refused_unread() {
        let err = Policy::load(vec![], &[], &[], &[PathBuf::from("/dev/zero")]).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "reading the key file /dev/zero: a character device, not a regular file"
        );
        let big = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(big.path(), vec![b'x'; MAX_KEY_BYTES as usize + 1]).unwrap();
        let err = Policy::load(vec![], &[], &[big.path().to_path_buf()], &[]).unwrap_err();
        assert!(
            format!("{err:#}").contains("larger than 1048576 bytes"),
            "{err:#}"
        );
    }
}
