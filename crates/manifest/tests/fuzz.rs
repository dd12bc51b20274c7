//! Property test of the manifest parser: the shipped demo manifests,
//! mutated at random (bytes flipped, lines duplicated, dropped or
//! swapped, YAML punctuation inserted), always load to `Ok` or to one
//! error line naming the file, never a panic. 64 cases in `make test`;
//! `make fuzz` runs more (`PROPTEST_CASES`); `STRATA_FUZZ_SEED` replays.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_manifest::{BaseManifest, PipelineManifest, ReleaseManifest, Vars};

fn cases() -> usize {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

const INSERTS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    ":",
    "- ",
    "\n",
    "  ",
    "&a ",
    "*a",
    "!!str ",
    "${",
    "${fixture}",
    "'",
    "\"",
    "#",
    ",",
    "include: x.yaml\n",
    "\t",
    "\u{0}",
    "<<: *a\n",
    "? ",
];

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
                let l = &mut lines[i];
                let at = (0..=l.len())
                    .filter(|&k| l.is_char_boundary(k))
                    .nth(rng.gen_range(0..=l.chars().count()))
                    .unwrap_or(0);
                l.insert_str(at, INSERTS[rng.gen_range(0..INSERTS.len())]);
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
fn mutated_manifests_never_panic_and_fail_on_one_line() {
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
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo");
    let vars = Vars::from_assignments(["fixture=/fixture"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The demo manifests with their siblings, so that includes resolve.
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(demo.join("."))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copied.success());
    let (mut ok, mut refused) = (0, 0);
    for i in 0..cases() {
        for name in ["rhel-8.6.yaml", "ocp-4.13.yaml", "pipeline.yaml"] {
            let original = std::fs::read_to_string(demo.join(name)).unwrap();
            let path = dir.path().join(format!("fuzz-{name}"));
            std::fs::write(&path, mutate(&mut rng, &original)).unwrap();
            let result = match name {
                "rhel-8.6.yaml" => BaseManifest::load(&path, &vars).map(|_| ()),
                "ocp-4.13.yaml" => ReleaseManifest::load(&path, &vars).map(|_| ()),
                _ => PipelineManifest::load(&path, &vars).map(|_| ()),
            };
            match result {
                Ok(()) => ok += 1,
                Err(e) => {
                    refused += 1;
                    let text = e.to_string();
                    assert!(!text.contains('\n'), "case {i} {name}: {text:?}");
                    assert!(
                        text.contains(".yaml") || text.contains(".repo"),
                        "case {i} {name}: {text}"
                    );
                }
            }
        }
    }
    eprintln!("{ok} loaded, {refused} refused");
}
