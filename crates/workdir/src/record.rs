//! What a build directory says about its build: strata's record
//! (`strata.json`, [`BuildMeta`]) and, projected from it whenever it is
//! written, coreos-assembler's `meta.json` ([`CosaMeta`]).
//!
//! Why two files: coreos-assembler's schema (`src/v1.json` in
//! coreos/coreos-assembler) allows no key it does not define at the top
//! level, and the ecosystem's tools (cosa, plume, buildfetch) read
//! meta.json by it. strata's own facts (the packages, the base a release
//! was derived from, the initramfs decision) live in strata.json, and
//! meta.json holds only what the schema defines, computed from it in one
//! place, so the two never disagree.
//!
//! Submodules: `cosa` (meta.json and its schema check), `nevra` (package
//! names and rpm's version order, for the package diffs).
//!
//! Must not: read anything but the record it is given (the clock, the
//! host): both files are part of what a build reproduces.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod cosa;
mod nevra;

pub use cosa::{check_cosa_meta, CosaMeta};
pub use nevra::nevra_name;
use nevra::{evr_newer, nevra_parts};

/// The one architecture strata builds (`coreos-assembler.basearch`, and
/// the per-architecture directory of a cosa build).
pub const ARCH: &str = "x86_64";
/// strata's record in a build directory.
pub const RECORD_FILE: &str = "strata.json";
/// coreos-assembler's record in a build directory.
pub const META_FILE: &str = "meta.json";

/// The record in the build directory `dir`, if it has one.
pub fn read(dir: &Path) -> anyhow::Result<Option<BuildMeta>> {
    use anyhow::Context;
    let path = dir.join(RECORD_FILE);
    match std::fs::read(&path) {
        Ok(b) => Ok(Some(
            serde_json::from_slice(&b).with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// strata's record of one build (`strata.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildMeta {
    /// The history stream (`rhel-8.6`, `ocp-4.13`, `okd-4.19`).
    pub stream: String,
    pub version: String,
    /// The OS name (`rhcos`, `scos`) or, for a base, its manifest's name:
    /// meta.json's `name` and the prefix of artifact names.
    pub name: String,
    /// One line saying what the build is (`Red Hat Enterprise Linux
    /// CoreOS 4.13`).
    pub summary: String,
    /// sha256 over everything the build read; empty for an image built
    /// elsewhere.
    pub inputhash: String,
    pub ostree_commit: String,
    /// The ref in `W/repo`; none for an image built elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ostree_ref: Option<String>,
    /// The time every file and the commit carry.
    pub source_date_epoch: u64,
    /// The image's manifest digest and its tag in `W/oci`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tag: Option<String>,
    /// Which configuration built it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// NEVRAs: the whole tree of a base, the packages a release adds.
    #[serde(default)]
    pub packages: Vec<String>,
    /// Against the previous build of the stream.
    #[serde(default)]
    pub package_diff: PackageDiff,
    /// rpm's messages for the failed scriptlets that the manifest's
    /// `ignore-scripts` let through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_scriptlet_failures: Vec<String>,
    /// What a composed tree is (none on a derived build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeMeta>,
    /// What a derived build was derived from and added (none on a base).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<DerivedMeta>,
    /// The disks built from the image, once there are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Disks>,
}

/// Which configuration a build was made from: the manifests by content
/// and, when they live in git, the commit. Paths are relative to the
/// configuration's root (the git work tree, else the manifest's
/// directory), so two checkouts of one commit record the same thing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The manifest named on the command line.
    pub manifest: String,
    /// Every file read for the build (the manifest, its includes, `.repo`
    /// files, added files) to its sha256.
    pub files: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
}

/// The git state of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitSource {
    /// `HEAD`'s commit.
    pub commit: String,
    /// Whether tracked files differ from `HEAD`.
    pub dirty: bool,
    /// The `origin` remote's URL, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The branch checked out, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Source {
    /// The record of `manifest` and the `files` it read (path, sha256),
    /// with git's view of them when they are in a work tree. git is asked,
    /// not required: without it (or outside a work tree) the record has
    /// no `git`.
    pub fn describe(manifest: &Path, files: &[(&Path, &str)]) -> Source {
        let dir = manifest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let git = git_state(dir);
        let root = git
            .as_ref()
            .map(|(top, _)| top.clone())
            .or_else(|| dir.canonicalize().ok())
            .unwrap_or_else(|| dir.to_path_buf());
        let relative = |p: &Path| -> String {
            let abs = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            abs.strip_prefix(&root)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_else(|_| abs.to_string_lossy().into_owned())
        };
        Source {
            manifest: relative(manifest),
            files: files
                .iter()
                .map(|(p, sha)| (relative(p), sha.to_string()))
                .collect(),
            git: git.map(|(_, g)| g),
        }
    }
}

/// The work tree holding `dir` and its state, when git knows one.
fn git_state(dir: &Path) -> Option<(std::path::PathBuf, GitSource)> {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let commit = git(&["rev-parse", "--verify", "-q", "HEAD"])?;
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    let origin = git(&["remote", "get-url", "origin"]).filter(|s| !s.is_empty());
    let branch = git(&["symbolic-ref", "-q", "--short", "HEAD"]).filter(|s| !s.is_empty());
    Some((
        std::path::PathBuf::from(top),
        GitSource {
            commit,
            dirty,
            origin,
            branch,
        },
    ))
}

/// What a composed tree is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeMeta {
    /// The kernel version in `/usr/lib/modules`.
    pub kernel: String,
    /// The rpm database's format: `bdb` or `sqlite`.
    pub rpmdb: String,
    /// The bootloader payload per bootupd component (`EFI`, `BIOS`): the
    /// packages it came from, as bootupd's metadata names them.
    #[serde(default)]
    pub bootloader: BTreeMap<String, String>,
    /// Packages an overrides file pinned: name to the NEVRA installed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, String>,
}

