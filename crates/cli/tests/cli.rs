//! The `strata` binary as users and CI run it: exit codes, `--json` on
//! stdout, and an interrupted compose that leaves the workdir usable.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strata_testdistro::Fixture;

fn strata() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata"))
}

fn demo_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo/rhel-8.6.yaml")
}

fn compose_cmd(f: &Fixture, w: &Path) -> Command {
    let mut cmd = strata();
    cmd.arg("compose")
        .arg("--workdir")
        .arg(w)
        .arg(demo_manifest())
        .arg("--var")
        .arg(format!("fixture={}", f.root.display()));
    cmd
}

#[test]
fn usage_errors_exit_2() {
    let out = strata()
        .args(["compose", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = strata().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn failures_exit_1_with_one_error_line() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m.yaml");
    std::fs::write(&m, "edition: 1\nname: x\nbogus: 1\n").unwrap();
    let out = strata()
        .args(["compose", "--workdir"])
        .arg(d.path().join("w"))
        .arg(&m)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: ") && last.contains("m.yaml:3:1") && last.contains("bogus"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// SIGKILL in the middle of a compose, then compose again: the workdir
/// records nothing from the killed run and the next one succeeds.
#[test]
fn killed_compose_leaves_the_workdir_usable() {
    let f = Fixture::for_tests().unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    let mut child = compose_cmd(&f, &w)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it is installing, then kill it.
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            if line.unwrap_or_default().contains("composing rhel-8.6") {
                return true;
            }
        }
        false
    });
    let started = Instant::now();
    while !reader.is_finished() && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(reader.join().unwrap(), "compose never reached the install");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !w.join("builds/builds.json").exists(),
        "the killed compose recorded a build"
    );

    let out = compose_cmd(&f, &w).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["changed"], true);
    assert!(v["version"].as_str().unwrap().starts_with("8.6."));
    assert_eq!(v["ostree_commit"].as_str().unwrap().len(), 64);
    assert_eq!(
        std::fs::read_dir(w.join("tmp")).unwrap().count(),
        0,
        "staging cleaned"
    );

    let out = compose_cmd(&f, &w).arg("--json").output().unwrap();
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["changed"], false);
    assert_eq!(again["ostree_commit"], v["ostree_commit"]);
}
