//! What every manifest type shares: reading a file and its includes,
//! expanding `.repo` references, variables, merging, and the context in which
//! a merged document is validated.
//!
//! A document type (base, release, and later pipeline) provides a "partial"
//! struct, all fields optional, that one file deserializes into, and a
//! `finish` step that turns the merged partial into the public type. Adding
//! a type means writing those two and nothing here.
//!
//! Must not: touch anything but the [`FileSource`] it is given, and only to
//! read. `parse` runs the same code over a source that holds one text.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::cx::{subst, Cx, Sources};
use crate::error::{FileRole, Location, ManifestError, Position};
use crate::input::{check_yaml_keys, MAX_INPUT_BYTES};
use crate::merge::Merge;
use crate::repo::{self, PartialRepo};
use crate::repofile;
use crate::source::{normalize, resolve, FileSource, FileTable, InputFile, InputKind, LoadedFile};
use crate::spanned::{check_limits, from_yaml, locate, yaml_error, At, Spanned, Str};
use crate::vars::{check_name, Dnf, Scope, Vars};

/// How deeply includes may nest before the loader gives up (a guard against
/// cycles that lexical path comparison cannot see, through symlinks).
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// The only edition of the formats so far.
pub const EDITION: u32 = 1;

/// One file of a document type, as deserialized: every field optional.
pub(crate) trait Partial: DeserializeOwned + Default + Merge {
    fn edition(&self) -> Option<&Spanned<u32>>;
    /// Removes and returns the `include` list.
    fn take_includes(&mut self) -> Vec<Str>;
    fn variables(&self) -> Option<&BTreeMap<Str, Option<Str>>>;
    /// The `repos` list, for types that have one, so that `{file: x.repo}`
    /// entries can be expanded where they stand.
    fn repos_mut(&mut self) -> Option<&mut Vec<Spanned<PartialRepo>>> {
        None
    }
}

/// A manifest type: its partial form, and how to validate the merged partial.
pub(crate) trait Document: Sized {
    type Partial: Partial;
    fn finish(partial: Self::Partial, cx: &mut Cx<'_>) -> Result<Self, ManifestError>;
}

/// A manifest, and every file read to build it.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded<T> {
    pub manifest: T,
    /// In the order first read, each path once: the manifest, its includes,
    /// `.repo` files, add-files sources.
    pub files: Vec<InputFile>,
}

/// The source `parse` uses: the one text it was given, nothing else.
struct OneText<'a> {
    path: &'a Path,
    text: &'a str,
}

impl FileSource for OneText<'_> {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if normalize(path) == normalize(self.path) {
            Ok(self.text.as_bytes().to_vec())
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "parse() reads no other file; use load()",
            ))
        }
    }
}

/// Parses one manifest text; `origin` names it in errors and anchors
/// relative paths.
pub(crate) fn parse<D: Document>(
    text: &str,
    origin: &Path,
    vars: &Vars,
) -> Result<D, ManifestError> {
    let source = OneText { path: origin, text };
    let (doc, _) = run::<D>(&source, origin, origin, vars, Sources::Unchecked)?;
    Ok(doc)
}

/// Loads a manifest and everything it names through `source`.
pub(crate) fn load_from<D: Document>(
    source: &dyn FileSource,
    path: &Path,
    vars: &Vars,
) -> Result<Loaded<D>, ManifestError> {
    let (manifest, files) = run::<D>(source, &normalize(path), path, vars, Sources::Read(source))?;
    Ok(Loaded { manifest, files })
}