/// What a derived build stands on and adds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivedMeta {
    /// The OpenShift release (`4.13`).
    pub release: String,
    pub base_image: String,
    pub base_digest: String,
    pub base_commit: String,
    pub base_version: String,
    /// Base packages the release replaced (`allow-base-upgrade`),
    /// `old -> new`.
    #[serde(default)]
    pub base_upgrades: Vec<String>,
    /// `--override-rpm` packages.
    #[serde(default)]
    pub overrides: Vec<OverrideMeta>,
    /// Whether and why the layer carries a new initramfs.
    #[serde(default)]
    pub initramfs: InitramfsRecord,
}

/// An override RPM as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideMeta {
    pub name: String,
    pub nevra: String,
    /// The file given on the command line.
    pub path: String,
    pub sha256: String,
}

/// Whether and why a derived layer carries a new initramfs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitramfsRecord {
    /// The layer has a new `usr/lib/modules/<kver>/initramfs.img`.
    pub regenerated: bool,
    /// The release manifest asked for it (`regenerate-initramfs`).
    pub requested: bool,
    /// How many of the generator's inputs the layer adds, changes or
    /// removes (dracut modules and configuration, kernel modules, firmware).
    pub changed_inputs: usize,
    /// The first of them, relative to the tree's root.
    pub changed_inputs_shown: Vec<String>,
    /// The generator's command line, when it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// The disks of one image, and what they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disks {
    /// The commit every listed disk deploys.
    pub ostree_commit: String,
    /// The image they name for upgrades (their origin and aleph).
    pub image_reference: String,
    /// By meta.json name (`qemu`, `metal`, `metal4k`, `ostree`).
    pub images: BTreeMap<String, Artifact>,
    /// The base URL stream.json's locations are under, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_url: Option<String>,
}

/// One file of a build directory, as coreos-assembler lists artifacts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Relative to the build directory.
    pub path: String,
    pub sha256: String,
    pub size: u64,
    /// `qcow2`, `raw`, `ociarchive`.
    pub format: String,
    /// Of the content, when the file is compressed.
    #[serde(
        default,
        rename = "uncompressed-sha256",
        skip_serializing_if = "Option::is_none"
    )]
    pub uncompressed_sha256: Option<String>,
    #[serde(
        default,
        rename = "uncompressed-size",
        skip_serializing_if = "Option::is_none"
    )]
    pub uncompressed_size: Option<u64>,
}

/// How a build's packages differ from the previous build's of its stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageDiff {
    /// The previous build's version; none for the first build of a stream.
    pub previous: Option<String>,
    /// NEVRAs.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// `old-NEVRA -> new-NEVRA`.
    pub changed: Vec<String>,
}

