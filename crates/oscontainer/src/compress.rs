//! Layer compression whose output depends only on the input bytes.
//!
//! [`gzip_file`] gives a file (a disk image) the same gzip as layers, for
//! artifacts published as `.gz`.
//!
//! gzip is [`strata_process::gzip`]'s at [`GZIP_LEVEL`]: a fixed header and
//! independent 1 MiB blocks deflated in parallel, cut at fixed offsets, the
//! bytes depending only on the input. zstd uses the
//! vendored libzstd of `zstd-sys` single-threaded, which is deterministic for a
//! given level and version. Nothing here may read the clock or the
//! environment.

use std::io::{self, Read, Write};
use std::path::Path;

use oci_spec::image::MediaType;
use sha2::{Digest as _, Sha256};
use strata_process::gzip::{BlockIndex, Deflated, GzipWriter, BLOCK};

use crate::artifact::ArtifactFile;
use crate::error::Context;

/// How layers are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Compression {
    /// gzip (the default; every client reads it).
    #[default]
    Gzip,
    /// zstd (smaller and faster; umoci and older clients reject it).
    Zstd,
    /// No compression.
    None,
}

impl Compression {
    /// The OCI media type of a layer compressed this way.
    pub fn media_type(self) -> MediaType {
        match self {
            Compression::Gzip => MediaType::ImageLayerGzip,
            Compression::Zstd => MediaType::ImageLayerZstd,
            Compression::None => MediaType::ImageLayer,
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "gzip" => Ok(Compression::Gzip),
            "zstd" => Ok(Compression::Zstd),
            "none" => Ok(Compression::None),
            other => Err(crate::Error::InvalidOption(format!(
                "compression {other:?}: expected gzip, zstd or none"
            ))),
        }
    }
}

/// gzip level. Measured on 1 MiB blocks of Debian's libraries and
/// programs, one core: zlib-rs level 5 deflates at 90 MB/s to 35.0% of the
/// input, where miniz_oxide level 4 (strata's before) did 57 MB/s to 34.8%
/// and zlib-rs level 6 (zlib's default) does 69 MB/s to 34.9%.
pub(crate) const GZIP_LEVEL: u8 = 5;
/// zstd level (zstd's default).
const ZSTD_LEVEL: i32 = 3;

/// A compressing writer for one layer.
pub(crate) enum Encoder<W: Write> {
    Gzip(GzipWriter<W>),
    Zstd(zstd::stream::write::Encoder<'static, W>),
    None(W),
}

impl<W: Write> Encoder<W> {
    pub(crate) fn new(c: Compression, inner: W) -> io::Result<Self> {
        Ok(match c {
            Compression::Gzip => Encoder::Gzip(GzipWriter::new(inner, GZIP_LEVEL)?),
            Compression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(inner, ZSTD_LEVEL)?;
                e.include_checksum(true)?;
                Encoder::Zstd(e)
            }
            Compression::None => Encoder::None(inner),
        })
    }

    /// gzip at [`GZIP_LEVEL`] with a block index, copying the blocks of
    /// `earlier` streams (see `crate::gzip_blocks`).
    pub(crate) fn gzip_indexed(
        inner: W,
        index: BlockIndex,
        earlier: Vec<Deflated>,
    ) -> io::Result<Self> {
        Ok(Encoder::Gzip(GzipWriter::indexed(
            inner, GZIP_LEVEL, index, earlier,
        )?))
    }

    /// Ends the stream and returns the inner writer.
    pub(crate) fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Gzip(g) => g.finish(),
            Encoder::Zstd(z) => z.finish(),
            Encoder::None(w) => Ok(w),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Gzip(g) => g.write(buf),
            Encoder::Zstd(z) => z.write(buf),
            Encoder::None(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Gzip(g) => g.flush(),
            Encoder::Zstd(z) => z.flush(),
            Encoder::None(w) => w.flush(),
        }
    }
}

impl<'a> ocidir::WriteComplete<ocidir::BlobWriter<'a>> for Encoder<ocidir::BlobWriter<'a>> {
    fn complete(self) -> io::Result<ocidir::BlobWriter<'a>> {
        self.finish()
    }
}

/// What [`gzip_file`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Compressed {
    /// Size of the `.gz` file in bytes.
    pub size: u64,
    /// sha256 of the `.gz` file: lowercase hex, no `sha256:` prefix.
    pub sha256: String,
    /// Size of the input in bytes.
    pub uncompressed_size: u64,
    /// sha256 of the input, as `size`.
    pub uncompressed_sha256: String,
}

