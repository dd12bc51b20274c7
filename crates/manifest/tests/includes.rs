//! Include chains, cycles and file references on a real filesystem.

use std::fs;
use std::path::{Path, PathBuf};

use strata_manifest::{BaseManifest, FileRole, InputKind, ManifestError, ReleaseManifest, Vars};

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        Tree { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn base(&self, rel: &str) -> Result<strata_manifest::Loaded<BaseManifest>, ManifestError> {
        BaseManifest::load(&self.path(rel), &Vars::new())
    }
}

const HEAD: &str = "\
edition: 1
name: rhel-8.6
osname: rhcos
releasever: \"8\"
version-prefix: \"8.6.<date:%Y%m%d>\"
";

const REPOS: &str = "\
repos:
  - id: baseos
    baseurl: file:///srv/baseos
inputs:
  repos: [baseos]
  keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]
";

#[test]
fn a_chain_of_includes_merges_in_order() {
    let tree = Tree::new(&[
        ("top/base.yaml", &format!("{HEAD}include: ../shared/packages.yaml\npackages: [top]\nunits: [top.service]\n")),
        ("shared/packages.yaml", "include: [repos.yaml, more/extra.yaml]\npackages: [middle, bottom]\nrecommends: true\n"),
        ("shared/repos.yaml", REPOS),
        ("shared/more/extra.yaml", "packages: [bottom, extra]\nrecommends: false\nunits: [extra.service]\nadd-files:\n  - {src: files/motd, dest: /etc/motd, mode: \"0644\"}\n"),
        ("shared/more/files/motd", "welcome\n"),
    ]);
    let loaded = tree.base("top/base.yaml").unwrap();
    let m = loaded.manifest;
    // repos.yaml, then extra.yaml, then packages.yaml, then base.yaml.
    assert_eq!(m.packages, ["bottom", "extra", "middle", "top"]);
    assert_eq!(m.units, ["extra.service", "top.service"]);
    // packages.yaml is applied after extra.yaml, which it includes.
    assert!(m.recommends);
    // src is relative to the file that names it.
    assert_eq!(m.add_files[0].src, tree.path("shared/more/files/motd"));
    assert_eq!(m.add_files[0].mode, Some(0o644));
    let read: Vec<(PathBuf, InputKind)> = loaded
        .files
        .iter()
        .map(|f| (f.path.clone(), f.kind))
        .collect();
    assert_eq!(
        read,
        [
            (tree.path("top/base.yaml"), InputKind::Manifest),
            (tree.path("shared/packages.yaml"), InputKind::Include),
            (tree.path("shared/repos.yaml"), InputKind::Include),
            (tree.path("shared/more/extra.yaml"), InputKind::Include),
            (
                tree.path("shared/more/files/motd"),
                InputKind::AddFilesSource
            ),
        ]
    );
}

