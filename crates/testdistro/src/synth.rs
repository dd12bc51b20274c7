//! Deterministic synthetic file content.
//!
//! Ordinary fixture packages carry made-up binaries and data. Their bytes
//! come from a seeded generator so that the fixture is reproducible, and mix
//! random and repetitive runs so that they compress roughly like real
//! executables (about 2:1), which matters for layer-size measurements.

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
    }
}