/// Loads a manifest from the filesystem; a relative path is taken from the
/// current directory, and every path in the result is absolute.
pub(crate) fn load<D: Document>(path: &Path, vars: &Vars) -> Result<Loaded<D>, ManifestError> {
    let absolute = std::path::absolute(path).map_err(|source| ManifestError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let source = crate::source::Filesystem;
    let (manifest, files) = run::<D>(
        &source,
        &normalize(&absolute),
        path,
        vars,
        Sources::Read(&source),
    )?;
    Ok(Loaded { manifest, files })
}

fn run<D: Document>(
    source: &dyn FileSource,
    path: &Path,
    display: &Path,
    vars: &Vars,
    sources: Sources<'_>,
) -> Result<(D, Vec<InputFile>), ManifestError> {
    let mut loader = Loader {
        source,
        files: FileTable::default(),
        inputs: Vec::new(),
    };
    let caller = Scope::from_caller(vars);
    let merged: D::Partial =
        loader.visit(path, display.to_path_buf(), None, &mut Vec::new(), &caller)?;
    let mut scope = caller;
    for (name, default) in merged.variables().into_iter().flatten() {
        scope.add_default(&name.value, default.as_ref().map(|d| d.value.as_str()));
    }
    let mut cx = Cx {
        files: &loader.files,
        scope: &scope,
        sources,
        inputs: Vec::new(),
    };
    let doc = D::finish(merged, &mut cx)?;
    let mut inputs = loader.inputs;
    for input in cx.inputs {
        if !inputs.iter().any(|i| i.path == input.path) {
            inputs.push(input);
        }
    }
    Ok((doc, inputs))
}

struct Loader<'a> {
    source: &'a dyn FileSource,
    files: FileTable,
    inputs: Vec<InputFile>,
}

impl Loader<'_> {
    fn record(&mut self, path: &Path, kind: InputKind, content: &[u8]) {
        if !self.inputs.iter().any(|i| i.path == path) {
            self.inputs.push(InputFile::new(path, kind, content));
        }
    }

    /// Reads `path` and its includes, and returns them merged: includes in
    /// order, then the file itself on top. `named_at` is the include entry
    /// that named it (`None` for the root); `stack` the files being visited;
    /// `scope` the variables known before reading it.
    fn visit<P: Partial>(
        &mut self,
        path: &Path,
        display: PathBuf,
        named_at: Option<At>,
        stack: &mut Vec<(PathBuf, PathBuf)>,
        scope: &Scope,
    ) -> Result<P, ManifestError> {
        if let Some(at) = named_at {
            if let Some(i) = stack.iter().position(|(p, _)| p == path) {
                let mut chain: Vec<PathBuf> = stack[i..].iter().map(|(_, d)| d.clone()).collect();
                chain.push(display);
                return Err(ManifestError::IncludeCycle {
                    location: self.files.location(at),
                    chain,
                });
            }
            if stack.len() >= MAX_INCLUDE_DEPTH {
                return Err(ManifestError::IncludeTooDeep {
                    location: self.files.location(at),
                    limit: MAX_INCLUDE_DEPTH,
                });
            }
        }
        let bytes =
            self.source
                .read_limited(path, MAX_INPUT_BYTES)
                .map_err(|source| match named_at {
                    None => ManifestError::Read {
                        path: display.clone(),
                        source,
                    },
                    Some(at) => ManifestError::MissingFile {
                        location: self.files.location(at),
                        role: FileRole::Include,
                        path: display.clone(),
                        source,
                    },
                })?;
        let kind = match named_at {
            None => InputKind::Manifest,
            Some(_) => InputKind::Include,
        };
        self.record(path, kind, &bytes);
        let text = utf8(bytes, &display)?;
        let id = self.files.add(LoadedFile {
            path: path.to_path_buf(),
            display: display.clone(),
            text,
            locator: Some(locate::<P>),
        });
        check_limits(&self.files.get(id).text, &display)?;
        let mut partial: P =
            from_yaml(&self.files.get(id).text, id).map_err(|e| yaml_error(&e, &display))?;
        // serde refuses a field given twice, but a map (`variables`) keeps
        // the last of two equal keys: a second walk refuses them too.
        check_yaml_keys(&self.files.get(id).text, &display)?;

        if let Some(edition) = partial.edition() {
            if edition.value != EDITION {
                return Err(ManifestError::InvalidValue {
                    location: self.files.location(edition.at),
                    field: "edition".to_string(),
                    reason: format!(
                        "{} is not an edition of this format (the only one is {EDITION})",
                        edition.value
                    ),
                });
            }
        }
        let mut here = scope.clone();
        for (name, default) in partial.variables().into_iter().flatten() {
            check_name(&name.value).map_err(|reason| ManifestError::VariableSyntax {
                location: self.files.location(name.at),
                reason,
            })?;
            here.add_default(&name.value, default.as_ref().map(|d| d.value.as_str()));
        }

        let mut merged = P::default();
        stack.push((path.to_path_buf(), display.clone()));
        for include in partial.take_includes() {
            let rel = subst(&self.files, &here, &include, Dnf::Off)?;
            let child = self.visit::<P>(
                &resolve(path, &rel),
                resolve(&display, &rel),
                Some(include.at),
                stack,
                &here,
            )?;
            merged.overlay(child);
        }
        stack.pop();

        if let Some(repos) = partial.repos_mut() {
            let entries = std::mem::take(repos);
            for entry in entries {
                match &entry.value.file {
                    Some(file) => {
                        let expanded = self.repo_file(path, &display, file, &entry.value, &here)?;
                        repos.extend(expanded);
                    }
                    None => repos.push(entry),
                }
            }
        }
        merged.overlay(partial);
        Ok(merged)
    }

    /// Reads the `.repo` file a `{file: …}` entry names.
    fn repo_file(
        &mut self,
        including: &Path,
        including_display: &Path,
        file: &Str,
        entry: &PartialRepo,
        scope: &Scope,
    ) -> Result<Vec<Spanned<PartialRepo>>, ManifestError> {
        let alone = PartialRepo {
            file: None,
            ..entry.clone()
        } == PartialRepo::default();
        if !alone {
            return Err(ManifestError::InvalidValue {
                location: self.files.location(file.at),
                field: "repos entry".to_string(),
                reason: "`file:` takes a .repo file and nothing else; set repo keys in the .repo file or inline".to_string(),
            });
        }
        let rel = subst(&self.files, scope, file, Dnf::Off)?;
        let path = resolve(including, &rel);
        let display = resolve(including_display, &rel);
        let bytes = self
            .source
            .read_limited(&path, MAX_INPUT_BYTES)
            .map_err(|source| ManifestError::MissingFile {
                location: self.files.location(file.at),
                role: FileRole::RepoFile,
                path: display.clone(),
                source,
            })?;
        self.record(&path, InputKind::RepoFile, &bytes);
        let text = utf8(bytes, &display)?;
        let sections = repofile::parse(&text).map_err(|e| ManifestError::RepoFile {
            location: Location {
                file: display.clone(),
                position: Some(e.at),
            },
            message: e.message,
        })?;
        let id = self.files.add(LoadedFile {
            path,
            display: display.clone(),
            text,
            locator: None,
        });
        if sections.is_empty() {
            return Err(ManifestError::RepoFile {
                location: Location {
                    file: display,
                    position: None,
                },
                message: "defines no repo".to_string(),
            });
        }
        sections
            .iter()
            .map(|s| repo::from_section(s, id, &display))
            .collect()
    }
}

