//! Chunk layers already written, found again by what they hold.
//!
//! A chunk layer's bytes depend only on its content objects (an ostree
//! content checksum covers an object's content, owner, mode and xattrs),
//! the paths each object has in the tree, the compression, and the code
//! that writes it ([`FORMAT`]). A compose after a z-stream holds mostly the
//! same chunks as the build before it: compressing them again is most of
//! the encapsulation's time and gives the same blobs. The cache maps a
//! layer's key to what its blob was (digest, size, diff ID, media type); a hit holds
//! only while the blob is in the layout with that size (pruning removes
//! blobs no image references: an entry whose blob is gone is a miss, and
//! is removed).
//!
//! An entry is written after its blob is complete (a temporary file, then
//! a rename), so an interrupted build leaves no entry naming a partial
//! blob, and two builds writing the same entry write the same bytes.
//!
//! What it must not do: key a layer by anything the layer's bytes do not
//! depend on, or miss anything they do. Bump [`FORMAT`] with any change to
//! the bytes a chunk layer is written as (tar entries, their order,
//! headers, compression settings).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::commit::CommitTree;
use crate::compress::Compression;
use crate::error::{Error, Result};

/// The version of the chunk layer writer: part of every key.
pub(crate) const FORMAT: &str = "strata-chunk-layer-1";

/// A layer blob in the layout: what the image's manifest and config need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WrittenLayer {
    /// `sha256:…` of the blob.
    pub digest: String,
    pub size: u64,
    /// `sha256:…` of the uncompressed tar.
    pub diff_id: String,
    pub media_type: String,
}

/// The cache: one JSON file per key in `dir`, blobs in the layout `oci`.
#[derive(Debug)]
pub(crate) struct LayerCache {
    dir: PathBuf,
    blobs: PathBuf,
}

impl LayerCache {
    pub(crate) fn new(dir: &Path, oci: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            blobs: oci.join("blobs/sha256"),
        }
    }

    /// The key of a chunk layer holding `objects` of `tree`.
    pub(crate) fn key(
        tree: &CommitTree,
        objects: &BTreeSet<&str>,
        compression: Compression,
    ) -> String {
        let mut h = Sha256::new();
        h.update(FORMAT.as_bytes());
        h.update(b"\0");
        h.update(compression.media_type().to_string().as_bytes());
        if compression == Compression::Gzip {
            h.update(b"\0");
            h.update(strata_process::gzip::DEFLATE.as_bytes());
        }
        for csum in objects {
            h.update(b"\n");
            h.update(csum.as_bytes());
            if let Some(obj) = tree.objects.get(*csum) {
                for p in &obj.paths {
                    h.update(b"\0");
                    h.update(p.as_bytes());
                }
            }
        }
        hex::encode(h.finalize())
    }

    /// The layer written for `key`, if its blob is still in the layout.
    pub(crate) fn get(&self, key: &str) -> Option<WrittenLayer> {
        let entry = self.dir.join(format!("{key}.json"));
        let layer: WrittenLayer = serde_json::from_slice(&std::fs::read(&entry).ok()?).ok()?;
        let blob = self.blobs.join(layer.digest.strip_prefix("sha256:")?);
        match std::fs::metadata(&blob) {
            Ok(m) if m.is_file() && m.len() == layer.size => Some(layer),
            _ => {
                // Pruned (or not ours): the entry is of no more use.
                let _ = std::fs::remove_file(&entry);
                None
            }
        }
    }

    /// Records that `key`'s layer is `layer` (whose blob is complete).
    pub(crate) fn put(&self, key: &str, layer: &WrittenLayer) -> Result<()> {
        put_entry(
            &self.dir,
            key,
            layer,
            &format!("recording layer {}", layer.digest),
        )
    }
}

/// Writes `value` as the entry `<key>.json` of the cache `dir`: a
/// temporary file, then a rename, so that no reader sees half of one.
/// `what` names the write in errors.
pub(crate) fn put_entry<T: serde::Serialize>(
    dir: &Path,
    key: &str,
    value: &T,
    what: &str,
) -> Result<()> {
    let io = |source| Error::Io {
        context: format!("{what} in {}", dir.display()),
        source,
    };
    let text = serde_json::to_vec(value).map_err(|source| Error::Json {
        context: what.to_string(),
        source,
    })?;
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, &text).map_err(io)?;
    tmp.persist(dir.join(format!("{key}.json")))
        .map_err(|e| io(e.error))?;
    Ok(())
}

/// Removes the entries of the cache in `dir` whose blob is no longer in
/// the layout `oci` (after a prune); returns how many.
pub fn forget_pruned(dir: &Path, oci: &Path) -> Result<usize> {
    let cache = LayerCache::new(dir, oci);
    forget_entries(dir, |path, key| cache.get(key).is_none() && !path.exists())
}

/// Goes through the `<key>.json` entries of the cache `dir`; `forgotten`
/// removes an entry whose blob is gone and says whether it did. How many
/// were removed.
pub(crate) fn forget_entries(
    dir: &Path,
    mut forgotten: impl FnMut(&Path, &str) -> bool,
) -> Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(Error::Io {
                context: format!("reading {}", dir.display()),
                source,
            })
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if forgotten(&entry.path(), key) {
            removed += 1;
        }
    }
    Ok(removed)
}
