//! Deterministic synthetic file content.
//!
//! Ordinary fixture packages carry made-up binaries and data. Their bytes
//! come from a seeded generator so that the fixture is reproducible, and mix
//! random and repetitive runs so that they compress roughly like real
//! executables (about 2:1), which matters for layer-size measurements.
//! [`Content`] describes such bytes without holding them, for packages too
//! large to keep in memory: three kinds, compressing as executables, as
//! source and configuration text (about 3:1), and as already-compressed
//! data (firmware, `.ko.xz` modules: not at all).

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha12Rng;

/// `size` bytes of binary-like content determined by `seed`.
pub fn binary(seed: &str, size: usize) -> Vec<u8> {
    let mut rng = rng_for(seed);
    let mut out = Vec::with_capacity(size);
    // An ELF-looking header, so `file` and humans see a "binary".
    out.extend_from_slice(b"\x7fELF\x02\x01\x01\0");
    while out.len() < size {
        let run = rng.gen_range(64..4096).min(size - out.len());
        if rng.gen_bool(0.5) {
            let start = out.len();
            out.resize(start + run, 0);
            rng.fill_bytes(&mut out[start..]);
        } else {
            let word: [u8; 8] = rng.gen();
            out.extend(word.iter().cycle().take(run));
        }
    }
    out.truncate(size);
    out
}

/// Text content of about `size` bytes (configuration, docs).
pub fn text(seed: &str, size: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the", "system", "package", "service", "config", "network", "kernel", "daemon", "option",
        "default", "enable", "value", "path", "file", "user", "group", "mode", "start", "stop",
    ];
    let mut rng = rng_for(seed);
    let mut out = String::with_capacity(size + 16);
    out.push_str("# ");
    out.push_str(seed);
    out.push('\n');
    while out.len() < size {
        let line_words = rng.gen_range(3..12);
        for i in 0..line_words {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Bytes described by kind, seed and size, made on demand ([`Content::bytes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub kind: Kind,
    pub seed: String,
    pub size: usize,
}

/// What generated content imitates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Executables and libraries ([`binary`]).
    Binary,
    /// Source, scripts, configuration ([`source_text`]).
    Text,
    /// Already-compressed data ([`compressed`]).
    Compressed,
}

impl Content {
    pub fn bytes(&self) -> Vec<u8> {
        match self.kind {
            Kind::Binary => binary(&self.seed, self.size),
            Kind::Text => source_text(&self.seed, self.size),
            Kind::Compressed => compressed(&self.seed, self.size),
        }
    }
}

/// Exactly `size` bytes of text that compresses about as program sources
/// and configuration do (gzip about 3:1): lines of identifiers drawn from
/// a vocabulary of a few thousand made-up words, with numbers among them.
pub fn source_text(seed: &str, size: usize) -> Vec<u8> {
    const SYLLABLES: &[&str] = &[
        "con", "fig", "net", "dev", "sys", "ker", "nel", "mod", "ule", "pro", "ces", "ser", "vi",
        "ce", "in", "it", "buf", "fer", "str", "ing", "lock", "map", "ptr", "len", "err", "ret",
        "add", "get", "set", "put", "open", "read", "write", "path", "file", "node", "hash",
        "list", "queue", "time", "out", "user", "group", "mount", "boot", "disk",
    ];
    const PUNCT: &[&str] = &[" = ", "(", ");", ", ", " { ", " }", "->", ".", " # ", ": "];
    let mut rng = rng_for(seed);
    let mut out = Vec::with_capacity(size + 64);
    let mut indent = 0usize;
    while out.len() < size {
        out.extend(std::iter::repeat_n(b' ', indent * 4));
        for w in 0..rng.gen_range(2..9) {
            if w > 0 {
                out.extend_from_slice(PUNCT[rng.gen_range(0..PUNCT.len())].as_bytes());
            }
            if rng.gen_bool(0.15) {
                out.extend_from_slice(rng.gen_range(0..100_000u32).to_string().as_bytes());
            } else {
                for s in 0..rng.gen_range(1..4) {
                    if s > 0 && rng.gen_bool(0.3) {
                        out.push(b'_');
                    }
                    out.extend_from_slice(SYLLABLES[rng.gen_range(0..SYLLABLES.len())].as_bytes());
                }
            }
        }
        out.push(b'\n');
        indent = (indent + rng.gen_range(0..3)).saturating_sub(1).min(4);
    }
    out.truncate(size);
    out
}

/// `size` bytes that no compressor shrinks: an xz header, then random data.
pub fn compressed(seed: &str, size: usize) -> Vec<u8> {
    let mut rng = rng_for(seed);
    let mut out = vec![0; size];
    rng.fill_bytes(&mut out);
    let magic = b"\xfd7zXZ\0";
    let n = magic.len().min(size);
    out[..n].copy_from_slice(&magic[..n]);
    out
}

fn rng_for(seed: &str) -> ChaCha12Rng {
    use sha2::Digest;
    ChaCha12Rng::from_seed(sha2::Sha256::digest(seed.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_deterministic_and_sized() {
        assert_eq!(binary("a", 10_000), binary("a", 10_000));
        assert_ne!(binary("a", 10_000), binary("b", 10_000));
        assert_eq!(binary("a", 12_345).len(), 12_345);
        assert!(text("t", 500).len() >= 500);
        for kind in [Kind::Binary, Kind::Text, Kind::Compressed] {
            let c = Content {
                kind,
                seed: "s".into(),
                size: 12_345,
            };
            assert_eq!(c.bytes().len(), 12_345);
            assert_eq!(c.bytes(), c.bytes());
        }
    }

    /// How well each kind compresses (zstd, as the fixture's RPMs are):
    /// executables about 2:1, text about 3:1, compressed data not at all.
    #[test]
    fn kinds_compress_like_what_they_imitate() {
        let ratio = |kind| {
            let c = Content {
                kind,
                seed: "ratio".into(),
                size: 1 << 20,
            };
            let packed = zstd::bulk::compress(&c.bytes(), 3).unwrap();
            c.size as f64 / packed.len() as f64
        };
        let (bin, text, packed) = (
            ratio(Kind::Binary),
            ratio(Kind::Text),
            ratio(Kind::Compressed),
        );
        assert!((1.6..2.6).contains(&bin), "binary {bin:.2}");
        assert!((2.5..4.5).contains(&text), "text {text:.2}");
        assert!(packed < 1.01, "compressed {packed:.2}");
    }
}
