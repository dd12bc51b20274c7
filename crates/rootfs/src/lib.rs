//! What compose and derive both do to a root filesystem.
//!
//! compose builds a tree from nothing and derive adds a release's packages
//! on top of a base tree; both enforce the same input policy, split the
//! same accounts, run scripts in the same sandbox and follow the same ostree
//! conventions. That shared ground lives here so that the two stages never
//! depend on each other (ARCHITECTURE.md: they hand off only through an
//! image or a commit).
//!
//! Modules:
//! - [`bootupd`]: the EFI payload moved out of /boot with bootupd's
//!   metadata; nothing else under /boot lost silently.
//! - [`policy`]: the RHEL-only input policy (repos and signing keys).
//! - [`passwd`]: accounts split between /etc and /usr/lib, stable ids.
//! - [`sandbox`]: running programs and scripts inside the tree (bubblewrap).
//! - [`tree`]: the ostree conventions applied to an installed root.
//! - [`initramfs`]: making the initramfs, recording how, and which layer
//!   changes call for a new one.
//! - [`initramfs_cache`]: images made before, reused when what the
//!   generator read is unchanged.
//! - `invocation`: how one generator run is called (the command line both
//!   of the above work from); `opened`: what a run in the tree opened.
//! - [`inputs`]: what the input hashes of both stages cover.
//! - [`files`]: a manifest's add-files, remove-files, units, os-release edits,
//!   and the repo/policy plumbing between manifests and dnf.

pub mod bootupd;
pub mod files;
pub mod initramfs;
pub mod initramfs_cache;
pub mod inputs;
mod invocation;
mod opened;
pub mod passwd;
pub mod policy;
pub mod sandbox;
pub mod tree;

pub use passwd::Accounts;
pub use policy::{OnlyInDisallowedRepo, Policy, PolicyError, Rule, Violation};
