//! A layer's uncompressed stream, as every reader of a layer gets it:
//! decompressed by its media type on a thread of its own, ahead of the
//! reader, its diff ID checked and its expansion bounded, so that a
//! hostile layer fails as a read error before it fills the disk.

use std::io::Read;

use oci_spec::image::{Descriptor, MediaType};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};
use crate::layout::ResolvedImage;

/// How far a compressed layer may expand by default: this many times its
/// compressed size, plus [`EXPANSION_SLACK`]. RPM content compresses about
/// 3:1 and gzip cannot exceed about 1030:1, so real layers stay far below
/// while a small hostile layer cannot fill the disk.
pub const DEFAULT_MAX_EXPANSION: u64 = 100;

/// Bytes every layer may expand to beyond its ratio (small layers of
/// zero-filled files).
pub const EXPANSION_SLACK: u64 = 64 << 20;

/// What the uncompressed stream of a compressed layer must be: the
/// config's diff ID for it, and no longer than its compressed size allows.
#[derive(Debug, Clone)]
pub(crate) struct LayerCheck {
    /// `sha256:…` from the config's `rootfs.diff_ids`.
    pub diff_id: Option<String>,
    /// Uncompressed bytes allowed.
    pub max_bytes: u64,
    /// The ratio behind `max_bytes`, for the error.
    pub ratio: u64,
}

impl LayerCheck {
    /// The check for layer `index` of `image`, allowing `ratio` times its
    /// compressed size.
    pub(crate) fn of(image: &ResolvedImage, index: usize, ratio: u64) -> Self {
        let desc = &image.manifest.layers()[index];
        Self {
            diff_id: image
                .config
                .rootfs()
                .diff_ids()
                .get(index)
                .map(|d| d.to_string()),
            max_bytes: desc
                .size()
                .saturating_mul(ratio)
                .saturating_add(EXPANSION_SLACK),
            ratio,
        }
    }
}

