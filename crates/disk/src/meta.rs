//! The files that carry the build's identity: the aleph file on the root
//! filesystem, `/boot/coreos/platforms.json`, the BLS title, the build's
//! meta.json `images` and the CoreOS stream metadata. Pure: values in,
//! JSON values or strings out.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use strata_oscontainer::{OcpVersion, OsName, Version};

use crate::platform::Platform;

/// What is being built, as the image labels tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    /// `org.opencontainers.image.version`.
    pub version: Version,
    /// `com.coreos.openshift-version`; none on a base image.
    pub openshift_version: Option<OcpVersion>,
    /// The image reference (`oci:DIR:TAG` or `docker://…`), or the target
    /// reference nodes follow when one is given.
    pub image: String,
    /// The manifest digest.
    pub digest: String,
    pub ostree_commit: String,
    pub labels: BTreeMap<String, String>,
    /// `com.coreos.osname`, the stateroot and artifact name prefix.
    pub osname: OsName,
    /// The build history stream, e.g. `ocp-4.13` or `rhel-8.6`.
    pub stream: String,
}

impl Identity {
    /// The stream name in stream.json: the installer's, `<osname>-<release>`
    /// (`rhcos-4.19`, `scos-4.19`), for a release image; the build stream
    /// for a base image.
    pub fn installer_stream(&self) -> String {
        match &self.openshift_version {
            Some(v) => format!("{}-{v}", self.osname.as_str()),
            None => self.stream.clone(),
        }
    }
}

/// Where the aleph file is, on the root filesystem.
pub const ALEPH_FILE: &str = ".coreos-aleph-version.json";

/// `/.coreos-aleph-version.json`.
pub fn aleph(id: &Identity) -> Value {
    json!({
        "build": id.version,
        "version": id.version,
        "ref": id.image,
        "ostree-commit": id.ostree_commit,
        "container-image": {
            "image-name": id.image,
            "image-digest": id.digest,
            "image-labels": id.labels,
        },
        "openshift-version": id.openshift_version,
    })
}

/// The BLS title: the OS name, the build version and the OCP release.
pub fn bls_title(pretty_name: &str, id: &Identity, index: usize) -> String {
    let ocp = id
        .openshift_version
        .as_ref()
        .map(|v| format!(" (OpenShift {v})"))
        .unwrap_or_default();
    format!("{pretty_name} {}{ocp} (ostree:{index})", id.version)
}

/// `/boot/coreos/platforms.json`: per platform its GRUB commands and kernel
/// arguments (the CoreOS shape), plus the version it was built for.
pub fn platforms_json(platforms: &[Platform], id: &Identity) -> Value {
    let map: BTreeMap<&str, Value> = platforms
        .iter()
        .map(|p| {
            (
                p.name,
                json!({
                    "grub_commands": p.grub_commands,
                    "kernel_arguments": p.console_kargs,
                    "version": id.version,
                    "openshift-version": id.openshift_version,
                }),
            )
        })
        .collect();
    json!(map)
}

/// One finished artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    pub platform: String,
    pub format: String,
    /// Absolute path in the build directory.
    pub path: std::path::PathBuf,
    pub size: u64,
    pub sha256: String,
    /// The content inside, when the artifact is compressed.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub uncompressed: Option<Uncompressed>,
}

/// Size and hash of what a compressed artifact holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Uncompressed {
    #[serde(rename = "uncompressed-size")]
    pub size: u64,
    #[serde(rename = "uncompressed-sha256")]
    pub sha256: String,
}

impl Artifact {
    /// As the build's record lists it (path relative to the build
    /// directory).
    pub fn record(&self) -> strata_workdir::record::Artifact {
        strata_workdir::record::Artifact {
            path: file_name(self),
            sha256: self.sha256.clone(),
            size: self.size,
            format: self.format.clone(),
            uncompressed_sha256: self.uncompressed.as_ref().map(|u| u.sha256.clone()),
            uncompressed_size: self.uncompressed.as_ref().map(|u| u.size),
        }
    }
}

fn file_name(a: &Artifact) -> String {
    a.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// CoreOS stream metadata listing the artifacts (locations relative to the
/// build directory), `last_modified` being RFC 3339.
pub fn stream_json(id: &Identity, table: &[(&Platform, &Artifact)], last_modified: &str) -> Value {
    let mut artifacts = serde_json::Map::new();
    for (p, a) in table {
        let entry = artifacts
            .entry(p.stream_platform.to_string())
            .or_insert_with(|| json!({"release": id.version, "formats": {}}));
        let mut disk = json!({"location": file_name(a), "sha256": a.sha256});
        if let Some(u) = &a.uncompressed {
            disk["uncompressed-sha256"] = json!(u.sha256);
        }
        entry["formats"][p.stream_format] = json!({ "disk": disk });
    }
    json!({
        "stream": id.installer_stream(),
        "metadata": {"last-modified": last_modified},
        "architectures": {"x86_64": {"artifacts": artifacts}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ocp: Option<&str>) -> Identity {
        Identity {
            version: "413.86.202610150000-0".parse().unwrap(),
            openshift_version: ocp.map(|o| o.parse().unwrap()),
            image: "oci:/w/oci:ocp-4.13".into(),
            digest: "sha256:aa".into(),
            ostree_commit: "cc".into(),
            labels: BTreeMap::new(),
            osname: "rhcos".parse().unwrap(),
            stream: "ocp-4.13".into(),
        }
    }

    #[test]
    fn titles_and_aleph() {
        assert_eq!(
            bls_title("RHCOS", &id(Some("4.13")), 0),
            "RHCOS 413.86.202610150000-0 (OpenShift 4.13) (ostree:0)"
        );
        assert_eq!(
            bls_title("RHEL", &id(None), 0),
            "RHEL 413.86.202610150000-0 (ostree:0)"
        );
        let a = aleph(&id(Some("4.13")));
        assert_eq!(a["openshift-version"], "4.13");
        assert_eq!(a["container-image"]["image-digest"], "sha256:aa");
    }

    #[test]
    fn stream_names_are_the_installers() {
        assert_eq!(id(Some("4.13")).installer_stream(), "rhcos-4.13");
        let mut okd = id(Some("4.19"));
        okd.osname = "scos".parse().unwrap();
        assert_eq!(okd.installer_stream(), "scos-4.19");
        assert_eq!(id(None).installer_stream(), "ocp-4.13");
    }
}
