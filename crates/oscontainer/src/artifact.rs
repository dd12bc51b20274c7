//! Files written whole or not at all, hashed while they are written.
//!
//! An artifact (an OCI archive, a gzip'd disk) goes to a temporary file
//! beside its destination and is renamed over it only once complete: a
//! reader sees the old file or the new one, never a torn one, and a failed
//! or interrupted write leaves what was there (the temporary file is
//! removed when the writer is dropped). Its size and sha256 are counted as
//! the bytes go out, so nothing reads the file back. This module does not
//! know what the bytes are.

use std::fs::Permissions;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

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
    out: BufWriter<tempfile::NamedTempFile>,
    dest: PathBuf,
    hash: Sha256,
    size: u64,
}

impl ArtifactFile {
    /// Buffer between the writer and the file.
    const BUFFER: usize = 1 << 20;

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
        Ok(Self {
            out: BufWriter::with_capacity(Self::BUFFER, tmp),
            dest: dest.to_path_buf(),
            hash: Sha256::new(),
            size: 0,
        })
    }

    /// Flushes the file to disk and renames it to its destination,
    /// replacing what was there.
    pub(crate) fn finish(self) -> Result<Written> {
        let dest = &self.dest;
        let tmp = self
            .out
            .into_inner()
            .map_err(io::IntoInnerError::into_error)
            .context_with(|| format!("writing {}", dest.display()))?;
        tmp.as_file()
            .sync_all()
            .context_with(|| format!("writing {}", dest.display()))?;
        tmp.persist(dest)
            .map_err(|e| e.error)
            .context_with(|| format!("renaming into {}", dest.display()))?;
        Ok(Written {
            size: self.size,
            sha256: hex::encode(self.hash.finalize()),
        })
    }
}

impl Write for ArtifactFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
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
}
