//! gzip whose bytes depend only on the input and the level: layers, disk
//! images published as `.gz` (strata-oscontainer) and the initramfs
//! (strata-rootfs) are all written this way.
//!
//! gzip goes through `zlib-rs` directly, not through `flate2`: flate2
//! picks its deflate backend (C zlib, zlib-rs, miniz) from the Cargo features
//! of whatever else is in the build, so the same strata source would write
//! different bytes depending on which crates were compiled alongside it.
//! zlib-rs's bytes do not depend on the CPU either: its AVX2 paths
//! (string comparison, hash sliding) compute what its scalar ones do, and
//! its hash depends on the level alone (a build without CPU detection gave
//! the same bytes at levels 4-9). Its version is part of the bytes: a
//! zlib-rs upgrade is a deliberate change, like a change of level.
//! The gzip header is fixed: mtime 0, no file name, OS "unknown". Nothing
//! here may read the clock or the environment.
//!
//! A writer given a [`BlockIndex`] also starts blocks where its caller
//! says (a tar writer: at large files, so that a file that grows or
//! shrinks moves none of the blocks after the next one) and lists each
//! block by the SHA-256 of its input; given the blocks of earlier streams
//! ([`Deflated`]), it copies a block whose input it has seen instead of
//! deflating it again. A block's deflated bytes depend only on its input,
//! the level and how it ends, so copying changes no byte of the output.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest as _, Sha256};
use zlib_rs::{Deflate, DeflateFlush, Status};

/// A gzip member with a fixed header around a raw deflate stream, deflated
/// in parallel.
///
/// The input is cut into blocks of [`BLOCK`] bytes at fixed offsets; each
/// block is deflated by a fresh compressor (so it refers to no earlier data)
/// and ends with a sync flush, which byte-aligns it without ending the
/// stream; the last one ends the stream. Concatenated, the blocks are one
/// valid deflate stream (what pigz writes with `--independent`). Blocks are
/// deflated [`BATCH`] at a time on the rayon pool, written in order. The
/// bytes depend only on the input, the level and [`BLOCK`] (and the cuts of
/// a [`BlockIndex`]), never on the number of threads, on how the caller
/// splits its writes or on the [`Deflated`] blocks it copies; the cost is
/// a slightly worse ratio than one long stream (each block starts with an
/// empty window). A block of compressed data is stored, not deflated (see
/// `looks_compressed`).
pub struct GzipWriter<W: Write> {
    inner: W,
    level: i32,
    crc: crc32fast::Hasher,
    /// Input bytes so far.
    len: u64,
    /// Output bytes so far, the header included.
    written: u64,
    /// Blocks ended, waiting to be deflated.
    full: Vec<Vec<u8>>,
    /// The block being filled.
    current: Vec<u8>,
    index: Option<BlockIndex>,
    earlier: Vec<Deflated>,
}

/// Where a gzip stream's blocks must start, and the blocks it wrote:
/// shared by a [`GzipWriter`] and whoever writes into it (a clone is the
/// same index).
#[derive(Debug, Clone, Default)]
pub struct BlockIndex(Arc<Mutex<IndexState>>);

#[derive(Debug, Default)]
struct IndexState {
    /// Input offsets at which a block must start, ascending.
    cuts: VecDeque<u64>,
    /// The blocks written so far that end with a sync flush.
    blocks: Vec<Block>,
    /// How many of them were copied from an earlier stream.
    copied: usize,
}

/// One block of a gzip stream: the SHA-256 of its input, and where its
/// deflated bytes are in the stream (from the header's first byte). Only
/// blocks that end with a sync flush are listed: the last one, which ends
/// the stream, could not be copied into another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub input: [u8; 32],
    pub offset: u64,
    pub len: u64,
}

