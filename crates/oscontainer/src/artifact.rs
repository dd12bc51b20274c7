//! Files written whole or not at all, hashed while they are written.
//!
//! An artifact (an OCI archive, a gzip'd disk) goes to a temporary file
//! beside its destination and is renamed over it only once complete: a
//! reader sees the old file or the new one, never a torn one, and a failed
//! or interrupted write leaves what was there (the temporary file is
//! removed when the writer is dropped). Its size and sha256 are counted as
//! the bytes go out, so nothing reads the file back. Whole chunks are
//! written with direct I/O where the filesystem has it
//! ([`strata_process::direct`]): an archive or a compressed disk is
//! gigabytes that nothing reads back, and taking fresh page cache for them
//! was most of their writing's CPU. This module does not know what the
//! bytes are.

use std::fs::Permissions;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use strata_process::direct::{Aligned, ALIGN};

use crate::error::{Context, Result};

/// Size and sha256 of a written file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    pub size: u64,
    /// Lowercase hex, no `sha256:` prefix.
    pub sha256: String,
}

/// A file being written to a temporary name beside `dest`; see the module
/// documentation.
pub(crate) struct ArtifactFile {
    tmp: tempfile::NamedTempFile,
    /// The same file opened for direct I/O, where its filesystem has it.
    direct: Option<std::fs::File>,
    /// The bytes not written out yet, which start at `size - filled`.
    buf: Aligned,
    filled: usize,
    dest: PathBuf,
    hash: Sha256,
    size: u64,
}

impl ArtifactFile {
    /// The bytes gathered before they are written out, at once.
    const CHUNK: usize = 8 << 20;

    /// Starts writing `dest`, whose directory must exist. The file gets
    /// mode 0644 (less what the umask removes), as a plain `create` would.
    pub(crate) fn create(dest: &Path) -> Result<Self> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .map_or_else(|| "artifact".into(), |n| n.to_string_lossy().into_owned());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(Permissions::from_mode(0o644))
            .tempfile_in(dir)
            .context_with(|| format!("creating a temporary file in {}", dir.display()))?;
        let direct = strata_process::direct::open_direct(tmp.path())
            .context_with(|| format!("opening {}", tmp.path().display()))?;
        Ok(Self {
            tmp,
            direct,
            buf: Aligned::new(Self::CHUNK),
            filled: 0,
            dest: dest.to_path_buf(),
            hash: Sha256::new(),
            size: 0,
        })
    }

    /// Flushes the file to disk and renames it to its destination,
    /// replacing what was there.
    pub(crate) fn finish(mut self) -> Result<Written> {
        let dest = self.dest.clone();
        self.write_out()
            .and_then(|()| self.tmp.as_file().sync_all())
            .context_with(|| format!("writing {}", dest.display()))?;
        self.tmp
            .persist(&dest)
            .map_err(|e| e.error)
            .context_with(|| format!("renaming into {}", dest.display()))?;
        Ok(Written {
            size: self.size,
            sha256: hex::encode(self.hash.finalize()),
        })
    }

    /// Writes the gathered bytes at their place: directly when they are
    /// whole blocks at a block's offset (every chunk but the last), else
    /// through the page cache.
    fn write_out(&mut self) -> io::Result<()> {
        let at = self.size - self.filled as u64;
        let aligned = at.is_multiple_of(ALIGN as u64) && self.filled.is_multiple_of(ALIGN);
        let out = match &self.direct {
            Some(direct) if aligned => direct,
            _ => self.tmp.as_file(),
        };
        out.write_all_at(&self.buf.get()[..self.filled], at)?;
        self.filled = 0;
        Ok(())
    }
}

impl Write for ArtifactFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(Self::CHUNK - self.filled);
        self.buf.get()[self.filled..self.filled + n].copy_from_slice(&data[..n]);
        self.filled += n;
        self.hash.update(&data[..n]);
        self.size += n as u64;
        if self.filled == Self::CHUNK {
            self.write_out()?;
        }
        Ok(n)
    }

    /// Nothing to do: the file is only seen once [`ArtifactFile::finish`]
    /// has written the rest and renamed it.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

    #[test]
    fn replaces_the_file_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.bin");
        std::fs::write(&dest, b"old").unwrap();

        let mut f = ArtifactFile::create(&dest).unwrap();
        f.write_all(b"new ").unwrap();
        f.write_all(b"content").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        let written = f.finish().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new content");
        assert_eq!(written.size, 11);
        assert_eq!(
            written.sha256,
            hex::encode(Sha256::digest(b"new content")),
            "the hash of what was written"
        );
        // The mode a plain create with 0644 gives (not tempfile's 0600).
        let plain = dir.path().join("plain");
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&plain)
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&dest), mode(&plain));
        std::fs::remove_file(&plain).unwrap();

        // Dropped unfinished: the destination stays, no temporary file is left.
        let mut f = ArtifactFile::create(&dest).unwrap();
        f.write_all(b"abandoned").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&dest).unwrap(), b"new content");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.bin"]);
    }

    /// Chunks written directly, the rest through the page cache: the bytes
    /// and the hash are those written, whatever the pieces' sizes.
    #[test]
    fn large_files_in_odd_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("big.bin");
        let data: Vec<u8> = (0..(2 * ArtifactFile::CHUNK + 12_345))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut f = ArtifactFile::create(&dest).unwrap();
        for piece in data.chunks(1_000_003) {
            f.write_all(piece).unwrap();
        }
        let written = f.finish().unwrap();
        assert!(std::fs::read(&dest).unwrap() == data);
        assert_eq!(written.size, data.len() as u64);
        assert_eq!(written.sha256, hex::encode(Sha256::digest(&data)));
    }
}
