//! The release manifest: what `derive` layers on a base for one OpenShift
//! release (its node packages, files, labels and version scheme).
//!
//! Must not: describe the base. A release manifest names no base image and
//! no RHEL repos of its own unless its packages need them; the base is given
//! to derive separately, so that one release manifest applies to any base.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::content::{self, AddFile, PartialAddFile};
use crate::cx::Cx;
use crate::document::{self, Document, Loaded, Partial};
use crate::error::ManifestError;
use crate::merge::merge_fields;
use crate::policy::{InputPolicy, PartialInputs};
use crate::repo::{self, PartialRepo, Repo};
use crate::source::FileSource;
use crate::spanned::{OneOrMany, Spanned, Str};
use crate::vars::Vars;
use crate::version::{OcpRelease, VersionTemplate};

/// A release manifest, includes merged, variables substituted, validated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ReleaseManifest {
    pub edition: u32,
    /// The OpenShift release, `4.13`.
    pub release: OcpRelease,
    pub repos: Vec<Repo>,
    pub inputs: InputPolicy,
    /// Package names, each once, in first-mention order.
    pub packages: Vec<String>,
    pub exclude_packages: Vec<String>,
    /// Packages whose failing scriptlets do not fail the build (rpm-ostree's
    /// `ignore-scripts`): they still run, and their failures are recorded.
    pub ignore_scripts: Vec<String>,
    /// Base packages this release may replace with newer builds from its
    /// allowed repos (empty: the base's packages are left alone).
    pub allow_base_upgrade: Vec<String>,
    pub postprocess: Vec<String>,
    pub add_files: Vec<AddFile>,
    pub remove_files: Vec<String>,
    /// systemd units to enable in the derived tree.
    pub units: Vec<String>,
    /// Renders the derived version; [`VersionTemplate::DEFAULT`] if unset.
    pub version_template: VersionTemplate,
    /// Image labels added to the derived image.
    pub labels: BTreeMap<String, String>,
    /// Make the initramfs again in the derived layer even when the layer
    /// changes nothing the generator reads (derive does it then anyway):
    /// for changes it cannot see, such as a base upgrade of a program the
    /// initramfs copies.
    pub regenerate_initramfs: bool,
}

impl ReleaseManifest {
    /// Parses one manifest text without reading any file; see
    /// [`crate::BaseManifest::parse`].
    pub fn parse(text: &str, origin: &Path, vars: &Vars) -> Result<Self, ManifestError> {
        document::parse(text, origin, vars)
    }

    /// Reads a manifest, its includes, `.repo` files and add-files sources
    /// from the filesystem.
    pub fn load(path: &Path, vars: &Vars) -> Result<Loaded<Self>, ManifestError> {
        document::load(path, vars)
    }

    /// Like [`ReleaseManifest::load`], reading through `source`.
    pub fn load_from(
        source: &dyn FileSource,
        path: &Path,
        vars: &Vars,
    ) -> Result<Loaded<Self>, ManifestError> {
        document::load_from(source, path, vars)
    }

    /// Deterministic JSON of the whole manifest (sorted keys, no
    /// whitespace), as written.
    pub fn to_canonical_json(&self) -> String {
        crate::canonical::to_json(self)
    }

    /// Deterministic JSON of what the manifest means: its part of derive's
    /// input hash. Read as sets, as in
    /// [`crate::BaseManifest::to_input_json`]: the package names (with
    /// `allow-base-upgrade`), `units`, `inputs.repos` and `inputs.keys`;
    /// `labels` is a map already; the rest as written.
    pub fn to_input_json(&self) -> String {
        let mut m = self.clone();
        for set in [
            &mut m.packages,
            &mut m.exclude_packages,
            &mut m.ignore_scripts,
            &mut m.allow_base_upgrade,
            &mut m.units,
        ] {
            crate::canonical::as_set(set);
        }
        m.inputs.as_sets();
        crate::canonical::to_json(&m)
    }
}

/// A release manifest file, as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "kebab-case",
    expecting = "a release manifest (a YAML mapping)"
)]
pub(crate) struct PartialRelease {
    edition: Option<Spanned<u32>>,
    include: Option<OneOrMany>,
    variables: Option<BTreeMap<Str, Option<Str>>>,
    release: Option<Str>,
    repos: Option<Vec<Spanned<PartialRepo>>>,
    inputs: Option<PartialInputs>,
    packages: Option<Vec<Str>>,
    exclude_packages: Option<Vec<Str>>,
    ignore_scripts: Option<Vec<Str>>,
    allow_base_upgrade: Option<Vec<Str>>,
    postprocess: Option<Vec<Str>>,
    add_files: Option<Vec<Spanned<PartialAddFile>>>,
    remove_files: Option<Vec<Str>>,
    units: Option<Vec<Str>>,
    version_template: Option<Str>,
    labels: Option<BTreeMap<Str, Str>>,
    regenerate_initramfs: Option<Spanned<bool>>,
}
merge_fields!(PartialRelease {
    edition,
    include,
    variables,
    release,
    repos,
    inputs,
    packages,
    exclude_packages,
    ignore_scripts,
    allow_base_upgrade,
    postprocess,
    add_files,
    remove_files,
    units,
    version_template,
    labels,
    regenerate_initramfs,
});

