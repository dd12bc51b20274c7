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
/// window).
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
/// byte-aligned, stream continues; `Finish`: stream ends).
fn deflate_block(level: i32, block: &[u8], flush: DeflateFlush) -> io::Result<Vec<u8>> {
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
    fn empty_input() {
        let gz = GzipWriter::new(Vec::new(), 4).unwrap().finish().unwrap();
        assert!(gunzip(&gz).is_empty());
    }
}