/// Compresses the file `src` into `dest` as one gzip member with the bytes
/// layers get (`GzipWriter`: fixed header, no name, no time): the output
/// depends only on the input's bytes. Input and output are streamed and
/// hashed in the same pass. `dest` is written to a temporary file beside
/// it and renamed into place once complete; its directory must exist.
pub fn gzip_file(src: &Path, dest: &Path) -> crate::Result<Compressed> {
    let reading = || format!("reading {}", src.display());
    let compressing = || format!("compressing {} into {}", src.display(), dest.display());
    let input = std::fs::File::open(src).context_with(|| format!("opening {}", src.display()))?;
    let total = input.metadata().map(|m| m.len()).unwrap_or(0);
    let name = src.file_name().unwrap_or_default().to_string_lossy();
    let mut input = strata_process::progress::MeteredRead::new(
        input,
        strata_process::progress::Meter::new(format!("compressing {name}"), total),
    );
    let mut out = ArtifactFile::create(dest)?;
    let mut gz = GzipWriter::new(&mut out, GZIP_LEVEL).context_with(compressing)?;
    let mut hash = Sha256::new();
    let mut len = 0u64;
    let mut buf = vec![0u8; BLOCK];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context_with(reading),
        };
        hash.update(&buf[..n]);
        len += n as u64;
        gz.write_all(&buf[..n]).context_with(compressing)?;
    }
    gz.finish().context_with(compressing)?;
    let written = out.finish()?;
    Ok(Compressed {
        size: written.size,
        sha256: written.sha256,
        uncompressed_size: len,
        uncompressed_sha256: hex::encode(hash.finalize()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        // Compressible but not trivial: 3 MiB of a repeating, shifting pattern.
        (0..3 * 1024 * 1024u32)
            .map(|i| ((i / 7) ^ (i % 251)) as u8)
            .collect()
    }

    /// `program` on PATH, or a failure naming the Debian package.
    fn tool(program: &str, package: &str) -> std::path::PathBuf {
        strata_process::require(program).unwrap_or_else(|_| {
            panic!("`{program}` not found: install the Debian package {package}")
        })
    }

    /// The first word of what `program FILE` prints.
    fn first_word_of(program: &std::path::Path, file: &Path) -> String {
        let out = std::process::Command::new(program)
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{program:?} {file:?}: {out:?}");
        let out = String::from_utf8(out.stdout).unwrap();
        out.split_whitespace().next().unwrap().to_string()
    }

    #[test]
    fn gzip_file_is_deterministic_and_gzip_restores_it() {
        let gzip = tool("gzip", "gzip");
        let sha256sum = tool("sha256sum", "coreutils");
        let dir = tempfile::tempdir().unwrap();
        // A disk-like file: data, a hole, data, a hole at the end; more than
        // one batch of blocks, the last one partial.
        let disk = dir.path().join("disk.raw");
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::File::create(&disk).unwrap();
            let data = sample();
            f.write_all_at(&data, 0).unwrap();
            f.write_all_at(&data[..1000], 6 * BLOCK as u64 + 17)
                .unwrap();
            f.set_len(11 * BLOCK as u64 + 4321).unwrap();
        }
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        std::fs::create_dir(dir.path().join("other")).unwrap();

        for src in [&disk, &empty] {
            let a = dir.path().join("a.gz");
            let b = dir.path().join("other/b.gz");
            let info = gzip_file(src, &a).unwrap();
            assert_eq!(gzip_file(src, &b).unwrap(), info);
            let gz = std::fs::read(&a).unwrap();
            assert!(gz == std::fs::read(&b).unwrap(), "{src:?}: same bytes");
            assert_eq!(&gz[..10], &strata_process::gzip::GZIP_HEADER);
            assert_eq!(info.size, gz.len() as u64);
            assert_eq!(info.sha256, first_word_of(&sha256sum, &a));
            assert_eq!(
                info.uncompressed_size,
                std::fs::metadata(src).unwrap().len()
            );
            assert_eq!(info.uncompressed_sha256, first_word_of(&sha256sum, src));

            let out = std::process::Command::new(&gzip)
                .arg("-dc")
                .arg(&a)
                .output()
                .unwrap();
            assert!(out.status.success(), "gzip -dc: {out:?}");
            assert!(
                out.stdout == std::fs::read(src).unwrap(),
                "{src:?} restored"
            );
        }

        // The bytes are pinned: a change to them (the block size, the
        // level, a zlib-rs that deflates differently) changes every
        // published .gz.
        let info = gzip_file(&disk, &dir.path().join("disk.raw.gz")).unwrap();
        assert_eq!(
            info.sha256,
            "62661e267ab739c7cf396188572c6b9ee061bb736b2f5c116b04205a114d60e2"
        );
    }

    #[test]
    fn gzip_file_of_a_missing_file_names_it_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.gz");
        let err = gzip_file(&dir.path().join("missing"), &dest).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    #[test]
    fn zstd_round_trips() {
        let data = sample();
        let mut e = Encoder::new(Compression::Zstd, Vec::new()).unwrap();
        e.write_all(&data).unwrap();
        let z = e.finish().unwrap();
        assert_eq!(zstd::decode_all(&z[..]).unwrap(), data);
    }
}
