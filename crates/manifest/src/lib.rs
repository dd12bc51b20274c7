//! strata's manifest formats: the base manifest that `compose` builds from,
//! the release manifest that `derive` layers on top, and the pipeline
//! manifest that `build` runs them from, in YAML.
//!
//! A manifest is one file plus the files it includes and the dnf `.repo`
//! files it names. [`BaseManifest::parse`] and [`ReleaseManifest::parse`]
//! read one text and do no I/O; `load` reads the files and returns the
//! flattened manifest with the list of files it read ([`Loaded`]), for input
//! hashing. Every error names `file:line:column` ([`ManifestError`]).
//! docs/manifest.md is the reference for the formats.
//!
//! This crate must not do anything but read files: no network, no rpm, no
//! dnf, no clock. Enforcing the input policy, fetching keys and rendering
//! versions with a real date are the callers' jobs.
//!
//! Modules:
//! - `base`, `release`, `pipeline`: the document types and their public structs.
//! - `document`: what they share: includes, `.repo` expansion, variables,
//!   merging order, the validation context. A third type plugs in here.
//! - `content`: fields several types have (packages, add-files, inputs…).
//! - `repo`, `repofile`: repos, inline or from dnf `.repo` files.
//! - `policy`: the input policy and key fingerprints.
//! - `version`: version templates and dates.
//! - `vars`: caller variables and `${name}` substitution.
//! - `merge`: how an including file applies on top of its includes.
//! - `input`: the bounded, regular-file-only reader of YAML and JSON files
//!   (lockfiles and overrides files too), and duplicate keys.
//! - `spanned`: file positions for YAML values, and the size limits.
//! - `source`: where files are read from; the files a load read.
//! - `canonical`: deterministic JSON for hashing.
//! - `error`: the error type and locations.

mod base;
mod canonical;
mod content;
mod cx;
mod document;
mod error;
mod input;
mod merge;
mod pipeline;
mod policy;
mod release;
mod repo;
mod repofile;
mod source;
mod spanned;
mod vars;
mod version;

pub use base::{BaseManifest, RpmdbBackend};
pub use content::{is_unit_name, AddFile, Initramfs};
pub use document::{Loaded, EDITION, MAX_INCLUDE_DEPTH};
pub use error::{FileRole, Location, ManifestError, Position};
pub use input::{open_regular, parse_data, read_input, read_regular, MAX_INPUT_BYTES};
pub use pipeline::{check_artifact_url, PipelineManifest, Stage, COMPRESSIONS};
pub use policy::{Fingerprint, InputPolicy, KeyRef};
pub use release::ReleaseManifest;
pub use repo::Repo;
pub use source::{FileSource, Filesystem, InputFile, InputKind, MemoryFiles};
#[doc(hidden)]
pub use strata_process::text::{escaped, shown};
pub use vars::{Vars, BASEARCH};
pub use version::{OcpRelease, UtcDateTime, VersionParts, VersionPrefix, VersionTemplate};
