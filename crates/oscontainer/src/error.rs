//! The error type of this crate.
//!
//! Every failure a caller can act on is its own variant carrying the object
//! (blob digest, tar path, image reference) that caused it, so that the CLI's
//! one-line `error:` chain names what is wrong without a log. Bad input is
//! always an `Err`, never a panic. A variant that wraps another error
//! exposes it as its `source` and does not repeat it in its message: the
//! `{:#}` of the chain prints each cause once.

use std::path::PathBuf;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file system operation failed.
    #[error("{context}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// libostree reported an error.
    #[error("{context}")]
    Ostree {
        /// What was being done, naming the repository or object.
        context: String,
        /// The underlying error.
        source: ostree::glib::Error,
    },
    /// The OCI layout could not be read or written.
    #[error("OCI layout {path}")]
    Layout {
        /// The layout directory.
        path: PathBuf,
        /// The underlying error.
        source: ocidir::Error,
    },
    /// A JSON document (manifest, config, index, layer map) is malformed.
    #[error("{context}")]
    Json {
        /// Which document.
        context: String,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// An image reference could not be parsed.
    #[error("invalid image reference {reference:?}: {reason}")]
    BadReference {
        /// The reference as given.
        reference: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The tag is not in the layout's index.json.
    #[error("no image tagged {tag:?} in {}", layout.display())]
    TagNotFound {
        /// The layout directory.
        layout: PathBuf,
        /// The tag asked for.
        tag: String,
    },
    /// A blob the manifest references is not in the layout.
    #[error("blob {digest} referenced by the manifest is missing from {}", layout.display())]
    MissingBlob {
        /// The layout directory.
        layout: PathBuf,
        /// The missing blob.
        digest: String,
    },
    /// A blob's file in the layout is a symlink, a directory, a FIFO or a
    /// device: refused without following or opening it for reading.
    #[error("blob {digest} in {} is {kind}, not a regular file", layout.display())]
    NotARegularBlob {
        /// The layout directory.
        layout: PathBuf,
        /// The blob.
        digest: String,
        /// What the file is (`a symlink`).
        kind: &'static str,
    },
    /// A blob's content does not hash to its digest.
    #[error("blob {digest} is corrupt: its content hashes to {found}")]
    DigestMismatch {
        /// The digest the manifest names.
        digest: String,
        /// The digest of the bytes on disk.
        found: String,
    },
    /// A blob's size differs from the size in its descriptor.
    #[error("blob {digest} has {found} bytes, the manifest says {expected}")]
    SizeMismatch {
        /// The blob.
        digest: String,
        /// Size in the descriptor.
        expected: u64,
        /// Size on disk.
        found: u64,
    },
    /// A layer's data is not a valid (compressed) tar stream, e.g. truncated.
    #[error("layer {digest}: {reason}")]
    BadLayer {
        /// The layer blob.
        digest: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tar entry would write outside the root or through a symlink.
    #[error("layer {digest}: refusing entry {path:?}: {reason}")]
    UnsafeEntry {
        /// The layer blob.
        digest: String,
        /// The entry path as found in the tar stream.
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// The image is not in the ostree container format.
    #[error("{image} is not an ostree container image: {reason}")]
    NotOstreeImage {
        /// The image.
        image: String,
        /// What is missing.
        reason: String,
    },
    /// An ostree commit cannot be encapsulated or was imported incomplete.
    #[error("commit {commit}: {reason}")]
    BadCommit {
        /// The commit checksum or ref.
        commit: String,
        /// What is wrong.
        reason: String,
    },
    /// The layer map or the chunking input is inconsistent.
    #[error("chunking: {0}")]
    Chunking(String),
    /// An image label's value breaks the grammar of what it names.
    #[error("image label {label}={value:?} is not {rule}")]
    BadLabel {
        /// The label.
        label: String,
        /// Its value as found.
        value: String,
        /// The grammar it must follow.
        rule: &'static str,
    },
    /// A value from an image (not a label: a kernel directory, commit
    /// metadata) breaks the grammar of what it names.
    #[error("{what} {value:?} is not {rule}")]
    BadValue {
        /// Where the value was found.
        what: String,
        /// The value as found.
        value: String,
        /// The grammar it must follow.
        rule: &'static str,
    },
    /// A label an image would pass on breaks the rules every label
    /// follows (no control characters, bounded sizes); the label's name
    /// and value are shown escaped and cut.
    #[error("image labels: {0}")]
    UnfitLabel(String),
    /// A JSON document (manifest, config, index) is larger than strata
    /// reads: refused before it is read.
    #[error("{what} is {size} bytes, more than the {limit} bytes strata reads")]
    TooLarge {
        /// Which document (naming its digest or file).
        what: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An image found where one was checked is another: its digest moved
    /// (a registry tag retagged) between the check and the copy.
    #[error("{image} is now {found}, not the {checked} that was checked")]
    ImageChanged {
        /// The image as named.
        image: String,
        /// The manifest digest that was checked.
        checked: String,
        /// The manifest digest found instead.
        found: String,
    },
    /// An invalid option value.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// An external command (skopeo) failed.
    #[error(transparent)]
    Command(#[from] strata_process::Error),
}

/// `e` and each of its causes, joined by `: ` (what anyhow's `{:#}`
/// prints), for log lines.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches context to the foreign errors this crate sees.
pub(crate) trait Context<T> {
    /// Wraps the error with a description of what was being done.
    fn context_with(self, f: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, std::io::Error> {
    fn context_with(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: f(),
            source,
        })
    }
}

impl<T> Context<T> for std::result::Result<T, ostree::glib::Error> {
    fn context_with(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Ostree {
            context: f(),
            source,
        })
    }
}

impl<T> Context<T> for std::result::Result<T, serde_json::Error> {
    fn context_with(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Json {
            context: f(),
            source,
        })
    }
}
