//! A package's payload read once for the package cache: each file the
//! cache stores is handed over as it streams by, and the package's
//! substitute is written beside: its lead and headers as they are, and
//! the payload with zeros in place of each stored file's content,
//! compressed as the header says. librpm installs the substitute in place
//! of the package when every stored file is placed (`strata_dnf`'s
//! substitutes), so what it reads past is zeros, not compressed content.
//!
//! The payload is a cpio archive in the "new ASCII" format (`070701`), as
//! rpmbuild writes it. A package with another format (rpm's stripped one,
//! for files of 4 GiB and more) or a compressor not read here is left to
//! librpm ([`Split::open`] says `None`).

use std::fs::File;
use std::io::{self, BufRead, Read, Write};

use anyhow::{bail, Context, Result};
use strata_process::cpio::{self, Header, HEADER_SIZE};

/// The payload compressions read and written here.
#[derive(Clone, Copy)]
enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
}

impl Compression {
    fn of(metadata: &rpm::PackageMetadata) -> Option<Compression> {
        Some(match metadata.get_payload_compressor().ok()? {
            rpm::CompressionType::None => Compression::None,
            rpm::CompressionType::Gzip => Compression::Gzip,
            rpm::CompressionType::Zstd => Compression::Zstd,
            rpm::CompressionType::Xz => Compression::Xz,
            _ => return None,
        })
    }

    fn decoder<'r>(self, r: impl BufRead + 'r) -> io::Result<Box<dyn Read + 'r>> {
        Ok(match self {
            Compression::None => Box::new(r),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(r)?),
            Compression::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(r)),
        })
    }

    /// The substitute's payload is small (what librpm still installs) and
    /// read once: fast settings.
    fn encoder(self, w: File) -> io::Result<Encoder> {
        Ok(match self {
            Compression::None => Encoder::None(w),
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::fast(),
            )),
            Compression::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(w, 1)?),
            Compression::Xz => Encoder::Xz(liblzma::write::XzEncoder::new(w, 0)),
        })
    }
}

enum Encoder {
    None(File),
    Gzip(flate2::write::GzEncoder<File>),
    Zstd(zstd::stream::write::Encoder<'static, File>),
    Xz(liblzma::write::XzEncoder<File>),
}

impl Encoder {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Encoder::None(w) => w,
            Encoder::Gzip(w) => w,
            Encoder::Zstd(w) => w,
            Encoder::Xz(w) => w,
        }
    }

    fn finish(self) -> io::Result<File> {
        match self {
            Encoder::None(w) => Ok(w),
            Encoder::Gzip(w) => w.finish(),
            Encoder::Zstd(w) => w.finish(),
            Encoder::Xz(w) => w.finish(),
        }
    }
}

/// A member of the archive whose content comes next.
struct Member {
    path: String,
    size: u64,
    /// Its header and name as read, padding included.
    raw: Vec<u8>,
}

/// A payload being read, and the substitute's being written.
pub(crate) struct Split<'r> {
    archive: Box<dyn Read + 'r>,
    out: Encoder,
    /// The member returned last, not taken or kept yet.
    pending: Option<Member>,
}

