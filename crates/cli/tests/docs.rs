//! docs/cli.md, the man pages and the completions are what the clap
//! definitions generate: a flag added, renamed or reworded without
//! regenerating them fails here.
//! `STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs` rewrites it.

use std::path::Path;

#[test]
fn cli_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let generated = strata_cli::docs::markdown();
    if std::env::var_os("STRATA_REGENERATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != generated {
        let line = current
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(current.lines().count().min(generated.lines().count()));
        panic!(
            "docs/cli.md is out of date (first difference at line {}); regenerate it with \
             STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs",
            line + 1
        );
    }
}

/// `dir` holds exactly `files`, byte for byte (or, regenerating, is made to).
fn check_dir(dir: &str, files: Vec<(String, Vec<u8>)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    if std::env::var_os("STRATA_REGENERATE_DOCS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        return;
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut wanted: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    wanted.sort();
    assert_eq!(
        on_disk,
        wanted,
        "{} is out of date; regenerate it with STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs",
        dir.display()
    );
    for (name, bytes) in files {
        assert!(
            std::fs::read(dir.join(&name)).unwrap() == bytes,
            "{}/{name} is out of date; regenerate it with STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs",
            dir.display()
        );
    }
}

#[test]
fn man_pages_are_current() {
    let pages = strata_cli::docs::man_pages();
    for want in ["strata.1", "strata-compose.1", "strata-node-update.1"] {
        assert!(pages.iter().any(|(n, _)| n == want), "{want}");
    }
    assert!(
        !pages.iter().any(|(n, _)| n.contains("__")),
        "hidden commands have no page"
    );
    check_dir("docs/man", pages);
}

#[test]
fn completions_are_current() {
    let scripts = strata_cli::docs::completions();
    let bash = String::from_utf8(scripts[0].1.clone()).unwrap();
    assert!(
        bash.contains("--flavour"),
        "bash completes the fixture's flags"
    );
    check_dir("completions", scripts);
}

/// `make install` puts the binary, every man page and the completions under
/// the prefix (the binary under test stands in for the release build).
#[test]
fn make_install_installs_under_the_prefix() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let prefix = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("make")
        .current_dir(&root)
        .args(["-o", "build", "install"])
        .arg(format!("PREFIX={}", prefix.path().display()))
        .arg(format!("STRATA={}", env!("CARGO_BIN_EXE_strata")))
        .output()
        .expect("make (Debian package make) runs");
    assert!(out.status.success(), "{out:?}");
    let p = prefix.path();
    assert!(p.join("bin/strata").is_file());
    for (name, _) in strata_cli::docs::man_pages() {
        assert!(p.join("share/man/man1").join(&name).is_file(), "{name}");
    }
    for file in [
        "share/bash-completion/completions/strata",
        "share/zsh/site-functions/_strata",
        "share/fish/vendor_completions.d/strata.fish",
    ] {
        assert!(p.join(file).is_file(), "{file}");
    }
}
