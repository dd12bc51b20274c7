//! What a build's input hash covers, for compose and derive alike: the
//! policy's keys (fingerprint and file content), the flattened manifest
//! (what the manifests mean, not their bytes: a comment changes nothing),
//! the content of every file it copies into the tree, and every resolved
//! package's NEVRA and repodata checksum. Each stage adds what is its own (a format tag before,
//! the base and overrides for derive).
//!
//! The hash covers content, never location: the same manifests in another
//! checkout, against a mirror of the same repos, with the entitlement
//! certificates of another machine, give the same hash and so the same
//! commit. Where a repo lives is left out (its packages' checksums say what
//! it gave), a file the manifest read is named by its digest rather than
//! its path, and a `file://` signing key by the digest of its content.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};
use strata_dnf::Package;
use strata_manifest::{InputFile, InputKind};

use crate::policy::Policy;

/// Repo fields that say where a repo is or how this machine reaches it,
/// not what it holds.
const REPO_LOCATION_FIELDS: &[&str] = &[
    "baseurl",
    "metalink",
    "mirrorlist",
    "sslcacert",
    "sslclientcert",
    "sslclientkey",
];

/// Feeds the common inputs into `h`.
pub fn hash_common(
    h: &mut Sha256,
    policy: &Policy,
    manifest_json: &str,
    files: &[InputFile],
    packages: &[Package],
) -> Result<()> {
    for key in &policy.keys {
        h.update(key.fingerprint.as_bytes());
        h.update(Sha256::digest(
            std::fs::read(&key.file).with_context(|| format!("reading {}", key.file.display()))?,
        ));
    }
    h.update(without_locations(manifest_json, files)?.as_bytes());

    // Manifests, includes and .repo files count by what they mean: their
    // values are in the flattened manifest already, while their bytes hold
    // comments, layout and the locations left out above. Files whose bytes
    // become content (add-files sources) count by their bytes.
    let mut digests: Vec<(String, &str)> = files
        .iter()
        .filter(|f| f.kind == InputKind::AddFilesSource)
        .map(|f| (format!("{:?}", f.kind), f.sha256.as_str()))
        .collect();
    digests.sort();
    for (kind, sha) in digests {
        h.update(kind.as_bytes());
        h.update(sha.as_bytes());
    }
    for p in packages {
        h.update(p.nevra.as_bytes());
        if let Some(c) = &p.checksum {
            h.update(c.kind.as_bytes());
            h.update(c.hex.as_bytes());
        }
    }
    Ok(())
}

/// The canonical manifest JSON with every location replaced by content:
/// paths of files the load read become `sha256:<hex>`, repo locations are
/// dropped, keys named by file become the digest of the key, and the lockfile
/// path is dropped (the packages it pins are hashed one by one).
fn without_locations(manifest_json: &str, files: &[InputFile]) -> Result<String> {
    let mut value: Value =
        serde_json::from_str(manifest_json).context("reading the canonical manifest")?;
    let by_path: BTreeMap<String, String> = files
        .iter()
        .map(|f| {
            (
                f.path.to_string_lossy().into_owned(),
                format!("sha256:{}", f.sha256),
            )
        })
        .collect();
    if let Value::Object(top) = &mut value {
        top.remove("lockfile");
        if let Some(Value::Array(keys)) = top.get_mut("inputs").and_then(|i| i.get_mut("keys")) {
            for key in keys.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(Value::String(path)) = key.get_mut("file") {
                    *path = file_digest(Path::new(path.as_str()))?;
                }
            }
        }
        if let Some(Value::Array(repos)) = top.get_mut("repos") {
            for repo in repos.iter_mut().filter_map(Value::as_object_mut) {
                for field in REPO_LOCATION_FIELDS {
                    repo.remove(*field);
                }
                if let Some(Value::Array(keys)) = repo.get_mut("gpgkey") {
                    for key in keys.iter_mut() {
                        if let Value::String(url) = key {
                            *url = key_content(url)?;
                        }
                    }
                }
            }
        }
    }
    replace_paths(&mut value, &by_path);
    // serde_json keeps the sorted order it parsed, or sorts: either way the
    // canonical order survives.
    Ok(value.to_string())
}

/// `file:///path` → the digest of the file; other URLs stay as written.
fn key_content(url: &str) -> Result<String> {
    match url.strip_prefix("file://") {
        Some(path) => file_digest(Path::new(path)),
        None => Ok(url.to_string()),
    }
}

/// The digest of a key file (bounded as every key file is read).
fn file_digest(path: &Path) -> Result<String> {
    let bytes = crate::policy::read_key(path).with_context(|| {
        format!(
            "reading {}",
            strata_process::text::escaped(&path.display().to_string())
        )
    })?;
    Ok(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
}

fn replace_paths(value: &mut Value, by_path: &BTreeMap<String, String>) {
    match value {
        Value::String(s) => {
            if let Some(digest) = by_path.get(s.as_str()) {
                *s = digest.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_paths(v, by_path)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_paths(v, by_path)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(path: &str, kind: InputKind, sha: &str) -> InputFile {
        InputFile {
            path: PathBuf::from(path),
            kind,
            sha256: sha.into(),
            size: 1,
        }
    }

    #[test]
    fn locations_give_way_to_content() {
        let key = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(key.path(), b"key").unwrap();
        let manifest = |root: &str| {
            format!(
                r#"{{"add-files":[{{"dest":"/etc/motd","src":"{root}/files/motd"}}],"lockfile":"{root}/lock.json","inputs":{{"keys":[{{"file":"{key}"}}]}},"packages":["bash"],"repos":[{{"baseurl":["file://{root}/baseos"],"gpgkey":["file://{key}"],"id":"baseos","sslclientcert":"/etc/pki/entitlement/1.pem"}}]}}"#,
                key = key.path().display()
            )
        };
        let view = |root: &str| {
            let files = [file(
                &format!("{root}/files/motd"),
                InputKind::AddFilesSource,
                "ab",
            )];
            without_locations(&manifest(root), &files).unwrap()
        };
        assert_eq!(view("/a"), view("/b/c"));
        let v = view("/a");
        assert!(v.contains(r#""src":"sha256:ab""#), "{v}");
        assert!(!v.contains(&key.path().display().to_string()), "{v}");
        assert!(
            !v.contains("baseurl") && !v.contains("lockfile") && !v.contains("pem"),
            "{v}"
        );
        assert!(v.contains(&hex::encode(Sha256::digest(b"key"))), "{v}");
        assert!(v.contains(r#""packages":["bash"]"#), "{v}");
    }

    /// A `.repo` file's `gpgkey=file:///dev/zero` was hashed with
    /// fs::read: the device whole, until memory ran out.
    #[test]
    fn a_repo_key_that_is_a_device_is_refused_unread() {
        let manifest = r#"{"repos":[{"id":"baseos","gpgkey":["file:///dev/zero"]}]}"#;
        let err = without_locations(manifest, &[]).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "reading /dev/zero: a character device, not a regular file"
        );
        let manifest = r#"{"inputs":{"keys":[{"file":"/dev/zero"}]}}"#;
        let err = without_locations(manifest, &[]).unwrap_err();
        assert!(format!("{err:#}").ends_with("a character device, not a regular file"));
    }
}
