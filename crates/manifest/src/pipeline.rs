//! The pipeline manifest: what `strata build` runs — the base manifests
//! (one per RHEL line: `base:`, or `bases:` for several), the release
//! manifests derived from them (each names its base when there are
//! several), the disk platforms of each, and where each image is pushed.
//!
//! Must not: describe content. Packages, repos and policies live in the base
//! and release manifests it names; a pipeline only wires them together, so
//! the same manifests build by hand (`compose`, `derive`, `disk`) or as a
//! pipeline, with the same results.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::content;
use crate::cx::Cx;
use crate::document::{self, Document, Loaded, Partial};
use crate::error::ManifestError;
use crate::merge::merge_fields;
use crate::source::FileSource;
use crate::spanned::{At, OneOrMany, Spanned, Str};
use crate::vars::Vars;

/// A pipeline manifest, includes merged, variables substituted, validated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct PipelineManifest {
    pub edition: u32,
    /// Names the pipeline's run records (`runs/<name>/…`).
    pub name: String,
    /// Every variable in force with a value: the caller's over the
    /// pipeline's defaults. `strata build` passes them to the stage manifests.
    pub variables: BTreeMap<String, String>,
    /// In the order written; each base manifest once.
    pub bases: Vec<Stage>,
    /// In the order written; each release manifest once, with its base.
    pub releases: Vec<Stage>,
    /// How disk artifacts are stored: `gzip` (the default: what is
    /// published, as RHCOS's are) or `none`.
    pub compress: String,
    /// Where the artifacts will be published: stream metadata locations
    /// are `<artifact-url>/<stream>/<version>/x86_64/<file>` (the builds
    /// directory's layout). None: locations relative to `W/builds`.
    pub artifact_url: Option<String>,
}

/// The values `compress` takes.
pub const COMPRESSIONS: [&str; 2] = ["gzip", "none"];

/// The longest artifact base URL accepted: it is written into every
/// location of stream.json, which installers fetch.
pub const MAX_ARTIFACT_URL: usize = 2048;

