//! Composes a base OS image from a base manifest.
mod commit;
mod passwd;
mod tree;
