//! The files that carry the build's identity: the aleph file on the root
//! filesystem, `/boot/coreos/platforms.json`, the BLS title, the build's
//! meta.json `images` and the CoreOS stream metadata. Pure: values in,
//! JSON values or strings out (an entry of a record that this strata
//! cannot project, a newer one's platform, is left out with a debug log).

use std::collections::BTreeMap;
use std::path::Path;

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
    title(pretty_name, id, &format!("ostree:{index}"))
}

/// The live media's boot menu title and ISO application id:
/// `<NAME> <version> (OpenShift <v>) (live)`.
pub fn live_title(pretty_name: &str, id: &Identity) -> String {
    title(pretty_name, id, "live")
}

/// `<NAME> <version> (OpenShift <v>) (<what>)`, without the OpenShift
/// part for a base image.
fn title(pretty_name: &str, id: &Identity, what: &str) -> String {
    let ocp = id
        .openshift_version
        .as_ref()
        .map(|v| format!(" (OpenShift {v})"))
        .unwrap_or_default();
    format!("{pretty_name} {}{ocp} ({what})", id.version)
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

/// What the build's archive of its image is called in its record
/// (meta.json's `images.ostree`); stream metadata does not list it.
pub const ARCHIVE_IMAGE: &str = "ostree";

/// CoreOS stream metadata projected from the build's record of its disks:
/// every artifact the record lists, whichever `strata disk` run made it,
/// each at `location(file name)`, `last_modified` being RFC 3339. A
/// compressed artifact's format is the platform's with the compressor's
/// suffix (`qcow2.gz`), as RHCOS's streams name them. Live media are
/// formats of metal: `iso` (its `disk`) and `pxe` (kernel, initramfs,
/// rootfs), as CoreOS streams list them. A platform this strata does not
/// know (a newer one's record) is left out; an artifact whose recorded
/// path has no file name is an error.
pub fn stream_json(
    id: &Identity,
    disks: &strata_workdir::record::Disks,
    last_modified: &str,
    location: &dyn Fn(&str) -> String,
) -> anyhow::Result<Value> {
    let mut artifacts = serde_json::Map::new();
    for (name, a) in &disks.images {
        if name == ARCHIVE_IMAGE {
            continue;
        }
        // The record's word is a file of the build directory: only its
        // name reaches the location (an older record may hold a path).
        let file_name = Path::new(&a.path)
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.chars().any(char::is_control))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "the build's record of its {name:?} image names {:?}, which is not a file name",
                    a.path.chars().take(128).collect::<String>()
                )
            })?;
        let file = json!({"location": location(file_name), "sha256": a.sha256});
        if crate::live::IMAGES.contains(&name.as_str()) {
            let entry = artifacts
                .entry("metal".to_string())
                .or_insert_with(|| json!({"release": id.version, "formats": {}}));
            match name.strip_prefix("live-") {
                Some("iso") => entry["formats"]["iso"] = json!({ "disk": file }),
                Some(part) => entry["formats"]["pxe"][part] = file,
                None => unreachable!("live media are named live-*"),
            }
            continue;
        }
        // A record written by a newer strata may list a platform this one
        // does not know: it is left out of the stream, not a reason to
        // stop every `strata disk` run of the build.
        let Ok(p) = Platform::get(name) else {
            tracing::debug!("stream.json leaves out {name:?}: not a platform this strata knows");
            continue;
        };
        let entry = artifacts
            .entry(p.stream_platform.to_string())
            .or_insert_with(|| json!({"release": id.version, "formats": {}}));
        let mut disk = file;
        let mut format = p.stream_format.to_string();
        if let Some(u) = &a.uncompressed_sha256 {
            disk["uncompressed-sha256"] = json!(u);
            if let Some(ext) = Path::new(&a.path).extension() {
                format = format!("{format}.{}", ext.to_string_lossy());
            }
        }
        entry["formats"][format] = json!({ "disk": disk });
    }
    Ok(json!({
        "stream": id.installer_stream(),
        "metadata": {"last-modified": last_modified},
        "architectures": {"x86_64": {"artifacts": artifacts}},
    }))
}