impl BlockIndex {
    /// Makes a block start at input offset `at`: called before the byte at
    /// `at` reaches the writer, with offsets that never go down.
    pub fn cut_at(&self, at: u64) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if state.cuts.back().is_none_or(|&last| last < at) {
            state.cuts.push_back(at);
        }
    }

    /// The blocks written so far, in stream order.
    pub fn blocks(&self) -> Vec<Block> {
        let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.blocks.clone()
    }

    /// Where the block starting at input offset `start` ends: the next cut
    /// after it, or [`BLOCK`] bytes on. Cuts already passed are dropped.
    fn end_of_block(&self, start: u64, len: u64) -> u64 {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        while state.cuts.front().is_some_and(|&c| c <= start || c < len) {
            state.cuts.pop_front();
        }
        let full = start + BLOCK as u64;
        state.cuts.front().map_or(full, |&c| c.min(full))
    }

    /// How many of [`BlockIndex::blocks`] were copied from an earlier
    /// stream.
    pub fn copied(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).copied
    }

    fn record(&self, block: Block, copied: bool) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.blocks.push(block);
        state.copied += usize::from(copied);
    }
}

/// The deflated blocks of a gzip stream written before at a given level
/// (a file, and its [`BlockIndex::blocks`]), found by their input.
#[derive(Debug)]
pub struct Deflated {
    file: File,
    level: i32,
    blocks: HashMap<[u8; 32], (u64, u64)>,
}

impl Deflated {
    /// The blocks `blocks` of the gzip stream in `file`, deflated at
    /// `level` by this module's [`DEFLATE`] with [`BLOCK`]-byte blocks.
    pub fn new(file: File, level: u8, blocks: impl IntoIterator<Item = Block>) -> Self {
        Self {
            file,
            level: i32::from(level.min(9)),
            blocks: blocks
                .into_iter()
                .map(|b| (b.input, (b.offset, b.len)))
                .collect(),
        }
    }

    /// The deflated bytes of the block whose input hashes to `input`, when
    /// they can be read and look like a block ended by a sync flush (an
    /// empty stored block: `00 00 ff ff`).
    fn get(&self, level: i32, input: &[u8; 32]) -> Option<Vec<u8>> {
        let &(offset, len) = self.blocks.get(input).filter(|_| level == self.level)?;
        if len < 4 || len > max_deflated(BLOCK) as u64 {
            return None;
        }
        let mut bytes = vec![0u8; len as usize];
        self.file.read_exact_at(&mut bytes, offset).ok()?;
        bytes.ends_with(&[0, 0, 0xff, 0xff]).then_some(bytes)
    }
}

/// A block as written: its bytes, the SHA-256 of its input when the
/// writer is indexed, and whether the bytes were copied from an earlier
/// stream.
struct BlockOut {
    bytes: Vec<u8>,
    input: Option<[u8; 32]>,
    copied: bool,
}

impl BlockOut {
    fn deflated(bytes: Vec<u8>, input: Option<[u8; 32]>) -> Self {
        Self {
            bytes,
            input,
            copied: false,
        }
    }
}

/// The most bytes deflate may write for `n` bytes of input: incompressible
/// input grows by a few bytes per 16 KiB stored block.
fn max_deflated(n: usize) -> usize {
    n + n / 64 + 256
}

/// gzip header: magic, deflate, no flags, mtime 0, no extra flags, OS unknown.
pub const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// The deflate implementation and its version, which the bytes depend on:
/// caches of gzip output name it in their keys. Cargo.toml pins the same
/// version.
pub const DEFLATE: &str = "zlib-rs 0.5.5";
/// Bytes of input per independently deflated block. Changing it changes
/// every gzip layer's and initramfs's bytes.
pub const BLOCK: usize = 1 << 20;
/// Blocks deflated at once (memory: about twice this many blocks).
const BATCH: usize = 8;

