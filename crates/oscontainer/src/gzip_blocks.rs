//! The deflated blocks of layers written before, found again by their
//! input.
//!
//! A derived layer is written again whenever anything in it changes (a CI
//! job's kubelet), yet most of its bytes are what the build before wrote:
//! the other packages, the initramfs. gzip is most of writing it. So a
//! derived layer is gzipped with a [`BlockIndex`]: the tar writer starts a
//! block at each large file's content and again after it (a file that
//! grows or shrinks moves no block past the next large file), and the
//! blocks of each written blob are listed in `<dir>/<blob hex>.json`. The
//! next layer of the same image copies, from the earlier blob, the
//! deflated bytes of every block whose input it meets again
//! ([`Deflated`]).
//!
//! A block's deflated bytes depend only on its input, the level and how it
//! ends, so what is copied is what deflating would give: this cache can
//! only save time, never change a layer. An entry holds only while its
//! blob is in the layout at the recorded size and was written by the same
//! deflate, block size and level ([`FORMAT`], [`DEFLATE`], [`BLOCK`]);
//! anything else is a miss. An entry is written after its blob is
//! complete (a temporary file, then a rename).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use strata_process::gzip::{Block, Deflated, BLOCK, DEFLATE};

use crate::error::Result;

/// The version of the entries: part of every one.
const FORMAT: &str = "strata-gzip-blocks-1";

/// One blob's blocks.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    format: String,
    deflate: String,
    block: usize,
    level: u8,
    /// The blob's size.
    size: u64,
    /// (SHA-256 of the input in hex, offset in the blob, length).
    blocks: Vec<(String, u64, u64)>,
}

/// The entries in `dir`, for blobs of the layout `oci`.
#[derive(Debug)]
pub(crate) struct GzipBlocks {
    dir: PathBuf,
    blobs: PathBuf,
}

impl GzipBlocks {
    pub(crate) fn new(dir: &Path, oci: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            blobs: oci.join("blobs/sha256"),
        }
    }

    /// The blocks of each blob of `digests` (`sha256:…`) that has an entry
    /// for `level` and is still in the layout.
    pub(crate) fn earlier(&self, digests: &[String], level: u8) -> Vec<Deflated> {
        digests
            .iter()
            .filter_map(|d| self.load(d.strip_prefix("sha256:")?, level))
            .collect()
    }

    fn load(&self, hex: &str, level: u8) -> Option<Deflated> {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let entry: Entry =
            serde_json::from_slice(&std::fs::read(self.dir.join(format!("{hex}.json"))).ok()?)
                .ok()?;
        if entry.format != FORMAT
            || entry.deflate != DEFLATE
            || entry.block != BLOCK
            || entry.level != level
        {
            return None;
        }
        let file = std::fs::File::open(self.blobs.join(hex)).ok()?;
        if file.metadata().ok()?.len() != entry.size {
            return None;
        }
        let blocks = entry.blocks.into_iter().filter_map(|(input, offset, len)| {
            let mut sha = [0u8; 32];
            hex::decode_to_slice(input, &mut sha).ok()?;
            (offset.checked_add(len)? <= entry.size).then_some(Block {
                input: sha,
                offset,
                len,
            })
        });
        Some(Deflated::new(file, level, blocks))
    }

    /// Records the blocks of the complete blob `digest` of `size` bytes,
    /// gzipped at `level`.
    pub(crate) fn put(&self, digest: &str, size: u64, level: u8, blocks: &[Block]) -> Result<()> {
        let entry = Entry {
            format: FORMAT.into(),
            deflate: DEFLATE.into(),
            block: BLOCK,
            level,
            size,
            blocks: blocks
                .iter()
                .map(|b| (hex::encode(b.input), b.offset, b.len))
                .collect(),
        };
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        crate::layer_cache::put_entry(
            &self.dir,
            hex,
            &entry,
            &format!("recording the gzip blocks of {digest}"),
        )
    }
}

/// Removes the entries in `dir` whose blob is no longer in the layout
/// `oci` (after a prune); returns how many.
pub fn forget_pruned_blocks(dir: &Path, oci: &Path) -> Result<usize> {
    let blocks = GzipBlocks::new(dir, oci);
    crate::layer_cache::forget_entries(dir, |path, hex| {
        !blocks.blobs.join(hex).is_file() && std::fs::remove_file(path).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use strata_process::gzip::{BlockIndex, GzipWriter};

    #[test]
    fn entries_hold_while_their_blob_does() {
        let dir = tempfile::tempdir().unwrap();
        let (cache, oci) = (dir.path().join("cache"), dir.path().join("oci"));
        std::fs::create_dir_all(oci.join("blobs/sha256")).unwrap();
        let index = BlockIndex::default();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = GzipWriter::indexed(Vec::new(), 5, index.clone(), Vec::new()).unwrap();
        w.write_all(&data).unwrap();
        let gz = w.finish().unwrap();
        let hex = "ab".repeat(32);
        let digest = format!("sha256:{hex}");
        std::fs::write(oci.join("blobs/sha256").join(&hex), &gz).unwrap();
        let blocks = GzipBlocks::new(&cache, &oci);
        blocks
            .put(&digest, gz.len() as u64, 5, &index.blocks())
            .unwrap();
        assert_eq!(blocks.earlier(std::slice::from_ref(&digest), 5).len(), 1);
        // Another level, a digest that is not one, another size: misses.
        assert!(blocks.earlier(std::slice::from_ref(&digest), 6).is_empty());
        assert!(blocks.earlier(&["sha256:../x".into()], 5).is_empty());
        std::fs::write(oci.join("blobs/sha256").join(&hex), b"short").unwrap();
        assert!(blocks.earlier(std::slice::from_ref(&digest), 5).is_empty());
        // Pruned: the entry goes.
        std::fs::remove_file(oci.join("blobs/sha256").join(&hex)).unwrap();
        assert_eq!(forget_pruned_blocks(&cache, &oci).unwrap(), 1);
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
    }
}
