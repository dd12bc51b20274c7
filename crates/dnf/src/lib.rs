//! strata's safe wrapper over libdnf: private repositories, depsolve,
//! download and install into a root.
//!
//! Only this crate touches libdnf (through `strata-libdnf-sys`). It reads no
//! host dnf configuration: repositories are given as [`RepoConfig`] values
//! and written into a private reposdir; metadata, solv caches, downloaded
//! packages and libdnf's lock files live under [`DnfOptions::cache_dir`].
//!
//! ```no_run
//! use strata_dnf::{Dnf, DnfOptions, DepsolveRequest, RepoConfig};
//! # fn main() -> strata_dnf::Result<()> {
//! let repos = vec![RepoConfig::new("baseos", "file:///srv/rhel/baseos")
//!     .with_gpgkey("/srv/rhel/RPM-GPG-KEY-redhat-release")];
//! let mut dnf = Dnf::new(DnfOptions::new("/tmp/rootfs", "/tmp/cache", "8"), repos)?;
//! let resolved = dnf.depsolve(&DepsolveRequest::install(["bash", "kernel"]))?;
//! for p in resolved.packages() {
//!     println!("{} {}", p.nevra, p.checksum.as_ref().map(|c| c.to_string()).unwrap_or_default());
//! }
//! let report = resolved.install()?; // download, verify, rpm transaction
//! # let _ = report; Ok(()) }
//! ```
//!
//! # One context per process
//!
//! libdnf and librpm keep process-global state (rpm macros, libdnf's main
//! configuration, the rpmdb lock). A [`Dnf`] therefore holds a process-wide
//! mutex for its whole life: a second `Dnf::new` in the same process blocks
//! until the first is dropped, so two contexts never interleave. To install
//! into several roots *in parallel*, use separate processes: describe each
//! install as a [`job::InstallJob`] and run it with [`job::run_in_child`],
//! which starts the caller's own binary (a hidden subcommand calling
//! [`job::serve_child`]). Each context has its own private lock directory, so
//! concurrent processes may share one cache dir.
//!
//! # Signatures
//!
//! With [`DnfOptions::gpgcheck`] on (the default), every package is checked
//! before the rpm transaction against exactly the keys its repository names
//! (or, for local files, [`DepsolveRequest::local_gpgkeys`]); the host's
//! `/etc/pki/rpm-gpg` plays no part. libdnf's own check is switched off in
//! the private `.repo` file because for `file://` repositories it looks for
//! keys inside the repository directory.
//!
//! # Modules
//!
//! - `options` — [`DnfOptions`], [`RepoConfig`], [`DepsolveRequest`]: validated,
//!   serialisable inputs; renders the private `.repo` file.
//! - `dnf` — [`Dnf`] (context + process lock) and [`Resolved`]
//!   (depsolve → download/verify → install).
//! - `package` — [`Package`] and [`Checksum`], the owned results.
//! - `transaction_output` — what a transaction prints, held for an error's
//!   tail; failed scriptlets and full filesystems named.
//! - `substitutes` — package files librpm reads in place of the downloaded
//!   ones (payloads with the skipped files' content zeroed).
//! - [`job`] — running an install in a child process.
//! - `error` — [`Error`], one variant per kind of failure.
//! - `ffi` — the only module with `unsafe`: RAII handles over libdnf and
//!   librpm, one file per object family (`glib`, `rpm`, `goal`,
//!   `transaction`, `context`).
//!
//! Imports run one way: `ffi` uses only `error` and `package`;
//! `transaction_output`, `options` and `substitutes` sit below `dnf`, and
//! `job` above it.

mod dnf;
mod error;
mod ffi;
pub mod job;
mod options;
mod package;
mod substitutes;
mod transaction_output;

pub use crate::dnf::{Dnf, InstallReport, LocalRpmOptions, Resolved, Timings, CMDLINE_REPO};
pub use crate::error::{Error, Result};
pub use crate::options::{DepsolveRequest, DnfOptions, MetadataRefresh, RepoConfig};
pub use crate::package::{Checksum, Package};
