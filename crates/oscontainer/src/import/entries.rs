//! What the two readers of layer tars (the object importer and the derived
//! tree) share: how errors name a layer, entry paths normalized or refused,
//! an entry streamed into an ostree content object, and the file-type bits
//! and empty xattrs of the objects they write.
//!
//! Nothing here trusts a tar: a path that would leave the tree is refused
//! and a short entry is an error, both naming the layer. It decides nothing
//! about where content goes; that is each reader's business.

use std::io::Read;

use oci_spec::image::Descriptor;
use ostree::gio;
use ostree::glib;
use ostree::prelude::*;

use crate::error::{Context, Error, Result};
use crate::tarball::normalize_entry_path;

/// How errors name a layer: by digest, or, for a layer still being
/// written, in words.
pub(crate) trait LayerName {
    fn layer_name(&self) -> String;
}

impl LayerName for Descriptor {
    fn layer_name(&self) -> String {
        self.digest().to_string()
    }
}

impl LayerName for String {
    fn layer_name(&self) -> String {
        self.clone()
    }
}

/// The normalized path of a tar entry of layer `desc`; one that would
/// leave the tree is refused, naming the layer.
pub(super) fn entry_path<R: Read>(entry: &tar::Entry<R>, desc: &dyn LayerName) -> Result<String> {
    let raw = entry.path_bytes();
    normalize_entry_path(&raw).map_err(|reason| Error::UnsafeEntry {
        digest: desc.layer_name(),
        path: String::from_utf8_lossy(&raw).into_owned(),
        reason: reason.to_string(),
    })
}

pub(super) fn bad_layer(desc: &dyn LayerName, reason: impl std::fmt::Display) -> Error {
    Error::BadLayer {
        digest: desc.layer_name(),
        reason: reason.to_string(),
    }
}

/// Copies `size` bytes of a tar entry into an ostree content writer.
pub(super) fn stream_content(
    entry: &mut impl Read,
    w: &ostree::ContentWriter,
    size: u64,
    desc: &dyn LayerName,
    what: &str,
) -> Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut left = size;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = entry
            .read(&mut buf[..want])
            .map_err(|e| bad_layer(desc, format!("reading {what}: {e}")))?;
        if n == 0 {
            return Err(bad_layer(desc, format!("{what}: truncated")));
        }
        w.write_all(&buf[..n], gio::Cancellable::NONE)
            .context_with(|| format!("writing {what}"))?;
        left -= n as u64;
    }
    Ok(())
}

pub(crate) fn libc_s_ifreg() -> u32 {
    0o100000
}
pub(crate) fn libc_s_ifdir() -> u32 {
    0o040000
}
pub(crate) fn libc_s_iflnk() -> u32 {
    0o120000
}

pub(super) fn empty_xattrs() -> glib::Variant {
    Vec::<(Vec<u8>, Vec<u8>)>::new().to_variant()
}