/// One stream of the CoreOS stream metadata from several (the builds of
/// one release: its platforms may come from different builds): every
/// architecture's artifacts, each platform's formats. A platform listed by
/// two builds must be the same release, and a format listed twice the same
/// artifact; `last-modified` is the newest.
pub fn merge_streams(streams: &[Value]) -> anyhow::Result<Value> {
    use anyhow::bail;
    let Some(first) = streams.first() else {
        bail!("no stream metadata to merge");
    };
    let name = first["stream"].clone();
    let mut arches = serde_json::Map::new();
    let mut last_modified = String::new();
    for s in streams {
        if s["stream"] != name {
            bail!(
                "stream metadata of {} and {} cannot be merged",
                name,
                s["stream"]
            );
        }
        if let Some(t) = s["metadata"]["last-modified"].as_str() {
            last_modified = last_modified.max(t.to_string());
        }
        for (arch, a) in s["architectures"].as_object().into_iter().flatten() {
            let into = arches
                .entry(arch.clone())
                .or_insert_with(|| json!({"artifacts": {}}));
            for (platform, p) in a["artifacts"].as_object().into_iter().flatten() {
                let slot = &mut into["artifacts"][platform];
                if slot.is_null() {
                    *slot = json!({"release": p["release"], "formats": {}});
                } else if slot["release"] != p["release"] {
                    bail!(
                        "{arch} {platform}: releases {} and {} in one stream",
                        slot["release"],
                        p["release"]
                    );
                }
                for (format, f) in p["formats"].as_object().into_iter().flatten() {
                    let have = &mut slot["formats"][format];
                    if !have.is_null() && have != f {
                        bail!("{arch} {platform} {format}: two different artifacts");
                    }
                    *have = f.clone();
                }
            }
        }
    }
    Ok(json!({
        "stream": name,
        "metadata": {"last-modified": last_modified},
        "architectures": arches,
    }))
}

/// What the installer writes as the ConfigMap's `releaseVersion`: the
/// payload's build (`oc adm release new`) replaces it with the release's
/// full version, which a disk build does not know.
pub const RELEASE_VERSION_PLACEHOLDER: &str = "0.0.1-snapshot";