impl<W: Write> GzipWriter<W> {
    /// A writer deflating at `level` (0-9, zlib's scale: 6 is zlib's
    /// default) into `inner`, which gets the header now.
    pub fn new(mut inner: W, level: u8) -> io::Result<Self> {
        inner.write_all(&GZIP_HEADER)?;
        Ok(Self {
            inner,
            level: i32::from(level.min(9)),
            crc: crc32fast::Hasher::new(),
            len: 0,
            written: GZIP_HEADER.len() as u64,
            full: Vec::new(),
            current: Vec::with_capacity(BLOCK),
            index: None,
            earlier: Vec::new(),
        })
    }

    /// A writer that starts blocks at `index`'s cuts and lists its blocks
    /// there, copying those of `earlier` streams whose input it meets again.
    pub fn indexed(
        inner: W,
        level: u8,
        index: BlockIndex,
        earlier: Vec<Deflated>,
    ) -> io::Result<Self> {
        let mut w = Self::new(inner, level)?;
        w.index = Some(index);
        w.earlier = earlier;
        Ok(w)
    }

    /// Deflates `blocks` in parallel, the last with `last_flush`, and
    /// writes them in order. With an index, each block ended by a sync
    /// flush is hashed, copied from an earlier stream when one has it, and
    /// listed.
    fn deflate(&mut self, blocks: &[Vec<u8>], last_flush: DeflateFlush) -> io::Result<()> {
        use rayon::prelude::*;
        let level = self.level;
        let (indexed, earlier) = (self.index.is_some(), &self.earlier);
        let n = blocks.len();
        let out: Vec<io::Result<BlockOut>> = blocks
            .par_iter()
            .enumerate()
            .map(|(i, block)| {
                let flush = if i + 1 == n {
                    last_flush
                } else {
                    DeflateFlush::SyncFlush
                };
                if !indexed || flush != DeflateFlush::SyncFlush {
                    let bytes = deflate_block(level, block, flush)?;
                    return Ok(BlockOut::deflated(bytes, None));
                }
                let input: [u8; 32] = Sha256::digest(block).into();
                Ok(match earlier.iter().find_map(|e| e.get(level, &input)) {
                    Some(bytes) => BlockOut {
                        bytes,
                        input: Some(input),
                        copied: true,
                    },
                    None => BlockOut::deflated(deflate_block(level, block, flush)?, Some(input)),
                })
            })
            .collect();
        for o in out {
            let BlockOut {
                bytes,
                input,
                copied,
            } = o?;
            self.inner.write_all(&bytes)?;
            if let (Some(input), Some(index)) = (input, &self.index) {
                let block = Block {
                    input,
                    offset: self.written,
                    len: bytes.len() as u64,
                };
                index.record(block, copied);
            }
            self.written += bytes.len() as u64;
        }
        Ok(())
    }

    /// Ends the block being filled (it waits with the others).
    fn end_block(&mut self) -> io::Result<()> {
        let block = std::mem::replace(&mut self.current, Vec::with_capacity(BLOCK));
        self.full.push(block);
        if self.full.len() == BATCH {
            let blocks = std::mem::take(&mut self.full);
            self.deflate(&blocks, DeflateFlush::SyncFlush)?;
        }
        Ok(())
    }