impl PackageDiff {
    /// `new` against `old` (NEVRAs), matched by package name.
    pub fn between(previous: &str, old: &[String], new: &[String]) -> PackageDiff {
        let by_name = |list: &[String]| -> BTreeMap<String, String> {
            list.iter()
                .map(|n| (nevra_name(n).to_string(), n.clone()))
                .collect()
        };
        let (old, new) = (by_name(old), by_name(new));
        PackageDiff {
            previous: Some(previous.to_string()),
            added: new
                .iter()
                .filter(|(k, _)| !old.contains_key(*k))
                .map(|(_, v)| v.clone())
                .collect(),
            removed: old
                .iter()
                .filter(|(k, _)| !new.contains_key(*k))
                .map(|(_, v)| v.clone())
                .collect(),
            changed: new
                .iter()
                .filter(|(k, v)| old.get(*k).is_some_and(|o| o != *v))
                .map(|(k, v)| format!("{} -> {v}", old[k]))
                .collect(),
        }
    }

    /// The diff as rpm-ostree's `db diff --format=json` lists it (and
    /// coreos-assembler's `pkgdiff`): `[name, kind, {PreviousPackage,
    /// NewPackage}]`, kind 0 added, 1 removed, 2 upgraded, 3 downgraded,
    /// each package `[name, evr, arch]`.
    pub fn rpm_ostree(&self) -> Vec<serde_json::Value> {
        use serde_json::json;
        let mut out = Vec::new();
        for n in &self.added {
            out.push(json!([nevra_name(n), 0, {"NewPackage": nevra_parts(n)}]));
        }
        for n in &self.removed {
            out.push(json!([nevra_name(n), 1, {"PreviousPackage": nevra_parts(n)}]));
        }
        for c in &self.changed {
            let Some((old, new)) = c.split_once(" -> ") else {
                continue;
            };
            let kind = if evr_newer(new, old) { 2 } else { 3 };
            out.push(json!([
                nevra_name(new),
                kind,
                {"PreviousPackage": nevra_parts(old), "NewPackage": nevra_parts(new)}
            ]));
        }
        out.sort_by(|a, b| a[0].as_str().cmp(&b[0].as_str()));
        out
    }
}