/// The `coreos-bootimages` ConfigMap of a release, as the installer ships
/// it in the payload (`0000_50_installer_coreos-bootimages.yaml`): the
/// stream metadata (`data.stream`, which the Machine Config Operator reads
/// to update boot images) and `data.releaseVersion`, the release's version
/// or [`RELEASE_VERSION_PLACEHOLDER`].
pub fn bootimages_configmap(stream: &Value, release_version: &str) -> anyhow::Result<String> {
    let text = serde_json::to_string_pretty(stream)?;
    let mut out = String::from(
        "apiVersion: v1\n\
         kind: ConfigMap\n\
         metadata:\n  \
         name: coreos-bootimages\n  \
         namespace: openshift-machine-config-operator\n  \
         annotations:\n    \
         include.release.openshift.io/ibm-cloud-managed: \"true\"\n    \
         include.release.openshift.io/self-managed-high-availability: \"true\"\n    \
         include.release.openshift.io/single-node-developer: \"true\"\n\
         data:\n",
    );
    out.push_str(&format!(
        "  releaseVersion: {}\n  stream: |\n",
        serde_json::to_string(release_version)?
    ));
    for line in text.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
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
    fn streams_merge_by_platform_and_format() {
        let one = |platform: &str, format: &str, release: &str, t: &str| {
            json!({"stream": "rhcos-4.13", "metadata": {"last-modified": t},
                   "architectures": {"x86_64": {"artifacts": {platform: {"release": release,
                       "formats": {format: {"disk": {"location": format, "sha256": "aa"}}}}}}}})
        };
        let m = merge_streams(&[
            one("qemu", "qcow2.gz", "1", "2026-10-15T00:00:00Z"),
            one("metal", "raw.gz", "1", "2026-10-16T00:00:00Z"),
            one("metal", "iso", "1", "2026-10-14T00:00:00Z"),
        ])
        .unwrap();
        let arts = &m["architectures"]["x86_64"]["artifacts"];
        assert_eq!(arts["metal"]["formats"].as_object().unwrap().len(), 2);
        assert_eq!(arts["qemu"]["release"], "1");
        assert_eq!(m["metadata"]["last-modified"], "2026-10-16T00:00:00Z");
        let stream: coreos_stream_metadata::Stream = serde_json::from_value(m.clone()).unwrap();
        assert_eq!(stream.stream, "rhcos-4.13");
        let e = merge_streams(&[
            one("qemu", "qcow2.gz", "1", "t"),
            one("qemu", "qcow2", "2", "t"),
        ])
        .unwrap_err();
        assert!(format!("{e}").contains("releases \"1\" and \"2\""), "{e}");

        let cm = bootimages_configmap(&m, "4.13.0").unwrap();
        let v: Value =
            strata_manifest::parse_data(&cm, std::path::Path::new("configmap.yaml")).unwrap();
        assert_eq!(v["metadata"]["name"].as_str(), Some("coreos-bootimages"));
        assert_eq!(v["data"]["releaseVersion"].as_str(), Some("4.13.0"));
        let embedded: Value = serde_json::from_str(v["data"]["stream"].as_str().unwrap()).unwrap();
        assert_eq!(embedded, m);
    }

    /// A build whose disks came from two `strata disk` runs (qemu, then
    /// metal and the live media): its stream metadata lists all of them,
    /// as its record does, and never the image's archive.
    #[test]
    fn stream_lists_every_artifact_the_record_lists() {
        let art = |path: &str, sha: &str, gz: bool| strata_workdir::record::Artifact {
            path: path.into(),
            sha256: sha.into(),
            size: 1,
            format: "x".into(),
            uncompressed_sha256: gz.then(|| format!("u{sha}")),
            uncompressed_size: gz.then_some(2),
        };
        let mut images = BTreeMap::new();
        images.insert("qemu".to_string(), art("r-qemu.x86_64.qcow2.gz", "q", true));
        images.insert("metal".to_string(), art("r-metal.x86_64.raw", "m", false));
        images.insert(
            "metal4k".to_string(),
            art("r-metal4k.x86_64.raw", "k", false),
        );
        images.insert("live-iso".to_string(), art("r-live.x86_64.iso", "i", false));
        images.insert("live-kernel".to_string(), art("r-live-kernel", "l", false));
        images.insert(ARCHIVE_IMAGE.to_string(), art("r.ociarchive", "o", false));
        let disks = strata_workdir::record::Disks {
            ostree_commit: "cc".into(),
            image_reference: "oci:/w/oci:ocp-4.13".into(),
            images,
            artifact_url: None,
        };
        let v = stream_json(&id(Some("4.13")), &disks, "t", &|f| format!("u/{f}")).unwrap();
        let arts = &v["architectures"]["x86_64"]["artifacts"];
        assert_eq!(
            arts["qemu"]["formats"]["qcow2.gz"]["disk"],
            json!({"location": "u/r-qemu.x86_64.qcow2.gz", "sha256": "q", "uncompressed-sha256": "uq"})
        );
        let metal = arts["metal"]["formats"].as_object().unwrap();
        let formats: Vec<&String> = metal.keys().collect();
        assert_eq!(formats, ["4k.raw", "iso", "pxe", "raw"]);
        assert_eq!(metal["pxe"]["kernel"]["sha256"], "l");
        assert_eq!(arts.as_object().unwrap().len(), 2, "{v}");
        let stream: coreos_stream_metadata::Stream = serde_json::from_value(v).unwrap();
        assert_eq!(stream.stream, "rhcos-4.13");
    }

    /// A record written by a newer strata, listing a platform this one
    /// does not know, stopped every `strata disk` run of the build: the
    /// platform is left out of the stream, the rest listed.
    #[test]
    fn stream_leaves_out_a_platform_it_does_not_know() {
        let mut disks = disks_of(&[("qemu", "r-qemu.x86_64.qcow2")]);
        disks
            .images
            .insert("floppy".into(), art("r-floppy.x86_64.img"));
        let v = stream_json(&id(Some("4.13")), &disks, "t", &|f| format!("u/{f}")).unwrap();
        let arts = v["architectures"]["x86_64"]["artifacts"]
            .as_object()
            .unwrap();
        assert_eq!(arts.keys().collect::<Vec<_>>(), ["qemu"], "{v}");
        assert!(!v.to_string().contains("floppy"), "{v}");
    }

    /// A record's `path` went into the stream's location whole: one
    /// holding a `/` (an older record's) published a path under the
    /// artifact URL. Only the file name is used; a path without one is
    /// refused naming the image.
    #[test]
    fn stream_locations_are_file_names_never_paths() {
        let disks = disks_of(&[
            ("qemu", "builds/4.13/r-qemu.x86_64.qcow2"),
            ("metal", "../../etc/r-metal.x86_64.raw"),
        ]);
        let v = stream_json(&id(Some("4.13")), &disks, "t", &|f| {
            format!("https://a/b/{f}")
        })
        .unwrap();
        let arts = &v["architectures"]["x86_64"]["artifacts"];
        assert_eq!(
            arts["qemu"]["formats"]["qcow2"]["disk"]["location"],
            "https://a/b/r-qemu.x86_64.qcow2"
        );
        assert_eq!(
            arts["metal"]["formats"]["raw"]["disk"]["location"],
            "https://a/b/r-metal.x86_64.raw"
        );
        for bad in ["..", "", "/", "x/\n"] {
            let disks = disks_of(&[("qemu", bad)]);
            let e = stream_json(&id(None), &disks, "t", &|f| f.to_string()).unwrap_err();
            let text = format!("{e}");
            assert!(text.contains("\"qemu\" image"), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
    }

    fn art(path: &str) -> strata_workdir::record::Artifact {
        strata_workdir::record::Artifact {
            path: path.into(),
            sha256: "s".into(),
            size: 1,
            format: "x".into(),
            uncompressed_sha256: None,
            uncompressed_size: None,
        }
    }

    fn disks_of(images: &[(&str, &str)]) -> strata_workdir::record::Disks {
        strata_workdir::record::Disks {
            ostree_commit: "cc".into(),
            image_reference: "oci:/w/oci:ocp-4.13".into(),
            images: images
                .iter()
                .map(|(n, p)| (n.to_string(), art(p)))
                .collect(),
            artifact_url: None,
        }
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
