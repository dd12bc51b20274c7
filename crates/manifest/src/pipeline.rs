//! The pipeline manifest: what `strata build` runs — one base manifest, the
//! release manifests derived from it, the disk platforms of each, and where
//! each image is pushed.
//!
//! Must not: describe content. Packages, repos and policies live in the base
//! and release manifests it names; a pipeline only wires them together, so
//! the same manifests build by hand (`compose`, `derive`, `disk`) or as a
//! pipeline, with the same results.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::content;
use crate::document::{self, Cx, Document, Loaded, Partial};
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
    /// Names the pipeline's release records (`builds/release-<name>/…`).
    pub name: String,
    /// Every variable in force with a value: the caller's over the
    /// pipeline's defaults. `strata build` passes them to the stage manifests.
    pub variables: BTreeMap<String, String>,
    pub base: Stage,
    /// In the order written; each release manifest once.
    pub releases: Vec<Stage>,
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
    releases: Option<Vec<Spanned<PartialStage>>>,
}
merge_fields!(PartialPipeline {
    edition,
    include,
    variables,
    name,
    base,
    releases,
});

/// `base:` or a `releases:` entry, as one file states it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartialStage {
    manifest: Option<Str>,
    platforms: Option<Vec<Str>>,
    push: Option<Str>,
}
merge_fields!(PartialStage {
    manifest,
    platforms,
    push
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
        let base = cx.required(p.base, "base")?;
        let base = stage(cx, base.value, base.at, "base")?;
        let mut releases: Vec<Stage> = Vec::new();
        for entry in cx.required(p.releases, "releases")? {
            let s = stage(cx, entry.value, entry.at, "releases")?;
            if releases.iter().any(|r| r.manifest == s.manifest) {
                return Err(cx.invalid(
                    entry.at,
                    "releases",
                    format!("{} is listed twice", s.manifest.display()),
                ));
            }
            releases.push(s);
        }
        content::non_empty(cx, &releases, "releases")?;
        Ok(PipelineManifest {
            edition,
            name: name.0,
            variables: cx.variables(),
            base,
            releases,
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
        assert_eq!(p.base.manifest, Path::new("/p/rhel-8.6.yaml"));
        assert!(p.base.platforms.is_empty());
        assert_eq!(
            p.base.push.as_deref(),
            Some("docker://quay.example/rhcos/base:8.6")
        );
        assert_eq!(p.releases.len(), 2);
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
        assert_eq!(m.base.platforms, ["qemu"]);
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
                "/p/pipeline.yaml:14:1: unknown field `packages`, expected one of `edition`, `include`, `variables`, `name`, `base`, `releases`",
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
}