/// `seconds` since the epoch as RFC 3339 (`YYYY-MM-DDThh:mm:ssZ`).
pub fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("@{seconds}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosa_meta_follows_the_schema() {
        let mut m = BuildMeta {
            stream: "ocp-4.13".into(),
            version: "413.86.202610150000-0".into(),
            name: "rhcos".into(),
            summary: "Red Hat Enterprise Linux CoreOS 4.13".into(),
            inputhash: "a".repeat(64),
            ostree_commit: "c".repeat(64),
            ostree_ref: Some("strata/derived/ocp-4.13".into()),
            source_date_epoch: 1_760_486_400,
            packages: vec!["cri-o-1.26.1-1.rhaos4.13.el8.x86_64".into()],
            derived: Some(DerivedMeta {
                release: "4.13".into(),
                ..DerivedMeta::default()
            }),
            ..BuildMeta::default()
        };
        let v = serde_json::to_value(CosaMeta::of(&m)).unwrap();
        assert_eq!(check_cosa_meta(&v), Vec::<String>::new(), "{v:#}");
        assert_eq!(v["ostree-timestamp"], "2025-10-15T00:00:00Z");
        assert_eq!(v["parent-pkgdiff"][0][0], "cri-o");
        // Disks without the ostree archive are not listed (the schema
        // requires it in `images`).
        let disk = Artifact {
            path: "x.qcow2".into(),
            sha256: "d".repeat(64),
            size: 1,
            format: "qcow2".into(),
            ..Artifact::default()
        };
        m.disks = Some(Disks {
            images: [("qemu".to_string(), disk.clone())].into(),
            ..Disks::default()
        });
        assert!(serde_json::to_value(CosaMeta::of(&m)).unwrap()["images"].is_null());
        m.disks
            .as_mut()
            .unwrap()
            .images
            .insert("ostree".into(), disk);
        let v = serde_json::to_value(CosaMeta::of(&m)).unwrap();
        assert_eq!(check_cosa_meta(&v), Vec::<String>::new());
        // The checker's own rules.
        let bad = serde_json::json!({"buildid": "", "version": "1", "images": {"qemu": {}}});
        let errors = check_cosa_meta(&bad);
        for e in [
            "version: not defined by the schema",
            "name: required",
            "buildid: shorter than 1",
            "images.ostree: required",
            "images.qemu.path: required string",
        ] {
            assert!(errors.iter().any(|x| x == e), "{e} in {errors:?}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_760_486_400), "2025-10-15T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn pkgdiff_is_rpm_ostrees() {
        let d = PackageDiff::between(
            "1",
            &[
                "bash-4.4.20-4.el8_6.x86_64".into(),
                "gone-1-1.el8.noarch".into(),
                "kernel-4.18.0-372.9.1.el8.x86_64".into(),
            ],
            &[
                "bash-4.4.20-5.el8_6.x86_64".into(),
                "kernel-4.18.0-372.1.1.el8.x86_64".into(),
                "new-1:2-1.el8.x86_64".into(),
            ],
        );
        let v = serde_json::Value::Array(d.rpm_ostree());
        assert_eq!(
            v,
            serde_json::json!([
                ["bash", 2, {"PreviousPackage": ["bash", "4.4.20-4.el8_6", "x86_64"],
                             "NewPackage": ["bash", "4.4.20-5.el8_6", "x86_64"]}],
                ["gone", 1, {"PreviousPackage": ["gone", "1-1.el8", "noarch"]}],
                ["kernel", 3, {"PreviousPackage": ["kernel", "4.18.0-372.9.1.el8", "x86_64"],
                               "NewPackage": ["kernel", "4.18.0-372.1.1.el8", "x86_64"]}],
                ["new", 0, {"NewPackage": ["new", "1:2-1.el8", "x86_64"]}],
            ])
        );
    }

    #[test]
    fn source_outside_git_is_relative_to_the_manifest() {
        let t = tempfile::tempdir().unwrap();
        let m = t.path().join("base.yaml");
        std::fs::create_dir(t.path().join("inc")).unwrap();
        let inc = t.path().join("inc/repos.yaml");
        std::fs::write(&m, "x").unwrap();
        std::fs::write(&inc, "y").unwrap();
        let s = Source::describe(&m, &[(&m, "aa"), (&inc, "bb")]);
        // A temporary directory may sit inside somebody's work tree; only
        // the paths are checked here.
        if s.git.is_none() {
            assert_eq!(s.manifest, "base.yaml");
            assert_eq!(s.files["inc/repos.yaml"], "bb");
        }
    }

    #[test]
    fn source_in_git_records_commit_and_dirt() {
        let t = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let st = std::process::Command::new("git")
                .arg("-C")
                .arg(t.path())
                .args(args)
                .status()
                .expect("git (Debian package git) is needed");
            assert!(st.success(), "git {args:?}");
        };
        run(&["init", "-q", "-b", "main"]);
        run(&["config", "user.email", "t@example.com"]);
        run(&["config", "user.name", "t"]);
        run(&["remote", "add", "origin", "https://example.com/os.git"]);
        std::fs::create_dir(t.path().join("m")).unwrap();
        let m = t.path().join("m/base.yaml");
        std::fs::write(&m, "x").unwrap();
        run(&["add", "."]);
        run(&["commit", "-q", "-m", "one"]);
        let s = Source::describe(&m, &[(&m, "aa")]);
        let g = s.git.clone().expect("in git");
        assert_eq!(s.manifest, "m/base.yaml");
        assert_eq!(g.commit.len(), 40);
        assert!(!g.dirty);
        assert_eq!(g.origin.as_deref(), Some("https://example.com/os.git"));
        assert_eq!(g.branch.as_deref(), Some("main"));
        std::fs::write(&m, "changed").unwrap();
        assert!(Source::describe(&m, &[]).git.unwrap().dirty);

        let meta = BuildMeta {
            version: "8.6.20261015-0".into(),
            source: Some(Source::describe(&m, &[])),
            inputhash: "a".repeat(64),
            ..BuildMeta::default()
        };
        let cosa = serde_json::to_value(CosaMeta::of(&meta)).unwrap();
        assert_eq!(cosa["coreos-assembler.config-dirty"], "true");
        assert_eq!(cosa["coreos-assembler.config-gitrev"], g.commit.as_str());
        assert_eq!(
            cosa["coreos-assembler.container-config-git"]["origin"],
            "https://example.com/os.git"
        );
    }
}
