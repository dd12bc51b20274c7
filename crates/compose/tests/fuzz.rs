//! Property test of the lockfile and overrides-file reader: an
//! rpm-ostree lockfile (JSON) and a coreos-assembler overrides file
//! (YAML), mutated at random (lines duplicated, dropped or swapped, JSON
//! and YAML punctuation, control characters, deep nesting and long values
//! inserted), always load to `Ok` or to one error line naming the file,
//! quickly, never a panic; what loads means something (every entry names
//! a version). 64 cases in `make test`; `make fuzz` runs more
//! (`PROPTEST_CASES`); `STRATA_FUZZ_SEED` replays.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_compose::{Lockfile, Overrides};

fn cases() -> usize {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

const LOCKFILE: &str = r#"{
  "packages": {
    "bash": {
      "evra": "4.4.20-4.el8_6.x86_64",
      "digest": "sha256:8d3f0e9c9b0f0b7d3f0e9c9b0f0b7d3f0e9c9b0f0b7d3f0e9c9b0f0b7d3f0e9c",
      "metadata": {"sourcerpm": "bash", "repo": "rhel-8.6-baseos"}
    },
    "gmp": {"evr": "1:6.1.2-10.el8"},
    "kernel-core": {"evra": "4.18.0-372.9.1.el8.x86_64"}
  },
  "metadata": {
    "generated": "2026-10-15T00:00:00Z",
    "rpmmd_repos": {"rhel-8.6-baseos": {"generated": "2026-10-15T00:00:00Z"}}
  }
}
"#;

const OVERRIDES: &str = "\
packages:
  bash:
    evr: 4.4.20-5.el8_6
    metadata:
      type: fast-track
      reason: https://issues.example/1
  kernel:
    evra: 4.18.0-372.9.1.el8.x86_64
";

/// Pieces that make a parser work: punctuation, control characters,
/// nesting and sizes near the limits, keys given twice.
fn insert(rng: &mut ChaCha8Rng) -> String {
    const FIXED: &[&str] = &[
        "[",
        "]",
        "{",
        "}",
        ":",
        ",",
        "\"",
        "'",
        "\\",
        "- ",
        "\n",
        "  ",
        "\t",
        "#",
        "&a ",
        "*a",
        "!!str ",
        "? ",
        "\u{0}",
        "\u{1b}[31m",
        "\r",
        "\"bash\": {\"evr\": \"1-1\"},",
        "  bash:\n    evr: 1-1\n",
        "\"evra\": \"*\",",
        "generated: not-a-date\n",
        "null",
        "~",
        "1e999",
        "-0",
        "\u{feff}",
    ];
    match rng.gen_range(0..6) {
        0 => {
            let n = rng.gen_range(1..200);
            format!("{}{}", "[".repeat(n), "]".repeat(rng.gen_range(0..=n)))
        }
        1 => "x".repeat(rng.gen_range(1..200_000)),
        2 => "a,".repeat(rng.gen_range(1..25_000)),
        _ => FIXED[rng.gen_range(0..FIXED.len())].to_string(),
    }
}

fn mutate(rng: &mut ChaCha8Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..rng.gen_range(1..=6) {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let i = rng.gen_range(0..lines.len());
        match rng.gen_range(0..5) {
            0 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            1 => {
                lines.remove(i);
            }
            2 => {
                let j = rng.gen_range(0..lines.len());
                lines.swap(i, j);
            }
            3 => {
                let piece = insert(rng);
                let l = &mut lines[i];
                let at = (0..=l.len())
                    .filter(|&k| l.is_char_boundary(k))
                    .nth(rng.gen_range(0..=l.chars().count()))
                    .unwrap_or(0);
                l.insert_str(at, &piece);
            }
            _ => {
                let mut bytes = std::mem::take(&mut lines[i]).into_bytes();
                if !bytes.is_empty() {
                    let k = rng.gen_range(0..bytes.len());
                    bytes[k] = rng.gen_range(0x20..0x7f);
                }
                lines[i] = String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }
    lines.join("\n")
}

#[test]
fn mutated_lockfiles_and_overrides_files_never_panic_and_fail_on_one_line() {
    let seed = std::env::var("STRATA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("STRATA_FUZZ_SEED={seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let (mut ok, mut refused) = (0, 0);
    for i in 0..cases() {
        for (name, original) in [
            ("manifest-lock.x86_64.json", LOCKFILE),
            ("manifest-lock.overrides.yaml", OVERRIDES),
        ] {
            let path = dir.path().join(format!("fuzz-{name}"));
            std::fs::write(&path, mutate(&mut rng, original)).unwrap();
            let started = Instant::now();
            let result = match name {
                "manifest-lock.x86_64.json" => Lockfile::load(&path),
                _ => Overrides::load(std::slice::from_ref(&path)).map(|o| o.lock),
            };
            // Not a timing test: far beyond what a bounded read and parse
            // take, far below what unbounded nesting took.
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "case {i} {name}: {:?}",
                started.elapsed()
            );
            match result {
                Ok(lock) => {
                    ok += 1;
                    for (package, p) in &lock.packages {
                        assert!(
                            p.evra.is_some() != p.evr.is_some(),
                            "case {i} {name}: {package} loaded without one version"
                        );
                        assert!(
                            !package.chars().any(char::is_control),
                            "case {i} {name}: {package:?}"
                        );
                    }
                }
                Err(e) => {
                    refused += 1;
                    let text = format!("{e:#}");
                    assert!(!text.contains('\n'), "case {i} {name}: {text:?}");
                    assert!(text.contains(name), "case {i} {name}: {text}");
                    assert!(text.len() < 2000, "case {i} {name}: {} bytes", text.len());
                }
            }
        }
    }
    eprintln!("{ok} loaded, {refused} refused");
}