    /// Deflates what is left, ends the stream and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        let mut blocks = std::mem::take(&mut self.full);
        blocks.push(std::mem::take(&mut self.current));
        self.deflate(&blocks, DeflateFlush::Finish)?;
        let crc = self.crc.clone().finalize();
        self.inner.write_all(&crc.to_le_bytes())?;
        // ISIZE is the input length modulo 2^32.
        self.inner.write_all(&(self.len as u32).to_le_bytes())?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

/// One block as raw deflate data, ended by `flush` (`SyncFlush`:
/// byte-aligned, stream continues; `Finish`: stream ends). A block that
/// [`looks_compressed`] is stored (level 0).
fn deflate_block(level: i32, block: &[u8], flush: DeflateFlush) -> io::Result<Vec<u8>> {
    let level = if looks_compressed(block) { 0 } else { level };
    let mut d = Deflate::new(level, false, 15);
    let mut out = vec![0u8; max_deflated(block.len())];
    let status = d
        .compress(block, &mut out, flush)
        .map_err(|e| io::Error::other(format!("deflate failed: {e:?}")))?;
    let ended = match flush {
        DeflateFlush::Finish => status == Status::StreamEnd,
        _ => status == Status::Ok,
    };
    if !ended || d.total_in() != block.len() as u64 {
        return Err(io::Error::other(format!(
            "deflate failed: {status:?} after {} of {} bytes",
            d.total_in(),
            block.len()
        )));
    }
    out.truncate(d.total_out() as usize);
    Ok(out)
}

/// Whether `block` looks like compressed data (a kernel image, an
/// initramfs, xz-compressed modules and firmware, a gzip'd man page).
/// Deflate spends as long on such a block as on any other (40-90 MB/s)
/// to save about 1 % of it (1.1 % of an initramfs made at gzip -9);
/// stored, it costs a copy. The test: Pearson's chi-squared statistic,
/// against the uniform distribution, of every fourth byte's value and of
/// its difference from the byte before; both must be as low as random
/// bytes give (about 255; deflate's own output gives a few thousand, code
/// or text millions): under an eighth of the sample's size. The second
/// catches what spreads its values evenly but in a pattern (a ramp of
/// counters), which deflate does shrink. Blocks under 64 KiB are always
/// deflated. It reads the bytes only: the decision, and so the output,
/// depends on nothing else.
fn looks_compressed(block: &[u8]) -> bool {
    const STRIDE: usize = 4;
    if block.len() < 64 * 1024 {
        return false;
    }
    let (mut values, mut steps) = ([0u64; 256], [0u64; 256]);
    for i in (STRIDE..block.len()).step_by(STRIDE) {
        values[usize::from(block[i])] += 1;
        steps[usize::from(block[i].wrapping_sub(block[i - 1]))] += 1;
    }
    let n = values.iter().sum::<u64>();
    // chi2 = sum((256c - n)^2) / (256n); chi2 < n/8 <=> sum < 32n^2.
    let uniform = |counts: &[u64; 256]| {
        let sum: u128 = counts
            .iter()
            .map(|&c| (i128::from(256 * c) - i128::from(n)).unsigned_abs().pow(2))
            .sum();
        sum < 32 * u128::from(n).pow(2)
    };
    uniform(&values) && uniform(&steps)
}

impl<W: Write> Write for GzipWriter<W> {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        self.crc.update(buf);
        while !buf.is_empty() {
            let start = self.len - self.current.len() as u64;
            let end = match &self.index {
                Some(index) => index.end_of_block(start, self.len),
                None => start + BLOCK as u64,
            };
            let take = usize::try_from(end - self.len).map_or(buf.len(), |t| t.min(buf.len()));
            self.current.extend_from_slice(&buf[..take]);
            self.len += take as u64;
            buf = &buf[take..];
            if self.len == end {
                self.end_block()?;
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn sample() -> Vec<u8> {
        // Compressible but not trivial: 3 MiB of a repeating, shifting pattern.
        (0..3 * 1024 * 1024u32)
            .map(|i| ((i / 7) ^ (i % 251)) as u8)
            .collect()
    }

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut back)
            .unwrap();
        back
    }

    #[test]
    fn gzip_round_trips_and_is_stable() {
        let data = sample();
        let encode = |chunk: usize, level: u8| {
            let mut w = GzipWriter::new(Vec::new(), level).unwrap();
            for c in data.chunks(chunk) {
                w.write_all(c).unwrap();
            }
            w.finish().unwrap()
        };
        let a = encode(4096, 4);
        // Different write sizes give the same bytes.
        assert_eq!(a, encode(100_000, 4));
        assert_eq!(&a[..10], &GZIP_HEADER);
        assert!(a.len() < data.len() / 3, "{} of {}", a.len(), data.len());
        assert_eq!(gunzip(&a), data);
        // Another level is other bytes of the same data.
        let b = encode(4096, 6);
        assert_ne!(a, b);
        assert_eq!(gunzip(&b), data);
    }