impl<'r> Split<'r> {
    /// Starts reading the payload that follows the headers in `package`
    /// (read up to them, `headers` bytes) and writing the substitute to
    /// `out`: the same lead and headers, then the payload. `None` when
    /// the payload is not read here.
    pub(crate) fn open(
        metadata: &rpm::PackageMetadata,
        package: impl BufRead + 'r,
        headers: &mut impl Read,
        mut out: File,
    ) -> Result<Option<Split<'r>>> {
        let Some(compression) = Compression::of(metadata) else {
            return Ok(None);
        };
        io::copy(headers, &mut out).context("copying the headers")?;
        let mut archive = compression.decoder(package)?;
        let mut magic = [0u8; 6];
        archive
            .read_exact(&mut magic)
            .context("reading the payload")?;
        if !matches!(&magic, b"070701" | b"070702") {
            return Ok(None);
        }
        Ok(Some(Split {
            archive: Box::new(io::Cursor::new(magic).chain(archive)),
            out: compression.encoder(out)?,
            pending: None,
        }))
    }

    /// The next member's path in the tree (`/usr/bin/x` for
    /// `./usr/bin/x`) and size, or `None` after the trailer (then copied,
    /// with whatever follows it). The member before, unless taken, is
    /// kept.
    pub(crate) fn next(&mut self) -> Result<Option<(String, u64)>> {
        if self.pending.is_some() {
            self.keep()?;
        }
        let mut raw = vec![0u8; HEADER_SIZE];
        self.archive
            .read_exact(&mut raw)
            .context("reading a cpio header")?;
        let Header {
            size, name_size, ..
        } = cpio::read_header(&raw).context("the payload's cpio archive is damaged")?;
        let named = HEADER_SIZE + name_size;
        raw.resize(named + cpio::pad4(named as u64), 0);
        self.archive
            .read_exact(&mut raw[HEADER_SIZE..])
            .context("reading a cpio member's name")?;
        let name = std::str::from_utf8(&raw[HEADER_SIZE..named - 1])
            .context("the payload's cpio archive names a member in bytes that are not UTF-8")?;
        if name == "TRAILER!!!" {
            self.out.writer().write_all(&raw)?;
            io::copy(&mut self.archive, self.out.writer()).context("reading the payload")?;
            return Ok(None);
        }
        let path = match name.strip_prefix('.') {
            Some(p) if p.starts_with('/') => p.to_string(),
            _ => format!("/{}", name.trim_start_matches('/')),
        };
        self.pending = Some(Member {
            path: path.clone(),
            size,
            raw,
        });
        Ok(Some((path, size)))
    }

    /// Reads the member's content into `buf` (cleared first). The
    /// substitute keeps the member with zeros for content: librpm insists
    /// on finding every file of the package in the payload, and reads as
    /// many bytes past a file it skips as the header gives it, but zeros
    /// cost next to nothing to store and to decompress.
    pub(crate) fn take(&mut self, buf: &mut Vec<u8>) -> Result<()> {
        let m = self.pending.take().context("no member to take")?;
        buf.clear();
        let read = (&mut self.archive)
            .take(m.size)
            .read_to_end(buf)
            .with_context(|| format!("reading {}", m.path))?;
        if read as u64 != m.size {
            bail!("the payload ends inside {}", m.path);
        }
        let mut pad = [0u8; 3];
        self.archive
            .read_exact(&mut pad[..cpio::pad4(m.size)])
            .with_context(|| format!("reading {}", m.path))?;
        self.out.writer().write_all(&m.raw)?;
        let zeros = m.size + cpio::pad4(m.size) as u64;
        io::copy(&mut io::repeat(0).take(zeros), self.out.writer())?;
        Ok(())
    }

    /// Copies the member, header and content, into the substitute.
    fn keep(&mut self) -> Result<()> {
        let m = self.pending.take().context("no member to keep")?;
        self.out.writer().write_all(&m.raw)?;
        let want = m.size + cpio::pad4(m.size) as u64;
        let copied = io::copy(&mut (&mut self.archive).take(want), self.out.writer())
            .with_context(|| format!("copying {}", m.path))?;
        if copied != want {
            bail!("the payload ends inside {}", m.path);
        }
        Ok(())
    }

    /// Finishes the substitute's payload (call after [`Split::next`] said
    /// `None`).
    pub(crate) fn finish(self) -> Result<File> {
        Ok(self.out.finish()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Seek};
    use strata_testdistro::spec::{FileSpec, PkgSpec};

    /// Splits `package`, taking `/usr/lib/taken`; returns the substitute
    /// and how many bytes of headers both share.
    fn split(package: &std::path::Path, dir: &std::path::Path) -> (std::path::PathBuf, u64) {
        let mut reader = BufReader::new(File::open(package).unwrap());
        let metadata = rpm::PackageMetadata::parse(&mut reader).unwrap();
        let headers = reader.stream_position().unwrap();
        let out = dir.join("substitute.rpm");
        let mut head = File::open(package).unwrap().take(headers);
        let mut s = Split::open(&metadata, reader, &mut head, File::create(&out).unwrap())
            .unwrap()
            .expect("a payload read here");
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        while let Some((path, _)) = s.next().unwrap() {
            if path == "/usr/lib/taken" {
                s.take(&mut buf).unwrap();
                assert_eq!(buf, vec![7u8; 70_001]);
            }
            seen.push(path);
        }
        s.finish().unwrap();
        seen.sort();
        assert_eq!(
            seen,
            [
                "/etc/kept.conf",
                "/usr/lib/kept",
                "/usr/lib/link",
                "/usr/lib/taken"
            ]
        );
        (out, headers)
    }

    #[test]
    fn a_substitute_keeps_the_headers_and_every_member_with_zeros_for_what_was_taken() {
        let dir = tempfile::tempdir().unwrap();
        for xz in [false, true] {
            let mut spec = PkgSpec::new("split", "1", "1.el8").files([
                FileSpec::file("/usr/lib/taken", vec![7u8; 70_001], 0o755),
                FileSpec::file("/usr/lib/kept", b"kept\n".to_vec(), 0o644),
                FileSpec::symlink("/usr/lib/link", "kept"),
                FileSpec::file("/etc/kept.conf", b"a = 1\n".to_vec(), 0o644).config(),
            ]);
            spec.xz_payload = xz;
            let package = dir.path().join(spec.file_name());
            spec.build(None, &package).unwrap();
            let (substitute, headers) = split(&package, dir.path());

            let (a, b) = (
                std::fs::read(&package).unwrap(),
                std::fs::read(&substitute).unwrap(),
            );
            assert_eq!(a[..headers as usize], b[..headers as usize], "xz: {xz}");
            // Another reader of rpm payloads finds every file, the taken
            // one as zeros of its size.
            let mut r = rpm::PackageReader::open(&substitute).unwrap();
            let mut contents = std::collections::BTreeMap::new();
            while let Some(mut f) = r.next_file().unwrap() {
                let mut content = Vec::new();
                f.read_to_end(&mut content).unwrap();
                contents.insert(f.metadata.path().display().to_string(), content);
            }
            assert_eq!(contents["/usr/lib/taken"], vec![0u8; 70_001], "xz: {xz}");
            assert_eq!(contents["/usr/lib/kept"], b"kept\n", "xz: {xz}");
            assert_eq!(contents["/etc/kept.conf"], b"a = 1\n", "xz: {xz}");
            assert_eq!(contents.len(), 4);
        }
    }
}
