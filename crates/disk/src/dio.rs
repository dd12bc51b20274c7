//! Disk files written and read around the page cache.
//!
//! On a virtual machine, fresh page cache is what costs most: buffered
//! writes of 2.7 GB into a file on ext4 took 6-7 s of CPU where direct
//! ones took 0.2 s, and reading a file back through the cache costs the
//! same again. The disk stage writes its root filesystem's data with
//! direct I/O (the `ext4` module), copies root partitions between disks
//! ([`copy_range`]) and hashes disks ([`crate::hash`]) the same way:
//! what is in the cache is read from there, the rest directly.
//!
//! Where a filesystem has no direct I/O (tmpfs before Linux 6.6) the same
//! calls fall back to buffered I/O. Direct transfers need block-aligned
//! offsets, lengths and memory; [`Reader::read_at`] takes any, and
//! [`Aligned`] gives the memory.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{Context, Result};

use crate::hash::FileHasher;

pub(crate) use strata_process::direct::{Aligned, ALIGN};

/// Opens `path` for writing with direct I/O where its filesystem has it.
pub(crate) fn open_for_writing(path: &Path) -> Result<std::fs::File> {
    let opened = match strata_process::direct::open_direct(path) {
        Ok(Some(f)) => Ok(f),
        Ok(None) => std::fs::OpenOptions::new().write(true).open(path),
        Err(e) => Err(e),
    };
    opened.with_context(|| format!("opening {}", path.display()))
}

/// The largest piece [`Reader::stream`] hands over at once.
pub(crate) const STREAM_CHUNK: usize = 8 << 20;

/// A file read from the page cache where it is there, and the rest with
/// direct I/O when the file allows it.
pub(crate) struct Reader {
    file: std::fs::File,
    direct: Option<std::fs::File>,
}

