//! coreos-assembler's `meta.json`, projected from strata's record, and the
//! check of a meta.json against the rules of cosa's schema (`src/v1.json`)
//! that strata's records touch.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{rfc3339, Artifact, BuildMeta, PackageDiff, ARCH};

/// coreos-assembler's meta.json (its `src/v1.json`): only keys the schema
/// defines, every required one present.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CosaMeta {
    pub buildid: String,
    pub name: String,
    pub summary: String,
    #[serde(rename = "ostree-commit")]
    pub ostree_commit: String,
    /// RFC 3339, the build's SOURCE_DATE_EPOCH.
    #[serde(rename = "ostree-timestamp")]
    pub ostree_timestamp: String,
    #[serde(rename = "ostree-version")]
    pub ostree_version: String,
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ostree_ref: Option<String>,
    #[serde(rename = "coreos-assembler.basearch")]
    pub basearch: &'static str,
    /// RFC 3339; the SOURCE_DATE_EPOCH, not the wall clock, so that a
    /// rebuild writes the same file.
    #[serde(rename = "coreos-assembler.build-timestamp")]
    pub build_timestamp: String,
    #[serde(
        rename = "coreos-assembler.image-input-checksum",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_checksum: Option<String>,
    #[serde(
        rename = "coreos-assembler.config-gitrev",
        skip_serializing_if = "Option::is_none"
    )]
    pub config_gitrev: Option<String>,
    /// `"true"` or `"false"` (a string in the schema).
    #[serde(
        rename = "coreos-assembler.config-dirty",
        skip_serializing_if = "Option::is_none"
    )]
    pub config_dirty: Option<String>,
    #[serde(
        rename = "coreos-assembler.container-config-git",
        skip_serializing_if = "Option::is_none"
    )]
    pub config_git: Option<serde_json::Value>,
    #[serde(
        rename = "coreos-assembler.overrides-active",
        skip_serializing_if = "Option::is_none"
    )]
    pub overrides_active: Option<bool>,
    /// Against the previous build of the stream.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pkgdiff: Vec<serde_json::Value>,
    /// A derived build against its base.
    #[serde(rename = "parent-pkgdiff", skip_serializing_if = "Vec::is_empty")]
    pub parent_pkgdiff: Vec<serde_json::Value>,
    /// Artifacts, `ostree` (the image as an OCI archive) first among
    /// equals: the schema requires it whenever `images` is present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<BTreeMap<String, Artifact>>,
}

impl CosaMeta {
    /// The meta.json of a build.
    pub fn of(m: &BuildMeta) -> CosaMeta {
        let git = m.source.as_ref().and_then(|s| s.git.as_ref());
        let derived = m.derived.as_ref();
        let parent_pkgdiff = derived
            .map(|d| {
                let mut diff = PackageDiff {
                    previous: None,
                    added: m.packages.clone(),
                    removed: Vec::new(),
                    changed: d.base_upgrades.clone(),
                };
                diff.added.retain(|n| {
                    !d.base_upgrades
                        .iter()
                        .any(|u| u.ends_with(&format!(" -> {n}")))
                });
                diff.rpm_ostree()
            })
            .unwrap_or_default();
        CosaMeta {
            buildid: m.version.clone(),
            name: m.name.clone(),
            summary: m.summary.clone(),
            ostree_commit: m.ostree_commit.clone(),
            ostree_timestamp: rfc3339(m.source_date_epoch as i64),
            ostree_version: m.version.clone(),
            ostree_ref: m.ostree_ref.clone(),
            basearch: ARCH,
            build_timestamp: rfc3339(m.source_date_epoch as i64),
            input_checksum: Some(m.inputhash.clone()).filter(|h| h.len() >= 64),
            config_gitrev: git.map(|g| g.commit.clone()),
            config_dirty: git.map(|g| g.dirty.to_string()),
            config_git: git.and_then(|g| {
                let origin = g.origin.as_ref()?;
                let mut v = serde_json::json!({
                    "commit": g.commit,
                    "origin": origin,
                    "dirty": g.dirty.to_string(),
                });
                if let Some(b) = &g.branch {
                    v["branch"] = b.clone().into();
                }
                Some(v)
            }),
            overrides_active: (derived.is_some_and(|d| !d.overrides.is_empty())
                || m.tree.as_ref().is_some_and(|t| !t.overrides.is_empty()))
            .then_some(true),
            pkgdiff: m.package_diff.rpm_ostree(),
            parent_pkgdiff,
            images: m
                .disks
                .as_ref()
                .filter(|d| d.images.contains_key("ostree"))
                .map(|d| d.images.clone()),
        }
    }
}

