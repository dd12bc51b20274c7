//! ostree commits ⇄ OCI images, the one place in strata that knows the OCI
//! layout.
//!
//! Base images are written in the ostree-ext container format so that real
//! clients (bootc, rpm-ostree, ostree-ext) import them and get the identical
//! commit; layers are chunked by component so updates download little, and
//! every byte is reproducible from the commit and SOURCE_DATE_EPOCH. Other
//! crates hand this crate a commit or an image reference; none of them reads
//! or writes `index.json`, manifests or layer blobs themselves.
//!
//! Modules:
//! - [`chunking`]: packs opaque components into at most N layers, stably
//!   across builds (the [`LayerMap`]).
//! - [`encapsulate`](mod@encapsulate): commit → image (commit layer + chunks),
//!   labels, parallel compression.
//! - [`derived`]: base image + plain layers from directories of changes
//!   (overlayfs upper dirs), whiteouts included.
//! - [`plain`]: a plain container image (no base, no ostree) from
//!   directories, with entrypoint, environment and labels: strata's own
//!   image.
//! - [`import`](mod@import): image → commit, including derived (non-ostree) layers with OCI
//!   whiteouts; refuses corrupt or hostile input. The flow and API live in
//!   `import`; its private submodules are `objects` (ostree layers' tar
//!   entries → objects), `derived_tree` (derived layers merged onto the
//!   base as ostree-ext does, then committed) and `entries` (what those
//!   two share).
//! - [`inspect`](mod@inspect): labels, layers, packages of an image; the diff of two images.
//! - [`labels`]: label names and the validated values read from them
//!   (`OsName`, `OcpVersion`, `Version`, …): images are untrusted input.
//! - [`transport`]: image references, push and pull with skopeo.
//! - [`archive`]: one image of a layout as a deterministic OCI archive
//!   (`oci-archive:FILE`).
//! - `layout`: verified reading of OCI layouts; tags and pruning of the
//!   shared blob store.
//! - `layer_stream` (private): a layer's uncompressed stream, decompressed
//!   ahead of its reader, diff ID checked, expansion bounded.
//! - `commit` (private): an ostree commit as plain data.
//! - [`commit_meta`]: the commit metadata keys strata reads back, and the
//!   typed values read from them (the initramfs generator's arguments).
//! - `tarball`, `compress` (private): deterministic tar (fields set through
//!   `tar::Header`, name and checksum by hand) and gzip/zstd (zlib-rs,
//!   not flate2, whose backend depends on the build); [`gzip_file`]
//!   compresses a file (a disk) the same way.
//! - `artifact` (private): files written to a temporary name and renamed,
//!   hashed as they are written.
//!
//! Errors are [`Error`]; nothing here panics on bad input.

pub mod archive;
mod artifact;
pub mod chunking;
mod commit;
pub mod commit_meta;
mod commit_tar;
mod compress;
pub mod derived;
pub mod encapsulate;
mod error;
mod gzip_blocks;
pub mod import;
pub mod inspect;
pub mod labels;
mod layer_cache;
mod layer_stream;
mod layout;
pub mod plain;
mod tarball;
pub mod transport;

pub use archive::{write_oci_archive, ArchiveInfo, ARCHIVE_REF_NAME};
pub use chunking::{Component, LayerMap};
pub use commit::file_header;
pub use compress::{gzip_file, Compressed, Compression};
pub use derived::{
    append_layer_committing, append_layers, DeriveOptions, Derived, DerivedLayer, PendingCommit,
};
pub use encapsulate::{
    encapsulate, object_components, ContentMap, EncapsulateOptions, Encapsulated, LayerInfo,
};
pub use error::{Error, Result};
pub use gzip_blocks::forget_pruned_blocks;
pub use import::{import, prune_derived_records, ImportOptions, Imported};
pub use inspect::{
    diff, inspect, inspect_verified, ImageDiff, ImageInfo, LayerKind, LayerSummary, Package,
};
pub use labels::{CommitId, KernelVersion, OcpVersion, OsName, Version};
pub use layer_cache::forget_pruned;
pub use layer_stream::DEFAULT_MAX_EXPANSION;
pub use layout::{
    check_present, list_tags, prune, prune_abandoned, remove_tag, stored_size, verify, PendingTag,
    Pruned, TaggedImage, TAG_ANNOTATION,
};
pub use plain::{write_image, ImageOptions, PlainImage};
pub use transport::{
    pull, pull_pinned, push, push_unless_present, remote_digest, same_image, ImageRef, Pushed,
    TransportOptions,
};
