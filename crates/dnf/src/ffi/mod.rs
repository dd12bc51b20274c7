//! The FFI seam: the only module of `strata-dnf` that calls into libdnf.
//!
//! Why it exists: libdnf's C API hands out GObjects, glib pointer arrays,
//! borrowed strings and `GError`s. This module turns each of those into an
//! owned Rust value or an RAII handle (`g_object_unref` / `g_ptr_array_unref`
//! on drop) and every failed call into [`crate::Error::Libdnf`] carrying the
//! `GError`'s message, so that the rest of the crate is safe code.
//!
//! What it must not do: make decisions. Policy (which repos, what to verify,
//! how to order steps) lives in `dnf.rs`; this module only states the
//! ownership rules of each libdnf call it wraps. Every handle here holds raw
//! pointers and is therefore neither `Send` nor `Sync`, which is what libdnf's
//! process-global state requires.
//!
//! Its rooms, each depending only on those listed before it:
//! - `glib` — `GError`s, GObject references, C strings, glib logging.
//! - `rpm` — librpm's log captured during a transaction; the keyring that
//!   checks signatures.
//! - `goal` — the goal and the package lists it resolves to; repositories.
//! - `transaction` — the `DnfTransaction`: download, rpm transaction.
//! - `context` — the `DnfContext`, its global settings and its sack; it
//!   hands out the goal and transactions.

#![allow(unsafe_code)]

mod context;
mod glib;
mod goal;
mod rpm;
mod transaction;

pub(crate) use context::{apply_globals, Context, ContextSettings, Globals};
pub(crate) use glib::install_log_handlers;
pub(crate) use goal::{Goal, GoalList, PackageList, Repo, RepoPaths};
pub(crate) use rpm::{Keyring, ScriptletWatch};
pub(crate) use transaction::Transaction;
