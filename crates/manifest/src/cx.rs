//! The context a merged manifest is validated in ([`Cx`]): where each value
//! was written (for errors), the variables in force, and read access to
//! add-files sources. Every document type's `finish` and the shared field
//! checks (`content`, `repo`) take it; it depends on nothing they define.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{FileRole, Location, ManifestError};
use crate::source::{resolve, FileSource, FileTable, InputFile, InputKind};
use crate::spanned::{At, Str};
use crate::vars::{substitute, Dnf, Scope, SubstError, SubstErrorKind};

/// Whether `finish` reads add-files sources (to check and hash them).
#[derive(Clone, Copy)]
pub(crate) enum Sources<'a> {
    Read(&'a dyn FileSource),
    /// `parse`: resolve paths, read nothing.
    Unchecked,
}

/// Substitutes variables in `s`, locating a failure at the offending `${…}`.
pub(crate) fn subst(
    files: &FileTable,
    scope: &Scope,
    s: &Str,
    dnf: Dnf<'_>,
) -> Result<String, ManifestError> {
    substitute(&s.value, scope, dnf).map_err(|e: SubstError| {
        let location = files.location_of(s.at, &e.needle, e.nth);
        match e.kind {
            SubstErrorKind::Unknown(name) => ManifestError::UnknownVariable {
                location,
                name,
                known: scope.names(),
            },
            SubstErrorKind::Unset(name) => ManifestError::UnsetVariable { location, name },
            SubstErrorKind::Syntax(reason) => ManifestError::VariableSyntax { location, reason },
        }
    })
}

/// What `finish` validates with: locations, variables, and (for `load`)
/// access to add-files sources.
pub(crate) struct Cx<'a> {
    pub(crate) files: &'a FileTable,
    pub(crate) scope: &'a Scope,
    pub(crate) sources: Sources<'a>,
    /// Add-files sources read while validating.
    pub(crate) inputs: Vec<InputFile>,
}

impl Cx<'_> {
    pub(crate) fn loc(&self, at: At) -> Location {
        self.files.location(at)
    }

    /// Where `word` stands (as a whole word) inside the value recorded as `at`.
    pub(crate) fn loc_word(&self, at: At, word: &str) -> Location {
        self.files.location_of_word(at, word)
    }

    pub(crate) fn invalid(&self, at: At, field: &str, reason: impl Into<String>) -> ManifestError {
        ManifestError::InvalidValue {
            location: self.loc(at),
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// The value with `${…}` substituted.
    pub(crate) fn subst(&self, s: &Str, dnf: Dnf<'_>) -> Result<String, ManifestError> {
        subst(self.files, self.scope, s, dnf)
    }

    /// The variables in force that have a value.
    pub(crate) fn variables(&self) -> BTreeMap<String, String> {
        self.scope.values()
    }

    /// [`Cx::subst`] outside repo fields.
    pub(crate) fn text(&self, s: &Str) -> Result<String, ManifestError> {
        self.subst(s, Dnf::Off)
    }

    /// A required top-level field: reported against the root manifest.
    pub(crate) fn required<T>(&self, value: Option<T>, field: &str) -> Result<T, ManifestError> {
        value.ok_or_else(|| ManifestError::MissingField {
            location: self.files.root(),
            field: field.to_string(),
        })
    }

    /// A required key of a nested mapping that starts at `within`.
    pub(crate) fn required_in<T>(
        &self,
        value: Option<T>,
        within: At,
        field: &str,
    ) -> Result<T, ManifestError> {
        value.ok_or_else(|| ManifestError::MissingField {
            location: self.loc(within),
            field: field.to_string(),
        })
    }

    /// The file a value was written in.
    fn defined_in(&self, at: At) -> &Path {
        match at.file() {
            Some(id) => &self.files.get(id).path,
            None => Path::new(""),
        }
    }

    /// A path written in the file of `at`, resolved against that file.
    pub(crate) fn path(&self, at: At, value: &str) -> PathBuf {
        resolve(self.defined_in(at), value)
    }

    /// A path or URL written in the file of `at`, as a URL.
    pub(crate) fn file_url(&self, at: At, value: &str) -> String {
        crate::source::path_to_url(self.defined_in(at), value)
    }

    /// Checks that an add-files source exists, and records it as an input.
    /// Does nothing under `parse`.
    pub(crate) fn read_source(&mut self, at: At, path: &Path) -> Result<(), ManifestError> {
        let Sources::Read(source) = self.sources else {
            return Ok(());
        };
        let content = source.read(path).map_err(|e| ManifestError::MissingFile {
            location: self.loc(at),
            role: FileRole::AddFilesSource,
            path: path.to_path_buf(),
            source: e,
        })?;
        if !self.inputs.iter().any(|i| i.path == path) {
            self.inputs
                .push(InputFile::new(path, InputKind::AddFilesSource, &content));
        }
        Ok(())
    }
}