impl Reader {
    pub(crate) fn open(path: &Path) -> Result<Reader> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let direct = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
            .open(path)
            .ok();
        Ok(Reader { file, direct })
    }

    /// Bytes `from..to`, in order, to `consume` (with their offset), in
    /// pieces of at most [`STREAM_CHUNK`]: a thread reads ahead while
    /// this one consumes. The pieces' memory is block-aligned.
    pub(crate) fn stream(
        &self,
        from: u64,
        to: u64,
        mut consume: impl FnMut(&[u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        use std::sync::mpsc;
        // One piece: no thread to start, no memory to set aside for it.
        if to - from <= STREAM_CHUNK as u64 {
            let n = (to - from) as usize;
            let (mut buf, mut scratch) = (Aligned::new(n), Aligned::new(n + 2 * ALIGN));
            self.read_at(buf.get(), from, scratch.get())?;
            return consume(buf.get(), from);
        }
        std::thread::scope(|s| {
            let (full_tx, full) = mpsc::sync_channel::<(Aligned, usize, u64)>(2);
            let (empty_tx, empty) = mpsc::channel::<Aligned>();
            for _ in 0..3 {
                let _ = empty_tx.send(Aligned::new(STREAM_CHUNK));
            }
            let reader = s.spawn(move || -> std::io::Result<()> {
                let mut scratch = Aligned::new(STREAM_CHUNK + 2 * ALIGN);
                let mut pos = from;
                while pos < to {
                    // The consumer stopped: nothing more to read for.
                    let Ok(mut buf) = empty.recv() else {
                        return Ok(());
                    };
                    let n = ((to - pos) as usize).min(STREAM_CHUNK);
                    self.read_at(&mut buf.get()[..n], pos, scratch.get())?;
                    if full_tx.send((buf, n, pos)).is_err() {
                        return Ok(());
                    }
                    pos += n as u64;
                }
                Ok(())
            });
            let consumed = full.iter().try_for_each(|(mut buf, n, pos)| {
                consume(&buf.get()[..n], pos)?;
                let _ = empty_tx.send(buf);
                Ok(())
            });
            // Dropping the channels stops the reader if consuming failed.
            drop(full);
            drop(empty_tx);
            let read = reader.join().expect("the reading thread panicked");
            consumed.and(read)
        })
    }

    /// The file, for what is not a read (seeks, metadata).
    pub(crate) fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// Fills `buf` from offset `pos`: what the page cache has from there,
    /// the rest read directly when the file allows it. `aligned` is
    /// scratch memory of `buf.len() + 2 * ALIGN` bytes at least.
    pub(crate) fn read_at(
        &self,
        buf: &mut [u8],
        pos: u64,
        aligned: &mut [u8],
    ) -> std::io::Result<()> {
        let Some(direct) = &self.direct else {
            return self.file.read_exact_at(buf, pos);
        };
        let mut done = 0;
        while done < buf.len() {
            let mut slices = [std::io::IoSliceMut::new(&mut buf[done..])];
            match rustix::io::preadv2(
                &self.file,
                &mut slices,
                pos + done as u64,
                rustix::io::ReadWriteFlags::NOWAIT,
            ) {
                Ok(0) | Err(rustix::io::Errno::AGAIN) => break,
                Ok(n) => done += n,
                Err(e) => return Err(e.into()),
            }
        }
        if done == buf.len() {
            return Ok(());
        }
        // Direct reads start and end on block boundaries.
        let from = pos + done as u64;
        let start = from / ALIGN as u64 * ALIGN as u64;
        let end = (pos + buf.len() as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
        let skip = aligned.as_ptr().align_offset(ALIGN);
        let scratch = &mut aligned[skip..skip + (end - start) as usize];
        let mut got = 0;
        while start + (got as u64) < pos + buf.len() as u64 {
            match direct.read_at(&mut scratch[got..], start + got as u64)? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n => got += n,
            }
        }
        let lead = (from - start) as usize;
        let rest = buf.len() - done;
        buf[done..].copy_from_slice(&scratch[lead..lead + rest]);
        Ok(())
    }
}

/// Copies bytes `offset..offset + len` of `from` into `to` at the same
/// offset, data only: holes of `from` stay holes of `to` (a freshly
/// sized file), so a filesystem written sparsely costs only its data.
/// `hashers`, each a hasher of `to` or of `from` that has reached
/// `offset`, hash the range as it is copied (the same bytes at the same
/// offset in both files), and its holes as the zeros they are: the
/// source's root is read once for its own hash and the copy's. Each
/// piece is hashed on a thread per hasher while it is written.
pub(crate) fn copy_range(
    from: &Path,
    to: &Path,
    offset: u64,
    len: u64,
    hashers: &mut [&mut FileHasher],
) -> Result<()> {
    use rustix::fs::SeekFrom;
    let what = || {
        format!(
            "copying {len} bytes at {offset} from {} into {}",
            from.display(),
            to.display()
        )
    };
    let src = Reader::open(from).with_context(what)?;
    let dst = open_for_writing(to).with_context(what)?;
    // For pieces direct I/O cannot write (not on block boundaries).
    let dst_buffered = std::fs::OpenOptions::new()
        .write(true)
        .open(to)
        .with_context(what)?;
    let end = offset + len;
    let mut at = offset;
    while at < end {
        let data = match rustix::fs::seek(src.file(), SeekFrom::Data(at)) {
            Ok(d) => d,
            // No data after `at`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(std::io::Error::from(e)).with_context(what),
        };
        if data >= end {
            break;
        }
        let hole = rustix::fs::seek(src.file(), SeekFrom::Hole(data))
            .map_err(std::io::Error::from)
            .with_context(what)?
            .min(end);
        for h in hashers.iter_mut() {
            // Up to `data`, both files are holes: they read as zeros.
            h.advance_to(data)?;
        }
        src.stream(data, hole, |piece, pos| {
            let aligned = pos % ALIGN as u64 == 0 && piece.len() % ALIGN == 0;
            let out = if aligned { &dst } else { &dst_buffered };
            std::thread::scope(|s| {
                let hashing: Vec<_> = hashers
                    .iter_mut()
                    .map(|h| s.spawn(move || h.feed(pos, piece)))
                    .collect();
                let written = out.write_all_at(piece, pos);
                for h in hashing {
                    h.join()
                        .expect("a hashing thread panicked")
                        .map_err(std::io::Error::other)?;
                }
                written
            })
        })
        .with_context(what)?;
        at = hole;
    }
    for h in hashers.iter_mut() {
        h.advance_to(end)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range copied from a sparse disk: the same bytes, holes kept,
    /// nothing outside the range touched; hashed as copied, the hash of
    /// the file.
    #[test]
    fn a_range_is_copied_with_its_holes() {
        use std::io::{Seek, SeekFrom, Write};
        use std::os::unix::fs::MetadataExt;
        let t = tempfile::tempdir().unwrap();
        let (from, to) = (t.path().join("from"), t.path().join("to"));
        const MIB: u64 = 1 << 20;
        let mut f = std::fs::File::create(&from).unwrap();
        f.set_len(64 * MIB).unwrap();
        for (at, byte) in [(MIB, 1u8), (8 * MIB, 2), (40 * MIB + 5, 3), (63 * MIB, 4)] {
            f.seek(SeekFrom::Start(at)).unwrap();
            f.write_all(&vec![byte; 300_000]).unwrap();
        }
        // From the page cache, then (the cache dropped) read directly.
        for cached in [true, false] {
            if !cached {
                f.sync_all().unwrap();
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            }
            std::fs::File::create(&to)
                .unwrap()
                .set_len(64 * MIB)
                .unwrap();
            // Both files hashed as the range is copied, the second time
            // (`from` has data before and after the range).
            let mut hashers: Vec<FileHasher> = match cached {
                true => vec![],
                false => [&to, &from]
                    .into_iter()
                    .map(|path| {
                        let mut h = FileHasher::open(path).unwrap();
                        h.advance_to(4 * MIB).unwrap();
                        h
                    })
                    .collect(),
            };
            let mut feeding: Vec<&mut FileHasher> = hashers.iter_mut().collect();
            copy_range(&from, &to, 4 * MIB, 50 * MIB, &mut feeding).unwrap();
            let (a, b) = (std::fs::read(&from).unwrap(), std::fs::read(&to).unwrap());
            for (h, path) in hashers.into_iter().zip([&to, &from]) {
                assert_eq!(h.finish().unwrap(), crate::hash::hash_file(path).unwrap());
            }
            let range = (4 * MIB) as usize..(54 * MIB) as usize;
            assert!(a[range.clone()] == b[range.clone()], "cached: {cached}");
            assert!(b[..range.start].iter().all(|&x| x == 0));
            assert!(b[range.end..].iter().all(|&x| x == 0));
            // Two runs of 300,000 bytes: under 1 MiB allocated, not 50.
            assert!(std::fs::metadata(&to).unwrap().blocks() * 512 < MIB);
        }
    }
}
