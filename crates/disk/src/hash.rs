//! The size and sha256 of a disk, hashed front to back in steps so that
//! the part of a disk already final is hashed while the rest is written,
//! with holes hashed as the zeros they read as, without reading them.
//!
//! What is in the page cache is read from there, the rest with direct
//! I/O ([`crate::dio`]): a disk whose data went straight to the device is
//! hashed without filling the cache with it.
//!
//! It only reads: the files it hashes are written elsewhere.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::dio::Reader;

/// sha256 of a file read front to back, in steps ([`FileHasher::advance_to`])
/// so that the part already final can be hashed while the rest is written.
/// Holes hash as the zeros they read as, without reading them.
pub(crate) struct FileHasher {
    file: Reader,
    path: PathBuf,
    size: u64,
    pos: u64,
    h: Sha256,
    meter: strata_process::progress::Meter,
}

impl FileHasher {
    const CHUNK: usize = 1 << 20;

    pub(crate) fn open(path: &Path) -> Result<Self> {
        let file = Reader::open(path)?;
        let size = file.file().metadata()?.len();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        Ok(Self {
            file,
            path: path.to_path_buf(),
            size,
            pos: 0,
            h: Sha256::new(),
            meter: strata_process::progress::Meter::new(format!("hashing {name}"), size),
        })
    }

    /// Hashes the bytes up to `end` (at most the file's size).
    pub(crate) fn advance_to(&mut self, end: u64) -> Result<()> {
        let end = end.min(self.size);
        let from = self.pos;
        let reading = || format!("reading {}", self.path.display());
        let zeros = vec![0u8; Self::CHUNK];
        while self.pos < end {
            let data =
                match rustix::fs::seek(self.file.file(), rustix::fs::SeekFrom::Data(self.pos)) {
                    Ok(d) => d.min(end),
                    // No data after `pos`: the rest is a hole.
                    Err(rustix::io::Errno::NXIO) => end,
                    Err(e) => return Err(e).with_context(reading),
                };
            let mut zero = data - self.pos;
            while zero > 0 {
                let n = zero.min(Self::CHUNK as u64);
                self.h.update(&zeros[..n as usize]);
                zero -= n;
            }
            self.pos = data;
            if data == end {
                break;
            }
            let hole = rustix::fs::seek(self.file.file(), rustix::fs::SeekFrom::Hole(data))
                .with_context(reading)?
                .min(end);
            let h = &mut self.h;
            self.file
                .stream(data, hole, |bytes, _| {
                    h.update(bytes);
                    Ok(())
                })
                .with_context(reading)?;
            self.pos = hole;
        }
        self.meter.add(self.pos - from);
        Ok(())
    }

    /// Hashes `bytes`, which the caller has just written at `pos`, the
    /// offset hashing has reached: what a copy writes is hashed as it
    /// goes instead of read back.
    pub(crate) fn feed(&mut self, pos: u64, bytes: &[u8]) -> Result<()> {
        if pos != self.pos {
            anyhow::bail!(
                "{}: hashing is at {}, not at {pos}",
                self.path.display(),
                self.pos
            );
        }
        self.h.update(bytes);
        self.pos += bytes.len() as u64;
        self.meter.add(bytes.len() as u64);
        Ok(())
    }

    /// The size and sha256 of the whole file.
    pub(crate) fn finish(mut self) -> Result<(u64, String)> {
        self.advance_to(self.size)?;
        Ok((self.size, hex::encode(self.h.finalize())))
    }
}

/// The size and sha256 of a file.
pub(crate) fn hash_file(path: &Path) -> Result<(u64, String)> {
    FileHasher::open(path)?.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn sparse_files_hash_as_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        for (name, len, pieces) in [
            (
                "holes",
                9 << 20,
                vec![(0, &b"abc"[..]), ((5 << 20) + 3, b"xyz")],
            ),
            (
                "trailing-data",
                3 << 20,
                vec![((3 << 20) - 2, &b"end"[..2])],
            ),
            ("all-hole", 2 << 20, vec![]),
            // Data across several reads, ending off a block boundary.
            (
                "long-data",
                (13 << 20) + 5,
                vec![(0, &[9u8; (13 << 20) + 5][..])],
            ),
            ("empty", 0, vec![]),
        ] {
            let path = dir.path().join(name);
            let f = std::fs::File::create(&path).unwrap();
            f.set_len(len).unwrap();
            for (at, bytes) in pieces {
                f.write_all_at(bytes, at).unwrap();
            }
            let want = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
            // From the page cache, then (the cache dropped) read directly.
            for cached in [true, false] {
                if !cached {
                    f.sync_all().unwrap();
                    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
                }
                assert_eq!(hash_file(&path).unwrap(), (len, want.clone()), "{name}");
                // In steps, cut inside data, inside holes and past the end.
                let mut h = FileHasher::open(&path).unwrap();
                for end in [1, 2 << 20, (5 << 20) + 4, 100 << 20] {
                    h.advance_to(end).unwrap();
                }
                assert_eq!(
                    h.finish().unwrap(),
                    (len, want.clone()),
                    "{name} in steps, cached: {cached}"
                );
            }
        }
    }
}