/// Checks an artifact base URL: `https://`, `http://` or `file://`, no
/// whitespace, quotes or control characters (it is written into JSON
/// that installers fetch from), no user or password (it is published),
/// no `.` or `..` segment (a location must stay under it), at most
/// [`MAX_ARTIFACT_URL`] characters. Returns it without a trailing `/`.
pub fn check_artifact_url(url: &str) -> Result<String, String> {
    let shown = strata_process::text::shown(url);
    if url.chars().count() > MAX_ARTIFACT_URL {
        return Err(format!(
            "`{shown}` has {} characters; an artifact URL may have at most {MAX_ARTIFACT_URL}",
            url.chars().count()
        ));
    }
    let rest = ["https://", "http://", "file://"]
        .iter()
        .find_map(|s| url.strip_prefix(s))
        .ok_or_else(|| format!("`{shown}` is not an https://, http:// or file:// URL"))?;
    if rest.is_empty()
        || url
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\' | '<' | '>'))
        || url.contains(['?', '#'])
    {
        return Err(format!(
            "`{shown}` is not a base URL (no spaces, quotes, query or fragment)"
        ));
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.contains('@') {
        return Err(format!(
            "`{shown}` names a user or password, which stream.json would publish: give the URL without them"
        ));
    }
    let dot = |segment: &str| {
        let s = segment.to_ascii_lowercase().replace("%2e", ".");
        s == "." || s == ".."
    };
    if path.split('/').any(dot) {
        return Err(format!(
            "`{shown}` has a `.` or `..` segment: give the URL of the directory itself"
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// One image of the pipeline: its manifest, its disks, its push target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Stage {
    /// Absolute; resolved against the pipeline file that names it.
    pub manifest: PathBuf,
    /// Disk platforms (`qemu`, `metal`, …); empty: no disks. The names are
    /// checked against the disk stage's table by the caller.
    pub platforms: Vec<String>,
    /// `docker://HOST/NAME:TAG` the image is pushed to with `--push`.
    pub push: Option<String>,
    /// A release's base: the manifest of one of [`PipelineManifest::bases`]
    /// (the only one when the pipeline has one). None for a base.
    pub base: Option<PathBuf>,
    /// A base's own variables, over the pipeline's, for its compose and its
    /// releases' derive (a RHEL line's snapshot or fixture). Empty for a
    /// release.
    pub variables: BTreeMap<String, String>,
}

impl PipelineManifest {
    /// Parses one pipeline text without reading any file (not even the
    /// manifests it names).
    pub fn parse(text: &str, origin: &Path, vars: &Vars) -> Result<Self, ManifestError> {
        document::parse(text, origin, vars)
    }

    /// Reads a pipeline and its includes from the filesystem. The base and
    /// release manifests it names are not read: they are loaded with their
    /// own type by the stages.
    pub fn load(path: &Path, vars: &Vars) -> Result<Loaded<Self>, ManifestError> {
        document::load(path, vars)
    }

    /// Like [`PipelineManifest::load`], reading through `source`.
    pub fn load_from(
        source: &dyn FileSource,
        path: &Path,
        vars: &Vars,
    ) -> Result<Loaded<Self>, ManifestError> {
        document::load_from(source, path, vars)
    }

    /// The variables for the stage manifests.
    pub fn stage_vars(&self) -> Result<Vars, ManifestError> {
        let mut vars = Vars::new();
        for (k, v) in &self.variables {
            vars.insert(k.as_str(), v.as_str())?;
        }
        Ok(vars)
    }

    /// The variables for `base` and its releases: the pipeline's, with the
    /// base's own over them.
    pub fn line_vars(&self, base: &Stage) -> Result<Vars, ManifestError> {
        let mut vars = self.stage_vars()?;
        for (k, v) in &base.variables {
            vars.insert(k.as_str(), v.as_str())?;
        }
        Ok(vars)
    }
}

/// A pipeline file, as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "kebab-case",
    expecting = "a pipeline manifest (a YAML mapping)"
)]
pub(crate) struct PartialPipeline {
    edition: Option<Spanned<u32>>,
    include: Option<OneOrMany>,
    variables: Option<BTreeMap<Str, Option<Str>>>,
    name: Option<Str>,
    base: Option<Spanned<PartialStage>>,
    bases: Option<Vec<Spanned<PartialStage>>>,
    releases: Option<Vec<Spanned<PartialStage>>>,
    compress: Option<Str>,
    artifact_url: Option<Str>,
}
merge_fields!(PartialPipeline {
    edition,
    include,
    variables,
    name,
    base,
    bases,
    releases,
    compress,
    artifact_url,
});

/// `base:` or a `releases:` entry, as one file states it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartialStage {
    manifest: Option<Str>,
    platforms: Option<Vec<Str>>,
    push: Option<Str>,
    base: Option<Str>,
    variables: Option<BTreeMap<Str, Str>>,
}
merge_fields!(PartialStage {
    manifest,
    platforms,
    push,
    base,
    variables
});

impl Partial for PartialPipeline {
    fn edition(&self) -> Option<&Spanned<u32>> {
        self.edition.as_ref()
    }
    fn take_includes(&mut self) -> Vec<Str> {
        self.include.take().map(|i| i.0).unwrap_or_default()
    }
    fn variables(&self) -> Option<&BTreeMap<Str, Option<Str>>> {
        self.variables.as_ref()
    }
}

impl Document for PipelineManifest {
    type Partial = PartialPipeline;

    fn finish(p: PartialPipeline, cx: &mut Cx<'_>) -> Result<Self, ManifestError> {
        let edition = content::edition(cx, p.edition)?;
        let name = content::required_text(cx, p.name, "name")?;
        content::check_name(cx, &name, "name")?;
        let entries = match (p.base, p.bases) {
            (Some(one), Some(_)) => {
                return Err(cx.invalid(one.at, "base", "give `base` or `bases`, not both"));
            }
            (Some(one), None) => vec![one],
            (None, many) => cx.required(many, "base")?,
        };
        let mut bases: Vec<Stage> = Vec::new();
        for entry in entries {
            if let Some(b) = &entry.value.base {
                return Err(cx.invalid(b.at, "base", "a base has no base of its own"));
            }
            let mut variables = BTreeMap::new();
            for (k, v) in entry.value.variables.clone().unwrap_or_default() {
                let name = cx.text(&k)?;
                if let Err(reason) = crate::vars::check_name(&name) {
                    return Err(cx.invalid(k.at, "variables", reason));
                }
                variables.insert(name, cx.text(&v)?);
            }
            let mut s = stage(cx, entry.value, entry.at, "bases")?;
            s.variables = variables;
            if bases.iter().any(|b| b.manifest == s.manifest) {
                return Err(cx.invalid(
                    entry.at,
                    "bases",
                    format!("{} is listed twice", s.manifest.display()),
                ));
            }
            bases.push(s);
        }
        content::non_empty(cx, &bases, "bases")?;
        let mut releases: Vec<Stage> = Vec::new();
        for entry in cx.required(p.releases, "releases")? {
            if let Some((k, _)) = entry.value.variables.as_ref().and_then(|v| v.iter().next()) {
                return Err(cx.invalid(
                    k.at,
                    "variables",
                    "a release takes its line's variables: set them on its base",
                ));
            }
            let named = entry.value.base.clone();
            let mut s = stage(cx, entry.value, entry.at, "releases")?;
            if releases.iter().any(|r| r.manifest == s.manifest) {
                return Err(cx.invalid(
                    entry.at,
                    "releases",
                    format!("{} is listed twice", s.manifest.display()),
                ));
            }
            s.base = Some(match named {
                Some(b) => {
                    let text = cx.text(&b)?;
                    let path = cx.path(b.at, &text);
                    if !bases.iter().any(|base| base.manifest == path) {
                        return Err(cx.invalid(
                            b.at,
                            "base",
                            format!("{} is not one of the pipeline's bases", path.display()),
                        ));
                    }
                    path
                }
                None if bases.len() == 1 => bases[0].manifest.clone(),
                None => {
                    return Err(cx.invalid(
                        entry.at,
                        "releases",
                        "name this release's base (`base:`): the pipeline has several",
                    ))
                }
            });
            releases.push(s);
        }
        content::non_empty(cx, &releases, "releases")?;
        let compress = match p.compress {
            None => "gzip".to_string(),
            Some(c) => {
                let text = cx.text(&c)?;
                if !COMPRESSIONS.contains(&text.as_str()) {
                    return Err(cx.invalid(
                        c.at,
                        "compress",
                        format!("`{text}`: expected {}", COMPRESSIONS.join(" or ")),
                    ));
                }
                text
            }
        };
        let artifact_url = match p.artifact_url {
            None => None,
            Some(u) => {
                let text = cx.text(&u)?;
                Some(
                    check_artifact_url(&text)
                        .map_err(|reason| cx.invalid(u.at, "artifact-url", reason))?,
                )
            }
        };
        Ok(PipelineManifest {
            edition,
            name: name.0,
            variables: cx.variables(),
            bases,
            releases,
            compress,
            artifact_url,
        })
    }
}

fn stage(cx: &Cx<'_>, s: PartialStage, at: At, field: &str) -> Result<Stage, ManifestError> {
    let manifest = cx.required_in(s.manifest, at, &format!("{field}.manifest"))?;
    let text = cx.text(&manifest)?;
    if text.trim().is_empty() {
        return Err(cx.invalid(manifest.at, "manifest", "cannot be empty"));
    }
    let path = cx.path(manifest.at, &text);
    let mut platforms: Vec<String> = Vec::new();
    for p in s.platforms.unwrap_or_default() {
        let name = cx.text(&p)?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(cx.invalid(
                p.at,
                "platforms",
                format!("`{name}` is not a platform name (letters, digits, `_`)"),
            ));
        }
        if !platforms.contains(&name) {
            platforms.push(name);
        }
    }
    let push = match s.push {
        None => None,
        Some(p) => {
            let dest = cx.text(&p)?;
            let rest = dest.strip_prefix("docker://").ok_or_else(|| {
                cx.invalid(
                    p.at,
                    "push",
                    format!("`{dest}` is not a docker://HOST/NAME:TAG reference"),
                )
            })?;
            if rest.is_empty() || !rest.contains('/') || rest.chars().any(char::is_whitespace) {
                return Err(cx.invalid(
                    p.at,
                    "push",
                    format!("`{dest}` is not a docker://HOST/NAME:TAG reference"),
                ));
            }
            Some(dest)
        }
    };
    Ok(Stage {
        manifest: path,
        platforms,
        push,
        base: None,
        variables: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemoryFiles;

    const PIPELINE: &str = "\
edition: 1
name: rhcos
variables:
  registry: quay.example/rhcos
  fixture: ~
base:
  manifest: rhel-8.6.yaml
  push: docker://${registry}/base:8.6
releases:
  - manifest: ocp-4.12.yaml
    platforms: [qemu, metal, qemu]
    push: docker://${registry}/node:4.12
  - manifest: sub/ocp-4.13.yaml
";

    fn parse(text: &str, vars: &Vars) -> Result<PipelineManifest, ManifestError> {
        PipelineManifest::parse(text, Path::new("/p/pipeline.yaml"), vars)
    }

    #[test]
    fn stages_resolve_against_the_pipeline_file() {
        let vars = Vars::new().with("fixture", "/srv/f").unwrap();
        let p = parse(PIPELINE, &vars).unwrap();
        assert_eq!(p.name, "rhcos");
        assert_eq!(p.bases.len(), 1);
        assert_eq!(p.bases[0].manifest, Path::new("/p/rhel-8.6.yaml"));
        assert!(p.bases[0].platforms.is_empty());
        assert_eq!(
            p.bases[0].push.as_deref(),
            Some("docker://quay.example/rhcos/base:8.6")
        );
        assert_eq!(p.releases.len(), 2);
        // With one base, every release is derived from it.
        for r in &p.releases {
            assert_eq!(r.base.as_deref(), Some(Path::new("/p/rhel-8.6.yaml")));
        }
        assert_eq!(p.releases[0].platforms, ["qemu", "metal"]);
        assert_eq!(p.releases[1].manifest, Path::new("/p/sub/ocp-4.13.yaml"));
        assert_eq!(p.releases[1].push, None);
        assert_eq!(p.variables["fixture"], "/srv/f");
        assert_eq!(p.variables["registry"], "quay.example/rhcos");
        assert_eq!(p.stage_vars().unwrap().get("fixture"), Some("/srv/f"));
    }

    #[test]
    fn caller_variables_win_and_pass_through() {
        let vars = Vars::new()
            .with("fixture", "/f")
            .unwrap()
            .with("registry", "127.0.0.1:5000")
            .unwrap()
            .with("snapshot", "20261115")
            .unwrap();
        let p = parse(PIPELINE, &vars).unwrap();
        assert_eq!(
            p.releases[0].push.as_deref(),
            Some("docker://127.0.0.1:5000/node:4.12")
        );
        // Not declared by the pipeline: still handed to the stages.
        assert_eq!(p.variables["snapshot"], "20261115");
    }

    #[test]
    fn includes_add_releases() {
        let files = MemoryFiles::new()
            .with(
                "/p/main.yaml",
                "edition: 1\ninclude: common.yaml\nreleases:\n  - manifest: ocp-4.13.yaml\n",
            )
            .with(
                "/p/common.yaml",
                "name: demo\nbase:\n  manifest: rhel.yaml\n  platforms: [qemu]\nreleases:\n  - manifest: ocp-4.12.yaml\n",
            );
        let loaded =
            PipelineManifest::load_from(&files, Path::new("/p/main.yaml"), &Vars::new()).unwrap();
        let m = loaded.manifest;
        let names: Vec<_> = m.releases.iter().map(|r| r.manifest.clone()).collect();
        assert_eq!(
            names,
            [
                PathBuf::from("/p/ocp-4.12.yaml"),
                PathBuf::from("/p/ocp-4.13.yaml")
            ]
        );
        assert_eq!(m.bases[0].platforms, ["qemu"]);
    }

    const TWO_LINES: &str = "\
edition: 1
name: rhcos
bases:
  - manifest: rhel-8.6.yaml
  - manifest: rhel-9.6.yaml
    push: docker://quay.example/base:9.6
    variables:
      snapshot: \"20261115\"
      fixture: ${fixture}-9
releases:
  - manifest: ocp-4.12.yaml
    base: rhel-8.6.yaml
  - manifest: ocp-4.19.yaml
    base: rhel-9.6.yaml
  - manifest: ocp-4.20.yaml
    base: ./rhel-9.6.yaml
";

    #[test]
    fn several_bases_each_release_names_its_own() {
        let vars = Vars::new().with("fixture", "/f").unwrap();
        let p = parse(TWO_LINES, &vars).unwrap();
        let line = |i: usize| p.line_vars(&p.bases[i]).unwrap();
        assert_eq!(line(0).get("fixture"), Some("/f"));
        assert_eq!(line(0).get("snapshot"), None);
        assert_eq!(line(1).get("fixture"), Some("/f-9"));
        assert_eq!(line(1).get("snapshot"), Some("20261115"));
        let bases: Vec<&Path> = p.bases.iter().map(|b| b.manifest.as_path()).collect();
        assert_eq!(
            bases,
            [Path::new("/p/rhel-8.6.yaml"), Path::new("/p/rhel-9.6.yaml")]
        );
        let of: Vec<(&str, &str)> = p
            .releases
            .iter()
            .map(|r| {
                (
                    r.manifest.file_name().unwrap().to_str().unwrap(),
                    r.base
                        .as_deref()
                        .unwrap()
                        .file_name()
                        .unwrap()
                        .to_str()
                        .unwrap(),
                )
            })
            .collect();
        assert_eq!(
            of,
            [
                ("ocp-4.12.yaml", "rhel-8.6.yaml"),
                ("ocp-4.19.yaml", "rhel-9.6.yaml"),
                ("ocp-4.20.yaml", "rhel-9.6.yaml")
            ]
        );
    }

    #[test]
    fn several_bases_errors() {
        let cases = [
            (
                TWO_LINES.replace("    base: rhel-8.6.yaml\n", ""),
                "/p/pipeline.yaml:11:5: invalid releases: name this release's base (`base:`): the pipeline has several",
            ),
            (
                TWO_LINES.replace("  - manifest: rhel-9.6.yaml\n", "  - manifest: rhel-8.6.yaml\n"),
                "/p/pipeline.yaml:5:5: invalid bases: /p/rhel-8.6.yaml is listed twice",
            ),
            (
                TWO_LINES.replace("  - manifest: rhel-8.6.yaml\n", "  - manifest: rhel-8.6.yaml\n    base: x.yaml\n"),
                "/p/pipeline.yaml:5:11: invalid base: a base has no base of its own",
            ),
            (
                TWO_LINES.replace("    base: rhel-8.6.yaml\n", "    base: rhel-8.6.yaml\n    variables:\n      snapshot: x\n"),
                "/p/pipeline.yaml:14:7: invalid variables: a release takes its line's variables: set them on its base",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text, &Vars::new().with("fixture", "/f").unwrap()).unwrap_err();
            assert_eq!(e.to_string(), want, "{text}");
        }
    }

    #[test]
    fn artifacts_default_to_gzip_without_url() {
        let vars = Vars::new().with("fixture", "/f").unwrap();
        let p = parse(PIPELINE, &vars).unwrap();
        assert_eq!((p.compress.as_str(), p.artifact_url), ("gzip", None));
        let text =
            format!("{PIPELINE}compress: none\nartifact-url: https://mirror.example/rhcos/\n");
        let p = parse(&text, &vars).unwrap();
        assert_eq!(p.compress, "none");
        assert_eq!(
            p.artifact_url.as_deref(),
            Some("https://mirror.example/rhcos")
        );
    }

    #[test]
    fn pipeline_errors() {
        let vars = Vars::new().with("fixture", "/f").unwrap();
        let swap = |from: &str, to: &str| PIPELINE.replace(from, to);
        let cases: Vec<(String, &str)> = vec![
            (
                swap("name: rhcos\n", ""),
                "/p/pipeline.yaml: missing required field `name`",
            ),
            (
                swap("base:\n  manifest: rhel-8.6.yaml\n  push: docker://${registry}/base:8.6\n", ""),
                "/p/pipeline.yaml: missing required field `base`",
            ),
            (
                swap("base:\n", "bases:\n  - manifest: rhel-9.6.yaml\nbase:\n"),
                "/p/pipeline.yaml:9:3: invalid base: give `base` or `bases`, not both",
            ),
            (
                swap("  - manifest: sub/ocp-4.13.yaml\n", "  - manifest: sub/ocp-4.13.yaml\n    base: rhel-9.yaml\n"),
                "/p/pipeline.yaml:14:11: invalid base: /p/rhel-9.yaml is not one of the pipeline's bases",
            ),
            (
                swap("push: docker://${registry}/base:8.6", "push: quay.io/x:1"),
                "/p/pipeline.yaml:8:9: invalid push: `quay.io/x:1` is not a docker://HOST/NAME:TAG reference",
            ),
            (
                swap("[qemu, metal, qemu]", "[\"qemu,metal\"]"),
                "/p/pipeline.yaml:11:17: invalid platforms: `qemu,metal` is not a platform name (letters, digits, `_`)",
            ),
            (
                swap("sub/ocp-4.13.yaml", "ocp-4.12.yaml"),
                "/p/pipeline.yaml:13:5: invalid releases: /p/ocp-4.12.yaml is listed twice",
            ),
            (
                swap("  - manifest: sub/ocp-4.13.yaml\n", "  - platforms: [qemu]\n"),
                "/p/pipeline.yaml:13:5: missing required field `releases.manifest`",
            ),
            (
                format!("{PIPELINE}packages: [x]\n"),
                "/p/pipeline.yaml:14:1: unknown field `packages`, expected one of `edition`, `include`, `variables`, `name`, `base`, `bases`, `releases`, `compress`, `artifact-url`",
            ),
            (
                format!("{PIPELINE}compress: xz\n"),
                "/p/pipeline.yaml:14:11: invalid compress: `xz`: expected gzip or none",
            ),
            (
                format!("{PIPELINE}artifact-url: ftp://x/y\n"),
                "/p/pipeline.yaml:14:15: invalid artifact-url: `ftp://x/y` is not an https://, http:// or file:// URL",
            ),
            (
                format!("{PIPELINE}artifact-url: \"https://x/a b\"\n"),
                "/p/pipeline.yaml:14:15: invalid artifact-url: `https://x/a b` is not a base URL (no spaces, quotes, query or fragment)",
            ),
        ];
        let mut failures = Vec::new();
        for (text, want) in &cases {
            match parse(text, &vars) {
                Ok(_) => failures.push(format!("parsed, wanted: {want}\n{text}")),
                Err(e) if e.to_string() != *want => {
                    failures.push(format!("got:  {e}\nwant: {want}\n{text}"))
                }
                Err(_) => {}
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    /// Each would have been published in stream.json and strata.json.
    #[test]
    fn artifact_urls_with_credentials_dot_segments_or_2049_characters_are_refused() {
        let long = format!("https://m.example/{}", "a".repeat(2049 - 18));
        assert_eq!(long.len(), 2049);
        let cases = [
            (
                "https://user:secret@m.example/rhcos",
                "names a user or password",
            ),
            ("https://token@m.example", "names a user or password"),
            (
                "https://m.example/rhcos/../etc",
                "has a `.` or `..` segment",
            ),
            ("https://m.example/./rhcos", "has a `.` or `..` segment"),
            (
                "https://m.example/rhcos/%2E%2e",
                "has a `.` or `..` segment",
            ),
            (
                long.as_str(),
                "has 2049 characters; an artifact URL may have at most 2048",
            ),
        ];
        for (url, want) in cases {
            let e = check_artifact_url(url).unwrap_err();
            assert!(e.contains(want), "{url}: {e}");
            assert!(e.chars().count() < 250, "the value is cut: {e}");
        }
        for ok in [
            "https://m.example/rhcos/",
            "file:///srv/builds",
            "https://m.example/a..b/@x",
            &long[..2048],
        ] {
            assert!(check_artifact_url(ok).is_ok(), "{ok}");
        }
    }
}
