//! Where manifest files come from, and the table of files one load has read.
//!
//! The loader reads through a [`FileSource`]: the real filesystem for
//! `load`, a [`MemoryFiles`] map for tests and for callers that hold
//! manifests in memory. Every file read is recorded as an [`InputFile`] with
//! its sha256, so that compose can hash everything a build depended on.
//!
//! Must not: interpret file contents. This module reads bytes and maps
//! recorded spans back to `file:line:column`; it does not know YAML or dnf.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Location, Position};
use crate::spanned::{At, FileId, Locator};

/// Reads the files a manifest names.
pub trait FileSource {
    /// The whole content of `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;

    /// The content of `path`, refused when it holds more than `limit`
    /// bytes. A source that can read less than the whole file to know
    /// (the filesystem) should.
    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<Vec<u8>> {
        strata_process::regular::read_limited(io::Cursor::new(self.read(path)?), limit)
    }
}

/// The real filesystem: regular files only (a FIFO or a device named as a
/// file is refused without being read).
#[derive(Clone, Copy, Debug, Default)]
pub struct Filesystem;

impl FileSource for Filesystem {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut crate::input::open_regular(path)?, &mut bytes)?;
        Ok(bytes)
    }

    fn read_limited(&self, path: &Path, limit: u64) -> io::Result<Vec<u8>> {
        strata_process::regular::read_regular(path, limit)
    }
}

/// Files held in memory, keyed by path (compared after lexical normalisation:
/// `a/./b/../c` is `a/c`).
#[derive(Clone, Debug, Default)]
pub struct MemoryFiles {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl MemoryFiles {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a file.
    pub fn insert(&mut self, path: impl AsRef<Path>, content: impl Into<Vec<u8>>) {
        self.files.insert(normalize(path.as_ref()), content.into());
    }

    /// Like [`MemoryFiles::insert`], for building a set in one expression.
    pub fn with(mut self, path: impl AsRef<Path>, content: impl Into<Vec<u8>>) -> Self {
        self.insert(path, content);
        self
    }
}

impl FileSource for MemoryFiles {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.files
            .get(&normalize(path))
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file in memory"))
    }
}

/// Why a file was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// The manifest given to `load`.
    Manifest,
    /// A file named by `include`.
    Include,
    /// A dnf `.repo` file named by a `repos` entry.
    RepoFile,
    /// The `src` of an `add-files` entry.
    AddFilesSource,
}

/// A file that a load read, and a digest of what it held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputFile {
    /// The path read (absolute when the manifest's path was).
    #[serde(serialize_with = "crate::canonical::path")]
    pub path: PathBuf,
    pub kind: InputKind,
    /// Lower-case hex sha256 of the content.
    pub sha256: String,
    pub size: u64,
}

impl InputFile {
    pub(crate) fn new(path: &Path, kind: InputKind, content: &[u8]) -> Self {
        InputFile {
            path: path.to_path_buf(),
            kind,
            sha256: hex::encode(Sha256::digest(content)),
            size: content.len() as u64,
        }
    }
}

/// Lexical normalisation: drops `.`, resolves `..` against the preceding
/// component. Does not touch the filesystem (symlinks are not resolved).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let popped =
                    matches!(out.components().next_back(), Some(Component::Normal(_))) && out.pop();
                if !popped && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `rel` resolved against the directory of `file`, normalised.
pub(crate) fn resolve(file: &Path, rel: &str) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new(""));
    normalize(&dir.join(rel))
}

pub(crate) struct LoadedFile {
    /// As read: used to resolve relative paths.
    pub(crate) path: PathBuf,
    /// As shown in errors.
    pub(crate) display: PathBuf,
    pub(crate) text: String,
    /// How to find a YAML span again; `None` for files we parse ourselves.
    pub(crate) locator: Option<Locator>,
}

/// Every file one load parsed, for turning spans back into locations.
#[derive(Default)]
pub(crate) struct FileTable {
    files: Vec<LoadedFile>,
}

impl FileTable {
    pub(crate) fn add(&mut self, file: LoadedFile) -> FileId {
        self.files.push(file);
        FileId(self.files.len() - 1)
    }

    pub(crate) fn get(&self, id: FileId) -> &LoadedFile {
        &self.files[id.0]
    }

    /// The root manifest, as a whole.
    pub(crate) fn root(&self) -> Location {
        Location {
            file: self
                .files
                .first()
                .map(|f| f.display.clone())
                .unwrap_or_default(),
            position: None,
        }
    }

    /// Where the value recorded as `at` starts.
    pub(crate) fn location(&self, at: At) -> Location {
        match at {
            At::Nowhere => self.root(),
            At::Text { file, position } => Location {
                file: self.get(file).display.clone(),
                position: Some(position),
            },
            At::Yaml { file, ordinal } => {
                let f = self.get(file);
                Location {
                    file: f.display.clone(),
                    position: f.locator.and_then(|locate| locate(&f.text, ordinal)),
                }
            }
        }
    }

