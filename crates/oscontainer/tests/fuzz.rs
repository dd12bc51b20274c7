//! Property tests over what images feed strata: derived layers made of
//! random entries with hostile names, kinds and link targets (and random
//! byte damage), and random label values. Whatever comes in, import ends
//! in `Ok` or an error, never a panic, and writes nothing outside its
//! repository; a label value either fails its grammar or is one safe
//! path component.
//!
//! Bounded for `make test` (64 cases each); `make fuzz` runs many more
//! (`PROPTEST_CASES`). Each run's seed is printed, and `STRATA_FUZZ_SEED`
//! replays one.

mod common;

use std::collections::BTreeMap;
use std::path::{Component, Path};

use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_oscontainer::labels::{label, LabelValue};
use strata_oscontainer::{
    encapsulate, import, CommitId, EncapsulateOptions, ImageRef, ImportOptions, KernelVersion,
    OcpVersion, OsName, Version,
};

fn cases() -> usize {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn rng(name: &str) -> ChaCha8Rng {
    let seed = std::env::var("STRATA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{name}: STRATA_FUZZ_SEED={seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

const PIECES: &[&str] = &[
    "usr",
    "etc",
    "bin",
    "lib",
    "..",
    ".",
    "",
    "sh",
    ".wh.sh",
    ".wh..wh..opq",
    ".wh.usr",
    "x",
    "passwd",
    "evil",
    "a b",
    "é",
    "\n",
    "usr/bin",
    "sysroot",
    "ostree",
    "var",
    "boot",
];

fn path(rng: &mut ChaCha8Rng) -> String {
    let n = rng.gen_range(1..=4);
    let mut parts: Vec<&str> = (0..n)
        .map(|_| PIECES[rng.gen_range(0..PIECES.len())])
        .collect();
    if rng.gen_bool(0.1) {
        parts.insert(0, "");
    }
    let mut p = parts.join("/");
    if rng.gen_bool(0.2) {
        p.push('/');
    }
    p.truncate(99);
    p
}

/// A random layer that cannot hurt the test's own machine when refused
/// correctly, and may when refused wrongly: the assertions check.
fn layer(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = rng.gen_range(1..=8);
    let mut specs = Vec::new();
    for _ in 0..n {
        let name = path(rng);
        let target = if rng.gen_bool(0.3) {
            "/".to_string()
        } else {
            path(rng)
        };
        specs.push((rng.gen_range(0..4u8), name, target));
    }
    let entries: Vec<Entry> = specs
        .iter()
        .map(|(k, name, target)| match k {
            0 => Entry::Dir(name),
            1 => Entry::File(name, b"fuzz"),
            2 => Entry::Symlink(name, target),
            _ => Entry::Hardlink(name, target),
        })
        .collect();
    let mut tar = raw_tar(&entries);
    if rng.gen_bool(0.25) {
        for _ in 0..rng.gen_range(1..=8) {
            let i = rng.gen_range(0..tar.len());
            tar[i] = rng.gen();
        }
    }
    if rng.gen_bool(0.1) {
        let cut = rng.gen_range(0..tar.len());
        tar.truncate(cut);
    }
    tar
}

#[test]
fn random_derived_layers_never_panic_and_never_write_outside_the_repository() {
    let mut rng = rng("layers");
    let fx = Fixture::new();
    let oci = fx.path("oci");
    let mut o = EncapsulateOptions::default();
    o.content = Some(content_map(false));
    encapsulate(&fx.repo, "base", &oci, "base", &o).unwrap();
    let before = outside(fx.dir.path());
    let (mut ok, mut refused) = (0, 0);
    for i in 0..cases() {
        let tag = format!("fuzz-{i}");
        append_raw_layer(&oci, "base", &tag, &layer(&mut rng), None);
        let mut opts = ImportOptions::default();
        opts.reuse_base = true;
        match import(&ImageRef::oci(&oci, &tag), &fx.repo, &opts) {
            Ok(_) => ok += 1,
            Err(e) => {
                let text = e.to_string();
                assert!(!text.is_empty());
                refused += 1;
            }
        }
        assert_eq!(outside(fx.dir.path()), before, "case {i} wrote outside");
        assert!(!Path::new("/escape").exists() && !Path::new("/evil").exists());
    }
    eprintln!("{ok} imported, {refused} refused");
    fsck(&fx.repo);
}

/// Everything in the fixture's directory but its repository and layout.
fn outside(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if rel == "repo" || rel == "oci" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(p.clone());
            }
            out.push(rel);
        }
    }
    out.sort();
    out
}

fn random_text(rng: &mut ChaCha8Rng) -> String {
    const CHARS: &[char] = &[
        'a', 'z', '0', '9', '4', '.', '1', '3', '-', '_', '+', '~', '/', '\\', ' ', '\n', '\t',
        '\x1b', '\0', 'A', 'é', ':', '*', '$', '"',
    ];
    let n = rng.gen_range(0..=12);
    let mut s: String = (0..n)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())])
        .collect();
    if rng.gen_bool(0.05) {
        s = s.repeat(20);
    }
    s
}

/// A value that passes its grammar is one normal path component and one
/// line of printable ASCII.
fn safe<T: LabelValue + AsRef<str>>(text: &str) {
    let mut labels = BTreeMap::new();
    labels.insert("l".to_string(), text.to_string());
    match label::<T>(&labels, "l") {
        Ok(Some(v)) => {
            let v = v.as_ref();
            assert_eq!(v, text);
            let parts: Vec<Component> = Path::new(v).components().collect();
            assert!(
                matches!(parts.as_slice(), [Component::Normal(_)]),
                "{text:?} is not one path component"
            );
            assert!(v.bytes().all(|b| b.is_ascii_graphic()), "{text:?}");
        }
        Ok(None) => unreachable!(),
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n') && !msg.contains('\x1b'), "{msg:?}");
        }
    }
}

#[test]
fn label_values_are_refused_or_safe() {
    let mut rng = rng("labels");
    for _ in 0..cases() * 64 {
        let text = random_text(&mut rng);
        safe::<OsName>(&text);
        safe::<OcpVersion>(&text);
        safe::<Version>(&text);
        safe::<KernelVersion>(&text);
        safe::<CommitId>(&text);
    }
}
