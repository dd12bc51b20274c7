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

/// The meta.json object saying what the listed disks hold:
/// `ostree-commit` and `image-reference` (the image they name).
pub const IMAGE_CONFIG: &str = "coreos-assembler.image-config";

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
    /// Of the content inside, when the artifact is compressed.
    #[serde(
        rename = "uncompressed-sha256",
        skip_serializing_if = "Option::is_none"
    )]
    pub uncompressed_sha256: Option<String>,
}

fn file_name(a: &Artifact) -> String {
    a.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `images` object of meta.json (the shape coreos-assembler writes).
pub fn meta_images(artifacts: &[Artifact]) -> Value {
    let map: BTreeMap<&str, Value> = artifacts
        .iter()
        .map(|a| {
            let mut v = json!({
                "path": file_name(a),
                "size": a.size,
                "sha256": a.sha256,
                "format": a.format,
            });
            if let Some(u) = &a.uncompressed_sha256 {
                v["uncompressed-sha256"] = json!(u);
            }
            (a.platform.as_str(), v)
        })
        .collect();
    json!(map)
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
        if let Some(u) = &a.uncompressed_sha256 {
            disk["uncompressed-sha256"] = json!(u);
        }
        entry["formats"][p.stream_format] = json!({ "disk": disk });
    }
    json!({
        "stream": id.installer_stream(),
        "metadata": {"last-modified": last_modified},
        "architectures": {"x86_64": {"artifacts": artifacts}},
    })
}

/// `seconds` since the epoch as `YYYY-MM-DDThh:mm:ssZ`.
pub fn rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rem = seconds.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_760_486_400), "2025-10-15T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
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