    /// Where the `nth` unescaped occurrence of `needle` inside the value
    /// recorded as `at` is; the value's start when it cannot be found.
    pub(crate) fn location_of(&self, at: At, needle: &str, nth: usize) -> Location {
        let escaped = |text: &str, i: usize| needle.starts_with("${") && text[..i].ends_with('$');
        self.find(at, needle, nth, |text, i| !escaped(text, i))
    }

    /// Where `word` stands as a whole word (a package name among several)
    /// inside the value recorded as `at`; the value's start when not found.
    pub(crate) fn location_of_word(&self, at: At, word: &str) -> Location {
        let part = |c: char| c.is_ascii_alphanumeric() || "._+-".contains(c);
        self.find(at, word, 0, |text, i| {
            let before = text[..i].chars().next_back().is_none_or(|c| !part(c));
            let after = text[i + word.len()..]
                .chars()
                .next()
                .is_none_or(|c| !part(c));
            before && after
        })
    }

    fn find(
        &self,
        at: At,
        needle: &str,
        nth: usize,
        accept: impl Fn(&str, usize) -> bool,
    ) -> Location {
        let start = self.location(at);
        let (Some(file), Some(pos)) = (at.file(), start.position) else {
            return start;
        };
        let text = &self.get(file).text;
        let Some(offset) = byte_offset(text, pos) else {
            return start;
        };
        let found = text[offset..]
            .match_indices(needle)
            .map(|(i, _)| offset + i)
            .filter(|&i| accept(text, i))
            .nth(nth);
        match found {
            Some(i) => Location {
                file: start.file,
                position: Some(position_of(text, i)),
            },
            None => start,
        }
    }
}

/// The byte offset of a 1-based line and character column.
fn byte_offset(text: &str, pos: Position) -> Option<usize> {
    let mut line_start = 0;
    for _ in 1..pos.line {
        line_start += text[line_start..].find('\n')? + 1;
    }
    let line = &text[line_start..];
    let col = line
        .char_indices()
        .nth((pos.column as usize).saturating_sub(1))
        .map(|(i, _)| i)
        .unwrap_or(line.len());
    Some(line_start + col)
}

/// The 1-based line and character column of a byte offset.
fn position_of(text: &str, offset: usize) -> Position {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Position::new(line, before[line_start..].chars().count() + 1)
}

/// `scheme://…`, as dnf needs for a baseurl.
pub(crate) fn has_scheme(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        let mut chars = scheme.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    })
}

/// The `file://` URL of a path named in the file `defined_in`.
pub(crate) fn path_to_url(defined_in: &Path, value: &str) -> String {
    if has_scheme(value) {
        value.to_string()
    } else {
        format!("file://{}", resolve(defined_in, value).display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_table() {
        let cases = [
            ("/a/b/../c", "/a/c"),
            ("/a/./b", "/a/b"),
            ("a/../../b", "../b"),
            ("/../a", "/a"),
            ("x.yaml", "x.yaml"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(Path::new(input)), PathBuf::from(want), "{input}");
        }
        assert_eq!(
            resolve(Path::new("/m/a.yaml"), "../b.yaml"),
            PathBuf::from("/b.yaml")
        );
        assert_eq!(
            resolve(Path::new("a.yaml"), "b/c.repo"),
            PathBuf::from("b/c.repo")
        );
    }

    #[test]
    fn positions_round_trip() {
        let text = "ab\nçd ${x}\n";
        let p = Position { line: 2, column: 4 };
        let off = byte_offset(text, p).unwrap();
        assert_eq!(&text[off..off + 4], "${x}");
        assert_eq!(position_of(text, off), p);
    }

    #[test]
    fn a_file_over_the_limit_is_refused_in_the_same_words_from_memory_and_disk() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("big.yaml");
        std::fs::write(&path, [b'x'; 11]).unwrap();
        let memory = MemoryFiles::new().with(&path, [b'x'; 11]);
        let from_disk = Filesystem.read_limited(&path, 10).unwrap_err();
        let from_memory = memory.read_limited(&path, 10).unwrap_err();
        assert_eq!(from_disk.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(from_memory.kind(), from_disk.kind());
        assert_eq!(from_memory.to_string(), from_disk.to_string());
        assert_eq!(memory.read_limited(&path, 11).unwrap().len(), 11);
    }

    #[test]
    fn memory_files_normalise_paths() {
        let files = MemoryFiles::new().with("/m/./a.yaml", "x");
        assert_eq!(files.read(Path::new("/m/b/../a.yaml")).unwrap(), b"x");
        assert!(files.read(Path::new("/m/b.yaml")).is_err());
    }
}