/// A layer's uncompressed stream held to its [`LayerCheck`]: reading past
/// the allowed size, or reaching the end with another diff ID, is an
/// error of the read.
struct Checked<R> {
    inner: R,
    check: LayerCheck,
    hasher: Sha256,
    read: u64,
    done: bool,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let n = self.inner.read(buf)?;
        if n == 0 {
            if !self.done {
                self.done = true;
                let found = format!("sha256:{}", hex::encode(self.hasher.clone().finalize()));
                if let Some(want) = &self.check.diff_id {
                    if &found != want {
                        return Err(invalid(format!(
                            "its uncompressed content hashes to {found}, the config's diff_ids \
                             say {want}"
                        )));
                    }
                }
            }
            return Ok(0);
        }
        self.read += n as u64;
        if self.read > self.check.max_bytes {
            return Err(invalid(format!(
                "it expands beyond {} bytes ({} times its compressed size plus {} MiB)",
                self.check.max_bytes,
                self.check.ratio,
                EXPANSION_SLACK >> 20
            )));
        }
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// A decompressing reader for a layer of the descriptor's media type.
/// Compressed layers are decompressed on a thread of their own, ahead of
/// the reader ([`ReadAhead`]).
/// The layer's diff ID is checked and its expansion bounded by `check`
/// for compressed layers (an uncompressed layer's diff ID is its digest,
/// verified with the blob).
pub(crate) fn decompressor(
    desc: &Descriptor,
    r: impl std::io::BufRead + Send + 'static,
    check: LayerCheck,
) -> Result<Box<dyn Read + Send>> {
    let docker_gzip = "application/vnd.docker.image.rootfs.diff.tar.gzip";
    let docker_tar = "application/vnd.docker.image.rootfs.diff.tar";
    let checked = |inner: Box<dyn Read + Send>| -> Box<dyn Read + Send> {
        Box::new(ReadAhead::new(Checked {
            inner,
            check,
            hasher: Sha256::new(),
            read: 0,
            done: false,
        }))
    };
    Ok(match desc.media_type() {
        MediaType::ImageLayerGzip | MediaType::ImageLayerNonDistributableGzip => {
            checked(Box::new(flate2::bufread::GzDecoder::new(r)))
        }
        MediaType::ImageLayerZstd | MediaType::ImageLayerNonDistributableZstd => checked(Box::new(
            zstd::stream::read::Decoder::with_buffer(r).map_err(|e| Error::BadLayer {
                digest: desc.digest().to_string(),
                reason: format!("zstd: {e}"),
            })?,
        )),
        MediaType::ImageLayer | MediaType::ImageLayerNonDistributable => Box::new(r),
        MediaType::Other(t) if t == docker_gzip => {
            checked(Box::new(flate2::bufread::GzDecoder::new(r)))
        }
        MediaType::Other(t) if t == docker_tar => Box::new(r),
        other => {
            return Err(Error::BadLayer {
                digest: desc.digest().to_string(),
                reason: format!("unsupported layer media type {other}"),
            })
        }
    })
}

/// A reader whose source is read on a thread of its own, up to
/// [`ReadAhead::DEPTH`] chunks ahead: an import decompresses a layer while
/// it writes the previous chunk's files into the repository, on two cores
/// instead of one. The thread stops when the reader is dropped.
pub(crate) struct ReadAhead {
    chunks: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    current: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ReadAhead {
    /// Bytes per chunk.
    const CHUNK: usize = 1 << 20;
    /// Chunks read ahead.
    const DEPTH: usize = 4;

    pub(crate) fn new(mut source: impl Read + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel(Self::DEPTH);
        std::thread::spawn(move || loop {
            let mut chunk = vec![0u8; Self::CHUNK];
            let mut filled = 0;
            let result = loop {
                match source.read(&mut chunk[filled..]) {
                    Ok(0) => break Ok(()),
                    Ok(n) => {
                        filled += n;
                        if filled == chunk.len() {
                            break Ok(());
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            chunk.truncate(filled);
            let last = filled == 0;
            let message = result.map(|()| chunk);
            let failed = message.is_err();
            // A closed channel: the reader is gone, nothing more to do.
            if tx.send(message).is_err() || failed || last {
                return;
            }
        });
        Self::from_channel(rx)
    }

    /// A reader of the chunks another thread sends: an empty chunk ends
    /// the stream; a closed channel before it is an error.
    pub(crate) fn from_channel(
        chunks: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    ) -> Self {
        Self {
            chunks,
            current: Vec::new(),
            pos: 0,
            done: false,
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.current.len() {
            if self.done {
                return Ok(0);
            }
            match self.chunks.recv() {
                Ok(Ok(chunk)) => {
                    self.done = chunk.is_empty();
                    self.current = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Err(std::io::Error::other("the reading thread stopped"));
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that yields `data` in odd-sized pieces, then fails if told.
    struct Source {
        data: Vec<u8>,
        pos: usize,
        fail_at_end: bool,
    }

    impl Read for Source {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.pos == self.data.len() {
                return if self.fail_at_end {
                    Err(std::io::Error::other("truncated"))
                } else {
                    Ok(0)
                };
            }
            let n = buf.len().min(7919).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn read_ahead_gives_the_same_bytes_and_the_error() {
        for len in [0, 1, ReadAhead::CHUNK, 3 * ReadAhead::CHUNK + 12345] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut out = Vec::new();
            ReadAhead::new(Source {
                data: data.clone(),
                pos: 0,
                fail_at_end: false,
            })
            .read_to_end(&mut out)
            .unwrap();
            assert_eq!(out, data, "{len} bytes");
        }
        let err = ReadAhead::new(Source {
            data: vec![1; 5000],
            pos: 0,
            fail_at_end: true,
        })
        .read_to_end(&mut Vec::new())
        .unwrap_err();
        assert_eq!(err.to_string(), "truncated");
        // Dropped early: the thread stops on its own.
        let mut r = ReadAhead::new(std::io::repeat(0));
        let mut buf = [0u8; 10];
        r.read_exact(&mut buf).unwrap();
        drop(r);
    }
}