impl Partial for PartialRelease {
    fn edition(&self) -> Option<&Spanned<u32>> {
        self.edition.as_ref()
    }
    fn take_includes(&mut self) -> Vec<Str> {
        self.include.take().map(|i| i.0).unwrap_or_default()
    }
    fn variables(&self) -> Option<&BTreeMap<Str, Option<Str>>> {
        self.variables.as_ref()
    }
    fn repos_mut(&mut self) -> Option<&mut Vec<Spanned<PartialRepo>>> {
        self.repos.as_mut()
    }
}

impl Document for ReleaseManifest {
    type Partial = PartialRelease;

    fn finish(p: PartialRelease, cx: &mut Cx<'_>) -> Result<Self, ManifestError> {
        let edition = content::edition(cx, p.edition)?;
        let (release, release_at) = content::required_text(cx, p.release, "release")?;
        let release = OcpRelease::parse(&release)
            .map_err(|reason| cx.invalid(release_at, "release", reason))?;
        // A release manifest does not know the base's releasever: dnf
        // substitutes `$releasever` when derive configures it from the base.
        let repos = repo::finish(cx, cx.required(p.repos, "repos")?, None)?;
        content::non_empty(cx, &repos, "repos")?;
        let inputs = content::inputs(cx, p.inputs, &repos)?;
        let packages = content::packages(cx, "packages", p.packages)?;
        content::non_empty(cx, &packages, "packages")?;
        let exclude_packages = content::packages(cx, "exclude-packages", p.exclude_packages)?;
        content::check_exclusions(cx, &packages, &exclude_packages)?;
        let ignore_scripts = content::packages(cx, "ignore-scripts", p.ignore_scripts)?;
        let allow_base_upgrade = content::packages(cx, "allow-base-upgrade", p.allow_base_upgrade)?;
        let postprocess = content::scripts(cx, p.postprocess)?;
        let add_files = content::add_files(cx, p.add_files)?;
        let remove_files = content::remove_files(cx, p.remove_files)?;
        let units = content::units(cx, p.units)?;
        let version_template = match p.version_template {
            None => VersionTemplate::default(),
            Some(t) => VersionTemplate::parse(&cx.text(&t)?)
                .map_err(|reason| cx.invalid(t.at, "version-template", reason))?,
        };
        let labels = content::labels(cx, p.labels)?;
        Ok(ReleaseManifest {
            edition,
            release,
            repos: repos.into_iter().map(|(r, _)| r).collect(),
            inputs,
            packages: content::names(packages),
            exclude_packages: content::names(exclude_packages),
            ignore_scripts: content::names(ignore_scripts),
            allow_base_upgrade: content::names(allow_base_upgrade),
            postprocess,
            add_files,
            remove_files,
            units,
            version_template,
            labels,
            regenerate_initramfs: p.regenerate_initramfs.is_some_and(|r| r.value),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{UtcDateTime, VersionParts};

    const MINIMAL: &str = "\
edition: 1
release: \"4.13\"
repos:
  - id: rhocp-4.13
    baseurl: file:///srv/rhocp-4.13
inputs:
  repos: [rhocp-4.13]
  keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]
packages: [cri-o cri-tools, openshift-hyperkube]
";

    fn parse(text: &str) -> Result<ReleaseManifest, ManifestError> {
        ReleaseManifest::parse(text, Path::new("ocp.yaml"), &Vars::new())
    }

    #[test]
    fn minimal_release_gets_defaults() {
        let m = parse(MINIMAL).unwrap();
        assert_eq!(
            m.release,
            OcpRelease {
                major: 4,
                minor: 13
            }
        );
        assert_eq!(m.packages, ["cri-o", "cri-tools", "openshift-hyperkube"]);
        assert!(m.allow_base_upgrade.is_empty());
        assert!(m.labels.is_empty());
        assert!(!m.regenerate_initramfs);
        assert_eq!(m.version_template.as_str(), VersionTemplate::DEFAULT);
        let parts = VersionParts {
            ocp: m.release,
            rhel_major: 8,
            rhel_minor: 6,
            base_date: UtcDateTime::new(2026, 12, 2, 9, 30, 0).unwrap(),
            serial: 0,
        };
        assert_eq!(m.version_template.render(&parts), "413.86.202612020930-0");
    }

    #[test]
    fn unquoted_releases_keep_their_text() {
        // YAML would read 4.10 as the float 4.1; the manifest keeps the text.
        let m = parse(&MINIMAL.replace("\"4.13\"", "4.10")).unwrap();
        assert_eq!(m.release.to_string(), "4.10");
    }

    #[test]
    fn release_fields() {
        let text = format!(
            "{MINIMAL}allow-base-upgrade: [openssl-libs]\nregenerate-initramfs: true\nlabels:\n  io.openshift.release: \"4.13\"\nversion-template: \"{{ocp_major}}.{{ocp_minor}}-{{serial}}\"\n"
        );
        let m = parse(&text).unwrap();
        assert_eq!(m.allow_base_upgrade, ["openssl-libs"]);
        assert!(m.regenerate_initramfs);
        assert_eq!(m.labels["io.openshift.release"], "4.13");
        assert_eq!(
            m.version_template.as_str(),
            "{ocp_major}.{ocp_minor}-{serial}"
        );
    }

    #[test]
    fn release_errors() {
        let add = |extra: &str| format!("{MINIMAL}{extra}");
        let swap = |from: &str, to: &str| MINIMAL.replace(from, to);
        let cases: Vec<(String, &str)> = vec![
            (
                swap("release: \"4.13\"", "release: \"4.13.1\""),
                "ocp.yaml:2:10: invalid release: `4.13.1` is not MAJOR.MINOR (e.g. \"4.13\"; quote it, as 4.10 unquoted is a number)",
            ),
            (
                swap("release: \"4.13\"\n", ""),
                "ocp.yaml: missing required field `release`",
            ),
            (
                add("osname: rhcos\n"),
                "ocp.yaml:10:1: unknown field `osname`, expected one of `edition`, `include`, `variables`, `release`, `repos`, `inputs`, `packages`, `exclude-packages`, `ignore-scripts`, `allow-base-upgrade`, `postprocess`, `add-files`, `remove-files`, `units`, `version-template`, `labels`, `regenerate-initramfs`",
            ),
            (
                add("regenerate-initramfs: maybe\n"),
                "ocp.yaml:10:23: regenerate-initramfs: invalid type: string \"maybe\", expected a boolean",
            ),
            (
                add("version-template: \"{ocp_major}{ocp_minor}.{date}\"\n"),
                "ocp.yaml:10:19: invalid version-template: `{date}` is not a known field (known: {ocp_major} {ocp_minor} {rhel_major} {rhel_minor} {base_date:FORMAT} {serial})",
            ),
            (
                add("labels:\n  \"bad label\": x\n"),
                "ocp.yaml:11:3: invalid labels: `bad label` is not a label name (non-empty, no spaces)",
            ),
            (
                swap("packages: [cri-o cri-tools, openshift-hyperkube]", "packages: []"),
                "ocp.yaml: invalid packages: the list is empty",
            ),
        ];
        let mut failures = Vec::new();
        for (text, want) in &cases {
            match parse(text) {
                Ok(_) => failures.push(format!("parsed, wanted: {want}\n{text}")),
                Err(e) if e.to_string() != *want => {
                    failures.push(format!("got:  {e}\nwant: {want}\n{text}"))
                }
                Err(_) => {}
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    /// The input hash changed with the order of a release's package names:
    /// a list of names is a set, scripts are not.
    #[test]
    fn the_input_json_reads_package_lists_as_sets_and_scripts_in_order() {
        let listing = |packages: &str, upgrades: &str, scripts: &str| {
            parse(&format!(
                "edition: 1\nrelease: \"4.13\"\n\
                 repos:\n  - id: rhocp\n    baseurl: file:///srv/rhocp\n\
                 inputs:\n  repos: [rhocp]\n  keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]\n\
                 packages: {packages}\nallow-base-upgrade: {upgrades}\npostprocess: {scripts}\n"
            ))
            .unwrap()
        };
        let a = listing(
            "[cri-o openshift-kubelet, conmon]",
            "[openssl-libs, glibc]",
            "[\"true\", \"false\"]",
        );
        let b = listing(
            "[conmon, openshift-kubelet cri-o]",
            "[glibc, openssl-libs]",
            "[\"true\", \"false\"]",
        );
        assert_ne!(a.to_canonical_json(), b.to_canonical_json());
        assert_eq!(a.to_input_json(), b.to_input_json());
        let scripts = listing(
            "[cri-o openshift-kubelet, conmon]",
            "[openssl-libs, glibc]",
            "[\"false\", \"true\"]",
        );
        assert_ne!(a.to_input_json(), scripts.to_input_json());
        let sorted = listing(
            "[conmon, cri-o, openshift-kubelet]",
            "[glibc, openssl-libs]",
            "[\"true\"]",
        );
        assert_eq!(sorted.to_canonical_json(), sorted.to_input_json());
    }
}