fn utf8(bytes: Vec<u8>, display: &Path) -> Result<String, ManifestError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let valid = String::from_utf8_lossy(valid);
        let line = valid.matches('\n').count() + 1;
        let column = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ManifestError::Syntax {
            location: Location {
                file: display.to_path_buf(),
                position: Some(Position::new(line, column)),
            },
            message: "not UTF-8 text".to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemoryFiles;
    use crate::{BaseManifest, ReleaseManifest};

    const ROOT: &str = "\
edition: 1
include: common.yaml
name: rhel-8.6
osname: rhcos
releasever: \"8\"
version-prefix: 8.6.<date:%Y%m%d>
packages: [kernel, bash]
";

    const COMMON: &str = "\
variables:
  mirror: file:///srv
repos:
  - file: rhel.repo
  - id: epel-8
    baseurl: ${mirror}/epel-8
    gpgcheck: false
inputs:
  repos: [rhel-8-baseos]
  keys: [{file: keys/release.asc}]
packages: [systemd, kernel]
initramfs:
  args: [--no-hostonly]
";

    const RHEL_REPO: &str = "\
[rhel-8-baseos]
name = BaseOS $releasever
baseurl = ${mirror}/rhel$releasever/$basearch/baseos
gpgkey = file:///etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release
metadata_expire = 86400
";

    fn files() -> MemoryFiles {
        MemoryFiles::new()
            .with("/m/rhel.yaml", ROOT)
            .with("/m/common.yaml", COMMON)
            .with("/m/rhel.repo", RHEL_REPO)
    }

    fn load(files: &MemoryFiles, vars: &Vars) -> Result<Loaded<BaseManifest>, ManifestError> {
        BaseManifest::load_from(files, Path::new("/m/rhel.yaml"), vars)
    }

    #[test]
    fn includes_merge_under_the_including_file() {
        let loaded = load(&files(), &Vars::new()).unwrap();
        let m = &loaded.manifest;
        // Lists append, included first, without repeating `kernel`.
        assert_eq!(m.packages, ["systemd", "kernel", "bash"]);
        let ids: Vec<&str> = m.repos.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["rhel-8-baseos", "epel-8"]);
        // `.repo` values get $releasever, $basearch and manifest variables.
        assert_eq!(m.repos[0].name, "BaseOS 8");
        assert_eq!(m.repos[0].baseurl, ["file:///srv/rhel8/x86_64/baseos"]);
        assert_eq!(m.repos[1].baseurl, ["file:///srv/epel-8"]);
        assert!(!m.repos[1].gpgcheck);
        assert_eq!(
            m.inputs.keys,
            [crate::KeyRef::File(PathBuf::from("/m/keys/release.asc"))]
        );
        assert_eq!(m.initramfs.args, ["--no-hostonly"]);
        let read: Vec<(&Path, InputKind)> = loaded
            .files
            .iter()
            .map(|f| (f.path.as_path(), f.kind))
            .collect();
        assert_eq!(
            read,
            [
                (Path::new("/m/rhel.yaml"), InputKind::Manifest),
                (Path::new("/m/common.yaml"), InputKind::Include),
                (Path::new("/m/rhel.repo"), InputKind::RepoFile),
            ]
        );
        assert_eq!(loaded.files[0].size, ROOT.len() as u64);
    }

    #[test]
    fn the_including_file_overrides_scalars_and_variables() {
        let root =
            format!("{ROOT}variables:\n  mirror: https://mirror.example\ndocumentation: false\n");
        let common = format!("{COMMON}documentation: true\nrecommends: true\n");
        let files = files()
            .with("/m/rhel.yaml", root)
            .with("/m/common.yaml", common);
        let m = load(&files, &Vars::new()).unwrap().manifest;
        assert!(!m.documentation);
        assert!(m.recommends);
        assert_eq!(m.repos[1].baseurl, ["https://mirror.example/epel-8"]);
        // The caller overrides every default.
        let vars = Vars::new().with("mirror", "file:///caller").unwrap();
        let m = load(&files, &vars).unwrap().manifest;
        assert_eq!(m.repos[0].baseurl, ["file:///caller/rhel8/x86_64/baseos"]);
    }

    #[test]
    fn later_includes_override_earlier_ones_and_diamonds_merge_once() {
        let files = MemoryFiles::new()
            .with(
                "/m/top.yaml",
                "edition: 1\ninclude: [a.yaml, b.yaml]\nversion-prefix: \"8.6\"\nrelease: x\n",
            )
            .with("/m/a.yaml", "include: shared.yaml\nname: from-a\nosname: a\n")
            .with("/m/b.yaml", "include: shared.yaml\nname: from-b\n")
            .with(
                "/m/shared.yaml",
                "releasever: \"8\"\nrepos: [{id: r, baseurl: \"file:///r\"}]\ninputs: {repos: [r], keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]}\npackages: [p]\n",
            );
        let err =
            BaseManifest::load_from(&files, Path::new("/m/top.yaml"), &Vars::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/m/top.yaml:4:1: unknown field `release`, expected one of `edition`, `include`, `variables`, `name`, `osname`, `releasever`, `version-prefix`, `repos`, `inputs`, `packages`, `exclude-packages`, `ignore-scripts`, `postprocess`, `add-files`, `remove-files`, `units`, `initramfs`, `rpmdb`, `documentation`, `recommends`, `lockfile`"
        );
        let files = files.with(
            "/m/top.yaml",
            "edition: 1\ninclude: [a.yaml, b.yaml]\nversion-prefix: \"8.6\"\n",
        );
        let m = BaseManifest::load_from(&files, Path::new("/m/top.yaml"), &Vars::new())
            .unwrap()
            .manifest;
        assert_eq!(m.name, "from-b");
        assert_eq!(m.osname, "a");
        assert_eq!(m.repos.len(), 1);
        assert_eq!(m.packages, ["p"]);
    }

    #[test]
    fn include_paths_are_relative_to_the_including_file_and_take_variables() {
        let files = MemoryFiles::new()
            .with(
                "/m/sub/top.yaml",
                "edition: 1\nvariables: {part: parts}\ninclude: ../${part}/one.yaml\n",
            )
            .with("/m/parts/one.yaml", "include: two.yaml\n")
            .with("/m/parts/two.yaml", "name: [not, a, string]\n");
        let err = BaseManifest::load_from(&files, Path::new("/m/sub/top.yaml"), &Vars::new())
            .unwrap_err();
        // The error is located in the file that holds the mistake, named
        // relative to the root manifest as given.
        assert_eq!(
            err.to_string(),
            "/m/parts/two.yaml:1:7: name: invalid type: sequence, expected a string"
        );
        let relative = MemoryFiles::new()
            .with("m/sub/top.yaml", "edition: 1\ninclude: ../parts/one.yaml\n")
            .with("m/parts/one.yaml", "include: two.yaml\n")
            .with("m/parts/two.yaml", "name: [not, a, string]\n");
        let err = BaseManifest::load_from(&relative, Path::new("m/sub/top.yaml"), &Vars::new())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "m/parts/two.yaml:1:7: name: invalid type: sequence, expected a string"
        );
    }

    #[test]
    fn include_errors_name_the_including_line() {
        let cycle = MemoryFiles::new()
            .with("/m/a.yaml", "edition: 1\ninclude: b.yaml\n")
            .with("/m/b.yaml", "include:\n  - c.yaml\n  - a.yaml\n")
            .with("/m/c.yaml", "{}\n");
        let cases: Vec<(MemoryFiles, &str)> = vec![
            (
                cycle,
                "/m/b.yaml:3:5: include cycle: /m/a.yaml -> /m/b.yaml -> /m/a.yaml",
            ),
            (
                MemoryFiles::new().with("/m/a.yaml", "include: [a.yaml]\n"),
                "/m/a.yaml:1:11: include cycle: /m/a.yaml -> /m/a.yaml",
            ),
            (
                MemoryFiles::new().with("/m/a.yaml", "edition: 1\n\ninclude:  missing.yaml\n"),
                "/m/a.yaml:3:11: cannot read include `/m/missing.yaml`",
            ),
            (
                MemoryFiles::new().with("/m/a.yaml", "include: ${where}/x.yaml\n"),
                "/m/a.yaml:1:10: unknown variable `${where}` (no variables are defined)",
            ),
            (
                MemoryFiles::new().with("/m/a.yaml", "repos:\n  - file: none.repo\n"),
                "/m/a.yaml:2:11: cannot read repo file `/m/none.repo`",
            ),
            (
                MemoryFiles::new()
                    .with("/m/a.yaml", "repos:\n  - file: x.repo\n    enabled: false\n"),
                "/m/a.yaml:2:11: invalid repos entry: `file:` takes a .repo file and nothing else; set repo keys in the .repo file or inline",
            ),
            (
                MemoryFiles::new()
                    .with("/m/a.yaml", "repos:\n  - file: x.repo\n")
                    .with("/m/x.repo", "[x]\nbaseurl=file:///x\nenabled=maybe\n"),
                "/m/x.repo:3:9: `enabled=maybe` is not a boolean (use 1 or 0)",
            ),
            (
                MemoryFiles::new()
                    .with("/m/a.yaml", "repos:\n  - file: x.repo\n")
                    .with("/m/x.repo", "[x]\nbaseurl=file:///x\nproxy=http://p\n"),
                "/m/x.repo:3:1: unknown key `proxy` in `[x]` (known: name, baseurl, metalink, mirrorlist, gpgkey, gpgcheck, repo_gpgcheck, enabled, sslverify, sslcacert, sslclientcert, sslclientkey, priority, cost, module_hotfixes, skip_if_unavailable; accepted and ignored: metadata_expire, enabled_metadata, ui_repoid_vars, sslverifystatus, type, countme, failovermethod, autorefresh, keepalive, deltarpm)",
            ),
            (
                MemoryFiles::new()
                    .with("/m/a.yaml", "repos:\n  - file: x.repo\n")
                    .with("/m/x.repo", "# no repos\n"),
                "/m/x.repo: defines no repo",
            ),
            (
                MemoryFiles::new()
                    .with(
                        "/m/a.yaml",
                        "edition: 1\nname: n\nosname: o\nreleasever: \"8\"\nversion-prefix: \"8\"\nrepos:\n  - file: x.repo\n",
                    )
                    .with("/m/x.repo", "[x]\nbaseurl=file:///${nope}\n"),
                "/m/x.repo:2:17: unknown variable `${nope}` (no variables are defined)",
            ),
            (
                MemoryFiles::new().with("/m/a.yaml", "edition: 7\n"),
                "/m/a.yaml:1:10: invalid edition: 7 is not an edition of this format (the only one is 1)",
            ),
            (
                MemoryFiles::new()
                    .with("/m/a.yaml", "edition: 1\ninclude: b.yaml\n")
                    .with("/m/b.yaml", "edition: 2\n"),
                "/m/b.yaml:1:10: invalid edition: 2 is not an edition of this format (the only one is 1)",
            ),
            (
                MemoryFiles::new().with("/m/a.yaml", b"name: caf\xe9\n".to_vec()),
                "/m/a.yaml:1:10: not UTF-8 text",
            ),
        ];
        let mut failures = Vec::new();
        for (files, want) in &cases {
            match BaseManifest::load_from(files, Path::new("/m/a.yaml"), &Vars::new()) {
                Ok(_) => failures.push(format!("loaded, wanted: {want}")),
                Err(e) if e.to_string() != *want => {
                    failures.push(format!("got:  {e}\nwant: {want}"))
                }
                Err(_) => {}
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    #[test]
    fn add_files_sources_are_checked_by_load_and_not_by_parse() {
        let text = format!("{ROOT}add-files:\n  - {{src: motd, dest: /etc/motd}}\n");
        let files = files().with("/m/rhel.yaml", text.clone());
        let err = load(&files, &Vars::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/m/rhel.yaml:9:11: cannot read add-files source `/m/motd`"
        );
        assert!(matches!(
            err,
            ManifestError::MissingFile {
                role: FileRole::AddFilesSource,
                ..
            }
        ));
        let files = files.with("/m/motd", "hello\n");
        let loaded = load(&files, &Vars::new()).unwrap();
        assert_eq!(loaded.manifest.add_files[0].src, PathBuf::from("/m/motd"));
        let last = loaded.files.last().unwrap();
        assert_eq!(last.kind, InputKind::AddFilesSource);
        assert_eq!(
            last.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        // parse() has no include to read, so it stops there.
        let err = BaseManifest::parse(&text, Path::new("/m/rhel.yaml"), &Vars::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/m/rhel.yaml:2:10: cannot read include `/m/common.yaml`"
        );
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert_eq!(source, "parse() reads no other file; use load()");
    }

    #[test]
    fn release_repos_keep_releasever_for_dnf() {
        let files = MemoryFiles::new()
            .with(
                "/m/ocp.yaml",
                "edition: 1\nrelease: \"4.13\"\nrepos: [{file: ocp.repo}]\ninputs: {repos: [rhocp], keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]}\npackages: [cri-o]\n",
            )
            .with("/m/ocp.repo", "[rhocp]\nbaseurl=https://cdn/rhel$releasever/$basearch/${releasever}\n");
        let m = ReleaseManifest::load_from(&files, Path::new("/m/ocp.yaml"), &Vars::new())
            .unwrap()
            .manifest;
        assert_eq!(
            m.repos[0].baseurl,
            ["https://cdn/rhel$releasever/x86_64/${releasever}"]
        );
    }
}
