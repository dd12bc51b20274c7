//! The crate's one error type, and the `file:line:column` locations it carries.
//!
//! Every error that concerns a place in a file carries a [`Location`], and its
//! message reads as one line that a person can act on without the source at
//! hand. The underlying I/O error, when there is one, is the error's `source()`
//! and is not repeated in its message, so that a cause chain printed with
//! `{:#}` names it once.
//!
//! This module must not format for a particular front end: no colours, no
//! terminal assumptions.

use std::fmt;
use std::io;
use std::path::PathBuf;

use strata_process::text::{first_line, shown};

/// A 1-based line and column (columns count characters, as serde_yaml does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

impl Position {
    /// A position from 1-based counts (saturating past `u32::MAX`).
    pub fn new(line: usize, column: usize) -> Self {
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Position {
            line: clamp(line),
            column: clamp(column),
        }
    }
}

/// A file, and where in it when that is known.
///
/// Displays as `file:line:column`, or `file` alone for an error about the file
/// as a whole (a required field missing from a manifest and its includes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The path as the user would recognise it: the root manifest as given to
    /// `load`/`parse`, included files relative to it.
    pub file: PathBuf,
    pub position: Option<Position>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", one_line(&self.file.display().to_string()))?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        Ok(())
    }
}

/// Which kind of file a [`ManifestError::MissingFile`] was looking for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRole {
    /// A file named by `include`.
    Include,
    /// A dnf `.repo` file named by a `repos` entry `{file: …}`.
    RepoFile,
    /// The `src` of an `add-files` entry.
    AddFilesSource,
}

impl fmt::Display for FileRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileRole::Include => "include",
            FileRole::RepoFile => "repo file",
            FileRole::AddFilesSource => "add-files source",
        })
    }
}

/// Text as an error shows it: one line, however multi-line the value in
/// it was (a script given where a unit name belongs): up to the first line
/// break (then `…`), at most 1000 characters, control characters escaped.
fn one_line(text: &str) -> String {
    first_line(text, 1000)
}

/// Everything that can go wrong reading, merging or validating a manifest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The manifest given to `load` cannot be read.
    #[error("cannot read manifest {}", one_line(&path.display().to_string()))]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Not YAML, or YAML of the wrong shape (a list where a string belongs…).
    #[error("{location}: {}", one_line(message))]
    Syntax { location: Location, message: String },

    /// A key that the format does not define; `expected` lists the valid keys.
    #[error("{location}: unknown field `{}`, expected {expected}", one_line(field))]
    UnknownField {
        location: Location,
        field: String,
        expected: String,
    },

    /// A required field is absent. For top-level fields the location is the
    /// root manifest (the field may come from any file it includes).
    #[error("{location}: missing required field `{field}`")]
    MissingField { location: Location, field: String },

    /// A value of the right type that the format does not accept.
    #[error("{location}: invalid {field}: {}", one_line(reason))]
    InvalidValue {
        location: Location,
        field: String,
        reason: String,
    },

    /// `${name}` names no variable declared in the manifest or given by the caller.
    #[error(
        "{location}: unknown variable `${{{}}}`{}",
        shown(name),
        known_list(known)
    )]
    UnknownVariable {
        location: Location,
        name: String,
        /// The variables that do exist, sorted.
        known: Vec<String>,
    },

    /// `${name}` names a variable declared without a default (`name: ~`) that
    /// the caller gave no value.
    #[error("{location}: variable `{n}` has no value: it is declared without a default, so the caller must set it (--var {n}=VALUE)", n = shown(name))]
    UnsetVariable { location: Location, name: String },

    /// A malformed `${…}` reference, or a bad variable name.
    #[error("{location}: {}", one_line(reason))]
    VariableSyntax { location: Location, reason: String },

    /// A file named by the manifest (include, `.repo` file, add-files source)
    /// cannot be read. The location is where the manifest names it.
    #[error("{location}: cannot read {role} `{}`", one_line(&path.display().to_string()))]
    MissingFile {
        location: Location,
        role: FileRole,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A file includes itself, directly or not. `chain` runs from the first
    /// file of the cycle back to it: `a.yaml -> b.yaml -> a.yaml`.
    #[error("{location}: include cycle: {}", chain_list(chain))]
    IncludeCycle {
        location: Location,
        chain: Vec<PathBuf>,
    },

    /// Includes nest deeper than [`crate::MAX_INCLUDE_DEPTH`].
    #[error("{location}: includes nest deeper than {limit} files")]
    IncludeTooDeep { location: Location, limit: usize },

    /// A line of a dnf `.repo` file that cannot be understood.
    #[error("{location}: {}", one_line(message))]
    RepoFile { location: Location, message: String },

    /// Two different definitions of one repo id.
    #[error(
        "{location}: duplicate repo id `{}` (first defined at {first})",
        one_line(id)
    )]
    DuplicateRepo {
        location: Location,
        id: String,
        first: Location,
    },

    /// A package is both in `exclude-packages` and in `packages`.
    #[error(
        "{location}: package `{}` is excluded but also requested in packages at {requested}",
        shown(package)
    )]
    ExcludedPackage {
        location: Location,
        package: String,
        requested: Location,
    },

    /// `inputs.repos` names a repo that `repos` does not define.
    #[error(
        "{location}: inputs.repos allows `{}`, but no entry in repos defines it",
        one_line(id)
    )]
    UnknownPolicyRepo { location: Location, id: String },

    /// A caller-supplied `NAME=VALUE` assignment is malformed.
    #[error("invalid variable assignment `{}`: {}", shown(arg), one_line(reason))]
    InvalidVarAssignment { arg: String, reason: String },
}

impl ManifestError {
    /// Where the error points, for the errors that concern a place in a file.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ManifestError::Read { .. } | ManifestError::InvalidVarAssignment { .. } => None,
            ManifestError::Syntax { location, .. }
            | ManifestError::UnknownField { location, .. }
            | ManifestError::MissingField { location, .. }
            | ManifestError::InvalidValue { location, .. }
            | ManifestError::UnknownVariable { location, .. }
            | ManifestError::UnsetVariable { location, .. }
            | ManifestError::VariableSyntax { location, .. }
            | ManifestError::MissingFile { location, .. }
            | ManifestError::IncludeCycle { location, .. }
            | ManifestError::IncludeTooDeep { location, .. }
            | ManifestError::RepoFile { location, .. }
            | ManifestError::DuplicateRepo { location, .. }
            | ManifestError::ExcludedPackage { location, .. }
            | ManifestError::UnknownPolicyRepo { location, .. } => Some(location),
        }
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        " (no variables are defined)".to_string()
    } else {
        let known: Vec<String> = known.iter().map(|k| shown(k)).collect();
        format!(" (defined: {})", known.join(", "))
    }
}

fn chain_list(chain: &[PathBuf]) -> String {
    chain
        .iter()
        .map(|p| one_line(&p.display().to_string()))
        .collect::<Vec<_>>()
        .join(" -> ")
}