#[test]
fn an_include_cycle_is_reported_with_its_chain() {
    let tree = Tree::new(&[
        ("a.yaml", &format!("{HEAD}include: b.yaml\n")),
        ("b.yaml", "include: sub/c.yaml\n"),
        ("sub/c.yaml", "packages: [x]\ninclude: ../b.yaml\n"),
    ]);
    let err = tree.base("a.yaml").unwrap_err();
    let d = tree.dir.path().display();
    assert_eq!(
        err.to_string(),
        format!("{d}/sub/c.yaml:2:10: include cycle: {d}/b.yaml -> {d}/sub/c.yaml -> {d}/b.yaml")
    );
    match err {
        ManifestError::IncludeCycle { chain, .. } => {
            assert_eq!(
                chain,
                [
                    tree.path("b.yaml"),
                    tree.path("sub/c.yaml"),
                    tree.path("b.yaml")
                ]
            )
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_cycle_back_to_the_root_names_it() {
    let tree = Tree::new(&[
        ("a.yaml", &format!("{HEAD}include: b.yaml\n")),
        ("b.yaml", "include: a.yaml\n"),
    ]);
    let err = tree.base("a.yaml").unwrap_err();
    let d = tree.dir.path().display();
    assert_eq!(
        err.to_string(),
        format!("{d}/b.yaml:1:10: include cycle: {d}/a.yaml -> {d}/b.yaml -> {d}/a.yaml")
    );
}

#[test]
fn a_missing_include_names_the_including_line() {
    let tree = Tree::new(&[
        ("a.yaml", &format!("{HEAD}include:\n  - {}\n", "b.yaml")),
        ("b.yaml", "include: [c.yaml, gone.yaml]\n"),
        ("c.yaml", "{}\n"),
    ]);
    let err = tree.base("a.yaml").unwrap_err();
    let d = tree.dir.path().display();
    assert_eq!(
        err.to_string(),
        format!("{d}/b.yaml:1:19: cannot read include `{d}/gone.yaml`")
    );
    match &err {
        ManifestError::MissingFile { role, source, .. } => {
            assert_eq!(*role, FileRole::Include);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_missing_add_files_source_names_the_line() {
    let tree = Tree::new(&[(
        "a.yaml",
        &format!("{HEAD}{REPOS}packages: [p]\nadd-files:\n  - src: files/absent\n    dest: /etc/absent\n"),
    )]);
    let err = tree.base("a.yaml").unwrap_err();
    let d = tree.dir.path().display();
    assert_eq!(
        err.to_string(),
        format!("{d}/a.yaml:14:10: cannot read add-files source `{d}/files/absent`")
    );
}

#[test]
fn an_unreadable_root_is_a_read_error() {
    let err =
        BaseManifest::load(Path::new("/nonexistent/strata/m.yaml"), &Vars::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot read manifest /nonexistent/strata/m.yaml"
    );
    assert!(matches!(err, ManifestError::Read { .. }));
}

#[test]
fn repo_files_resolve_next_to_the_file_that_names_them() {
    let tree = Tree::new(&[
        ("ocp/ocp.yaml", "edition: 1\nrelease: \"4.13\"\ninclude: ../common/repos.yaml\npackages: [cri-o]\n"),
        ("common/repos.yaml", "repos: [{file: repos/ocp.repo}]\ninputs:\n  repos: [rhocp]\n  keys: [{file: keys/ocp.asc}]\n"),
        ("common/repos/ocp.repo", "[rhocp]\nname=OCP\nbaseurl=file:///srv/rhocp/$basearch\ngpgkey=../keys/ocp.asc\n"),
    ]);
    let loaded = ReleaseManifest::load(&tree.path("ocp/ocp.yaml"), &Vars::new()).unwrap();
    let m = loaded.manifest;
    assert_eq!(m.repos[0].baseurl, ["file:///srv/rhocp/x86_64"]);
    assert_eq!(
        m.repos[0].gpgkey,
        [format!(
            "file://{}",
            tree.path("common/keys/ocp.asc").display()
        )]
    );
    assert_eq!(
        m.inputs.keys,
        [strata_manifest::KeyRef::File(
            tree.path("common/keys/ocp.asc")
        )]
    );
}

/// Regression: a manifest in a directory whose name is not UTF-8 must still
/// serialize (paths are written lossily), not panic.
#[cfg(unix)]
#[test]
fn canonical_json_survives_a_non_utf8_directory() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tree = Tree::new(&[]);
    let dir = tree.dir.path().join(OsStr::from_bytes(b"caf\xe9"));
    fs::create_dir_all(dir.join("files")).unwrap();
    fs::write(dir.join("files/motd"), "hi\n").unwrap();
    fs::write(
        dir.join("m.yaml"),
        format!("{HEAD}{REPOS}packages: [p]\nadd-files: [{{src: files/motd, dest: /etc/motd}}]\n"),
    )
    .unwrap();
    let loaded = BaseManifest::load(&dir.join("m.yaml"), &Vars::new()).unwrap();
    let json = loaded.manifest.to_canonical_json();
    assert!(json.contains("caf\u{fffd}/files/motd"), "{json}");
}

/// Parsing time was unbounded (YAML nested 200,000 deep ran for minutes, a
/// 200,000-entry list took a minute to fail), and an error about an
/// included non-manifest printed its content. Each is refused at once,
/// naming the file and the limit, and no value of the file is echoed.
#[test]
fn oversized_deep_and_foreign_files_are_refused_without_echoing_them() {
    let deep = format!(
        "{HEAD}packages: {}{}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let long = format!("{HEAD}packages:\n{}", "- a\n".repeat(30_000));
    let flow = format!("{HEAD}packages: [{}bash]\n", "a,".repeat(30_000));
    let big = format!("{HEAD}# {}\n", "x".repeat(2 << 20));
    let t = Tree::new(&[
        ("deep.yaml", &deep),
        ("long.yaml", &long),
        ("flow.yaml", &flow),
        ("big.yaml", &big),
        ("secret", "root:$6$s3cr3t-hash:19000:0:99999:7:::\n"),
        ("top.yaml", &format!("{HEAD}include: secret\n")),
        ("scalar", "\"TOKEN-abc123\"\n"),
        ("top2.yaml", &format!("{HEAD}include: scalar\n")),
    ]);
    for (file, says) in [
        ("deep.yaml", "nested more than 64 deep"),
        ("long.yaml", "more than 20000 entries"),
        ("flow.yaml", "more than 20000 entries"),
        ("big.yaml", "larger than 1048576 bytes"),
    ] {
        let started = std::time::Instant::now();
        let err = chain(&t.base(file).unwrap_err());
        assert!(err.contains(file) && err.contains(says), "{file}: {err}");
        // Not a timing test: a bound far beyond what the check takes,
        // far below what the parser took.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }
    for top in ["top.yaml", "top2.yaml"] {
        let err = t.base(top).unwrap_err().to_string();
        assert!(
            !err.contains("s3cr3t") && !err.contains("TOKEN-abc123"),
            "{top}: {err}"
        );
    }
}

/// The error and its causes on one line, as the CLI prints them.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        out.push_str(&format!(": {e}"));
        source = e.source();
    }
    out
}

/// `include: /dev/zero` read the device whole (24 GB) before the size
/// limit applied; a FIFO would wait for a writer forever. Each is refused
/// by name, without being read, as a root manifest, an include or a
/// `.repo` file.
#[test]
fn an_include_of_dev_zero_is_refused_without_reading_it() {
    let t = Tree::new(&[
        (
            "zero.yaml",
            &format!(
                "{HEAD}include: /dev/zero
"
            ),
        ),
        (
            "dir.yaml",
            &format!(
                "{HEAD}include: sub
"
            ),
        ),
        ("sub/x", ""),
        (
            "fifo.yaml",
            &format!(
                "{HEAD}include: fifo
"
            ),
        ),
        ("repo.yaml", &format!("{HEAD}repos:\n  - file: fifo\n")),
    ]);
    let made = std::process::Command::new("mkfifo")
        .arg(t.path("fifo"))
        .status()
        .expect("mkfifo (coreutils)");
    assert!(made.success());
    let d = t.dir.path().display().to_string();
    let cases = [
        (
            "zero.yaml",
            "zero.yaml:6:10: cannot read include `/dev/zero`: a character device, not a regular file".to_string(),
        ),
        (
            "dir.yaml",
            format!("dir.yaml:6:10: cannot read include `{d}/sub`: a directory, not a regular file"),
        ),
        (
            "fifo.yaml",
            format!("fifo.yaml:6:10: cannot read include `{d}/fifo`: a FIFO, not a regular file"),
        ),
        (
            "repo.yaml",
            format!("repo.yaml:7:11: cannot read repo file `{d}/fifo`: a FIFO, not a regular file"),
        ),
        (
            "fifo",
            format!("cannot read manifest {d}/fifo: a FIFO, not a regular file"),
        ),
    ];
    for (file, want) in cases {
        // On another thread: a read that waits on the FIFO fails the test
        // instead of hanging it.
        let path = t.path(file);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(BaseManifest::load(&path, &Vars::new()).map(drop));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{file}: still reading after 20 s"));
        let err = chain(&got.unwrap_err());
        assert!(err.ends_with(&want), "{file}:\n got: {err}\nwant: {want}");
    }
}

/// serde refuses a field given twice, but kept the last of two equal keys
/// of a map (`variables`) without a word.
#[test]
fn a_variable_declared_twice_in_one_mapping_is_refused() {
    let t = Tree::new(&[(
        "a.yaml",
        &format!("{HEAD}variables:\n  mirror: a\n  mirror: b\n"),
    )]);
    let err = t.base("a.yaml").unwrap_err().to_string();
    assert!(
        err.ends_with("a.yaml:7:3: variables: the key `mirror` is given twice in one mapping"),
        "{err}"
    );
}