/// Every top-level key coreos-assembler's schema defines (its
/// `additionalProperties` is false: any other key fails validation).
const COSA_KEYS: &[&str] = &[
    "advisories-diff",
    "aliyun",
    "amis",
    "aws-winli",
    "azure",
    "base-oscontainer",
    "build-url",
    "buildid",
    "coreos-assembler.basearch",
    "coreos-assembler.build-timestamp",
    "coreos-assembler.code-source",
    "coreos-assembler.config-dirty",
    "coreos-assembler.config-gitrev",
    "coreos-assembler.config-variant",
    "coreos-assembler.container-config-git",
    "coreos-assembler.container-image-git",
    "coreos-assembler.delayed-meta-merge",
    "coreos-assembler.image-config-checksum",
    "coreos-assembler.image-genver",
    "coreos-assembler.image-input-checksum",
    "coreos-assembler.meta-stamp",
    "coreos-assembler.oci-imported",
    "coreos-assembler.oci-imported-labels",
    "coreos-assembler.overrides-active",
    "coreos-assembler.yumrepos-git",
    "extensions",
    "extensions-container",
    "fedora-coreos.parent-commit",
    "fedora-coreos.parent-version",
    "gcp",
    "ibmcloud",
    "images",
    "koji",
    "kubevirt",
    "name",
    "oscontainer",
    "ostree-commit",
    "ostree-content-bytes-written",
    "ostree-content-checksum",
    "ostree-n-cache-hits",
    "ostree-n-content-total",
    "ostree-n-content-written",
    "ostree-n-metadata-total",
    "ostree-n-metadata-written",
    "ostree-timestamp",
    "ostree-version",
    "parent-advisories-diff",
    "parent-pkgdiff",
    "pkgdiff",
    "powervs",
    "ref",
    "release-payload",
    "rpm-ostree-inputhash",
    "s3",
    "summary",
];

/// Checks a meta.json against the rules of coreos-assembler's schema that
/// strata's records touch: the required keys and their types and lengths,
/// no key the schema does not define, `images` holding `ostree`, every
/// artifact a `path` and `sha256`. Returns each violation.
pub fn check_cosa_meta(meta: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let mut errors = Vec::new();
    let Some(obj) = meta.as_object() else {
        return vec!["meta.json is not an object".into()];
    };
    for key in obj.keys() {
        if !COSA_KEYS.contains(&key.as_str()) {
            errors.push(format!("{key}: not defined by the schema"));
        }
    }
    let string = |key: &str, min: usize, errors: &mut Vec<String>| match obj.get(key) {
        Some(Value::String(s)) if s.chars().count() >= min => {}
        Some(Value::String(_)) => errors.push(format!("{key}: shorter than {min}")),
        Some(_) => errors.push(format!("{key}: not a string")),
        None => {}
    };
    for key in [
        "buildid",
        "name",
        "ostree-commit",
        "ostree-timestamp",
        "ostree-version",
    ] {
        if !obj.contains_key(key) {
            errors.push(format!("{key}: required"));
        }
    }
    for (key, min) in [
        ("buildid", 1),
        ("name", 0),
        ("ostree-commit", 64),
        ("ostree-version", 1),
        ("ostree-timestamp", 0),
        ("ref", 1),
        ("summary", 1),
        ("coreos-assembler.basearch", 1),
        ("coreos-assembler.build-timestamp", 1),
        ("coreos-assembler.config-gitrev", 1),
        ("coreos-assembler.config-dirty", 1),
        ("coreos-assembler.image-input-checksum", 64),
        ("rpm-ostree-inputhash", 64),
    ] {
        string(key, min, &mut errors);
    }
    let ts = obj.get("ostree-timestamp").and_then(Value::as_str);
    let rfc3339_z = |t: &str| {
        let b = t.as_bytes();
        b.len() >= 11
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'-'
            && b[5..7].iter().all(u8::is_ascii_digit)
            && b[7] == b'-'
            && b[8..10].iter().all(u8::is_ascii_digit)
            && b[10] == b'T'
            && t.ends_with('Z')
    };
    if ts.is_some_and(|t| !rfc3339_z(t)) {
        errors.push("ostree-timestamp: not YYYY-MM-DDT…Z".into());
    }
    if let Some(v) = obj.get("coreos-assembler.overrides-active") {
        if !v.is_boolean() {
            errors.push("coreos-assembler.overrides-active: not a boolean".into());
        }
    }
    for key in ["pkgdiff", "parent-pkgdiff"] {
        if obj.get(key).is_some_and(|v| !v.is_array()) {
            errors.push(format!("{key}: not an array"));
        }
    }
    if let Some(git) = obj.get("coreos-assembler.container-config-git") {
        for (k, min) in [("commit", 5), ("origin", 1)] {
            if git
                .get(k)
                .and_then(Value::as_str)
                .is_none_or(|s| s.len() < min)
            {
                errors.push(format!(
                    "coreos-assembler.container-config-git.{k}: required"
                ));
            }
        }
    }
    if let Some(images) = obj.get("images") {
        match images.as_object() {
            None => errors.push("images: not an object".into()),
            Some(images) => {
                if !images.contains_key("ostree") {
                    errors.push("images.ostree: required".into());
                }
                for (name, a) in images {
                    for k in ["path", "sha256"] {
                        if !a.get(k).is_some_and(Value::is_string) {
                            errors.push(format!("images.{name}.{k}: required string"));
                        }
                    }
                    if a.get("size").is_some_and(|v| !v.is_number()) {
                        errors.push(format!("images.{name}.size: not a number"));
                    }
                    if a.get("uncompressed-size").is_some_and(|v| !v.is_u64()) {
                        errors.push(format!("images.{name}.uncompressed-size: not an integer"));
                    }
                }
            }
        }
    }
    errors
}