    #[test]
    fn gzip_bytes_do_not_depend_on_threads_or_batches() {
        // More than one batch of blocks, and a last block exactly full.
        let data: Vec<u8> = sample()
            .into_iter()
            .cycle()
            .take(BLOCK * (BATCH + 2))
            .collect();
        let encode = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut w = GzipWriter::new(Vec::new(), 4).unwrap();
                w.write_all(&data).unwrap();
                w.finish().unwrap()
            })
        };
        let one = encode(1);
        assert_eq!(one, encode(3));
        assert_eq!(gunzip(&one), data);
    }

    #[test]
    fn compressed_blocks_are_stored_and_the_rest_deflated() {
        use rand::{RngCore, SeedableRng};
        let mut random = vec![0u8; 1 << 20];
        rand_chacha::ChaCha12Rng::from_seed([7; 32]).fill_bytes(&mut random);
        assert!(looks_compressed(&random));
        // Evenly spread values in a pattern, code, text: deflated.
        let ramp: Vec<u8> = (0..1 << 20).map(|i: u32| i as u8).collect();
        assert!(!looks_compressed(&ramp));
        assert!(!looks_compressed(&sample()[..1 << 20]));
        let text = b"the kubelet service starts the node\n".repeat(30_000);
        assert!(!looks_compressed(&text));
        // Random bytes stored: the output is barely larger than them.
        let mut data = random.clone();
        data.extend_from_slice(&text);
        let mut w = GzipWriter::new(Vec::new(), 6).unwrap();
        w.write_all(&data).unwrap();
        let gz = w.finish().unwrap();
        assert!(gz.len() < random.len() + random.len() / 100 + text.len() / 10);
        assert_eq!(gunzip(&gz), data);
    }

    /// `data` written with an index that cuts at `cuts`, copying from
    /// `earlier`; the stream and its blocks.
    fn indexed(data: &[u8], cuts: &[u64], earlier: Vec<Deflated>) -> (Vec<u8>, Vec<Block>) {
        let index = BlockIndex::default();
        let mut w = GzipWriter::indexed(Vec::new(), 4, index.clone(), earlier).unwrap();
        let mut at = 0;
        for &cut in cuts {
            index.cut_at(cut);
            w.write_all(&data[at..cut as usize]).unwrap();
            at = cut as usize;
        }
        w.write_all(&data[at..]).unwrap();
        (w.finish().unwrap(), index.blocks())
    }

    /// The blocks of `gz` as an earlier stream in a file.
    fn earlier(gz: &[u8], blocks: &[Block]) -> Deflated {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(gz).unwrap();
        Deflated::new(f, 4, blocks.iter().cloned())
    }

    #[test]
    fn blocks_start_at_cuts_and_are_listed() {
        let data: Vec<u8> = sample().into_iter().cycle().take(3 * BLOCK + 100).collect();
        let (gz, blocks) = indexed(&data, &[1000, 1000 + BLOCK as u64 + 5], Vec::new());
        assert_eq!(gunzip(&gz), data);
        // 1000 | BLOCK | 5 | BLOCK | the last BLOCK - 905, which ends the
        // stream and is not listed.
        assert_eq!(blocks.len(), 4);
        let hash = |r: std::ops::Range<usize>| -> [u8; 32] { Sha256::digest(&data[r]).into() };
        assert_eq!(blocks[0].input, hash(0..1000));
        assert_eq!(blocks[1].input, hash(1000..1000 + BLOCK));
        assert_eq!(blocks[2].input, hash(1000 + BLOCK..1005 + BLOCK));
        assert_eq!(blocks[3].input, hash(1005 + BLOCK..1005 + 2 * BLOCK));
        assert_eq!(blocks[0].offset, GZIP_HEADER.len() as u64);
        for pair in blocks.windows(2) {
            assert_eq!(pair[0].offset + pair[0].len, pair[1].offset);
        }
        // Without cuts, an index changes nothing.
        let mut plain = GzipWriter::new(Vec::new(), 4).unwrap();
        plain.write_all(&data).unwrap();
        assert_eq!(plain.finish().unwrap(), indexed(&data, &[], Vec::new()).0);
    }

    #[test]
    fn blocks_met_again_are_copied_and_change_no_byte() {
        // A large "file" after a small one that grows: cut at the file, the
        // file's blocks are the same input as before.
        let file: Vec<u8> = sample().into_iter().take(2 * BLOCK + 300).collect();
        let before = [vec![1u8; 5000], file.clone(), vec![2u8; 700]].concat();
        let after = [vec![3u8; 9000], file.clone(), vec![2u8; 700]].concat();
        let (gz_before, blocks_before) =
            indexed(&before, &[5000, 5000 + file.len() as u64], Vec::new());
        let cuts_after = [9000, 9000 + file.len() as u64];
        let (fresh, blocks_after) = indexed(&after, &cuts_after, Vec::new());
        let (copied, _) = indexed(
            &after,
            &cuts_after,
            vec![earlier(&gz_before, &blocks_before)],
        );
        assert_eq!(copied, fresh);
        assert_eq!(gunzip(&copied), after);
        let seen: Vec<_> = blocks_after
            .iter()
            .filter(|b| blocks_before.iter().any(|o| o.input == b.input))
            .collect();
        assert_eq!(seen.len(), 3, "the file's three blocks");

        // What is copied is the earlier stream's bytes: an earlier stream
        // that stored the file's blocks (level 0) shows through, still valid.
        let mut stored = Vec::from(GZIP_HEADER);
        let mut stored_blocks = Vec::new();
        let cuts_before = [5000, 5000 + file.len() as u64];
        for (b, (start, end)) in blocks_before.iter().zip(ranges(before.len(), &cuts_before)) {
            assert_eq!(
                b.input,
                <[u8; 32]>::from(Sha256::digest(&before[start..end]))
            );
            let bytes = deflate_block(0, &before[start..end], DeflateFlush::SyncFlush).unwrap();
            stored_blocks.push(Block {
                input: b.input,
                offset: stored.len() as u64,
                len: bytes.len() as u64,
            });
            stored.extend_from_slice(&bytes);
        }
        let (shows, _) = indexed(&after, &cuts_after, vec![earlier(&stored, &stored_blocks)]);
        assert_ne!(shows, fresh);
        assert!(shows.len() > fresh.len() + file.len() / 2);
        assert_eq!(gunzip(&shows), after);
        // Another level's blocks are not taken.
        let other = Deflated::new(tempfile::tempfile().unwrap(), 6, stored_blocks);
        assert_eq!(indexed(&after, &cuts_after, vec![other]).0, fresh);
    }

    /// The input ranges of a stream of `len` bytes cut at `cuts`: from
    /// each cut, blocks of [`BLOCK`] bytes up to the next.
    fn ranges(len: usize, cuts: &[u64]) -> Vec<(usize, usize)> {
        let mut edges: Vec<usize> = cuts.iter().map(|&c| c as usize).collect();
        edges.push(len);
        let (mut out, mut start) = (Vec::new(), 0);
        for edge in edges {
            while start < edge {
                let end = (start + BLOCK).min(edge);
                out.push((start, end));
                start = end;
            }
        }
        out
    }

    #[test]
    fn empty_input() {
        let gz = GzipWriter::new(Vec::new(), 4).unwrap().finish().unwrap();
        assert!(gunzip(&gz).is_empty());
    }
}
