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

use std::io::{self, Write};

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
/// bytes depend only on the input, the level and [`BLOCK`], never on the number of
/// threads or on how the caller splits its writes; the cost is a slightly
/// worse ratio than one long stream (each block starts with an empty
/// window). A block of compressed data is stored, not deflated (see
/// `looks_compressed`).
pub struct GzipWriter<W: Write> {
    inner: W,
    level: i32,
    crc: crc32fast::Hasher,
    len: u64,
    /// Full blocks waiting to be deflated.
    full: Vec<Vec<u8>>,
    /// The block being filled.
    current: Vec<u8>,
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
            full: Vec::new(),
            current: Vec::with_capacity(BLOCK),
        })
    }

    /// Deflates `blocks` in parallel, the last with `last_flush`, and
    /// writes them in order.
    fn deflate(&mut self, blocks: &[Vec<u8>], last_flush: DeflateFlush) -> io::Result<()> {
        use rayon::prelude::*;
        let level = self.level;
        let n = blocks.len();
        let out: Vec<io::Result<Vec<u8>>> = blocks
            .par_iter()
            .enumerate()
            .map(|(i, block)| {
                let flush = if i + 1 == n {
                    last_flush
                } else {
                    DeflateFlush::SyncFlush
                };
                deflate_block(level, block, flush)
            })
            .collect();
        for o in out {
            self.inner.write_all(&o?)?;
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
    // Incompressible input grows by a few bytes per 16 KiB stored block.
    let mut out = vec![0u8; block.len() + block.len() / 64 + 256];
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
        self.len += n as u64;
        while !buf.is_empty() {
            let take = (BLOCK - self.current.len()).min(buf.len());
            self.current.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if self.current.len() == BLOCK {
                let block = std::mem::replace(&mut self.current, Vec::with_capacity(BLOCK));
                self.full.push(block);
                if self.full.len() == BATCH {
                    let blocks = std::mem::take(&mut self.full);
                    self.deflate(&blocks, DeflateFlush::SyncFlush)?;
                }
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

    #[test]
    fn empty_input() {
        let gz = GzipWriter::new(Vec::new(), 4).unwrap().finish().unwrap();
        assert!(gunzip(&gz).is_empty());
    }
}
