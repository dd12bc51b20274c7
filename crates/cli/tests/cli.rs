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

    // A malformed --var, an unknown or repeated platform exited 1.
    for args in [
        &["compose", "m.yaml", "--var", "nokey"][..],
        &["disk", "--image", "x", "--platform", "aws"],
        &["disk", "--image", "x", "--platform", "qemu,qemu"],
    ] {
        let out = strata().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// -v/-q set the log level over RUST_LOG, --log-format json makes each log
/// line a JSON object; a failure's `error:` line is printed whatever the
/// level; a command that fails before doing anything leaves no workdir.
#[test]
fn log_flags_set_level_and_format() {
    strata_testdistro::require_root("strata composes and derives here");
    let f = Fixture::for_tests().unwrap();
    let fixture = |extra: &[&str]| {
        let out = strata()
            .args(extra)
            .args(["fixture", "--out"])
            .arg(&f.root)
            .env("RUST_LOG", "info")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let plain = fixture(&[]);
    assert!(plain.contains("is current"), "{plain}");
    assert!(fixture(&["-q"]).is_empty());
    let json = fixture(&["--log-format", "json"]);
    for line in json.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["level"], "INFO", "{line}");
    }
    assert!(json.contains("is current"), "{json}");
    // -v and -q together are a usage error.
    let out = strata()
        .args(["-v", "-q", "fixture", "--out", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    let out = strata()
        .args(["-qq", "inspect", "nope", "--workdir"])
        .arg(&w)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        format!(
            "error: inspecting oci:{w}/oci:nope: {w}/oci is not an OCI image layout: no such directory\n",
            w = w.display()
        )
    );
    assert!(!w.exists(), "a failed inspect created its workdir");
}

/// With --json, a failure is one JSON object on stdout as well as the
/// `error:` line on stderr, so that a CI job can parse it.
#[test]
fn json_failures_are_one_object_on_stdout() {
    let d = tempfile::tempdir().unwrap();
    for (args, kind, code) in [
        (
            vec!["disk", "--image", "x", "--platform", "qemu,qemu", "--json"],
            "usage",
            2,
        ),
        (
            vec!["compose", "m.yaml", "--var", "nokey", "--json"],
            "usage",
            2,
        ),
        (
            vec!["inspect", "--json", "oci:/nonexistent/oci:x"],
            "failure",
            1,
        ),
    ] {
        let out = strata().args(&args).current_dir(d.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout.lines().count(), 1, "{args:?}: {stdout}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["kind"], kind, "{args:?}");
        let error = v["error"].as_str().unwrap();
        assert!(!error.is_empty() && !error.contains('\n'), "{error}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.lines().last().unwrap().starts_with("error: "),
            "{stderr}"
        );
    }
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

/// An ordinary user without subordinate ids (nobody) cannot hold an
/// image's users: compose says what to add, in one line, before it
/// creates anything.
#[test]
fn an_ordinary_user_without_subordinate_ids_is_told_what_to_add() {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(d.path(), Some(65534), Some(65534)).unwrap();
    let w = d.path().join("w");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_strata"))
        .args(["compose", "--json", "--workdir"])
        .arg(&w)
        .arg(demo_manifest())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: strata compose as an ordinary user needs")
            && stderr.contains("/etc/subuid")
            && stderr.contains("or run as root"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["kind"], "failure");
    assert!(!w.exists(), "nothing is created");
}

/// Runs `cmd` until a stderr line contains `marker`, then SIGKILLs it.
fn kill_at(cmd: &mut Command, marker: &'static str) {
    let mut child = cmd
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            if line.unwrap_or_default().contains(marker) {
                return true;
            }
        }
        false
    });
    let started = Instant::now();
    while !reader.is_finished() && started.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(reader.join().unwrap(), "never reached {marker:?}");
}

/// What a killed build must not have changed: records, tags, refs.
fn assert_nothing_recorded(w: &Path, marker: &str) {
    assert!(
        !w.join("history.json").exists(),
        "killed at {marker:?}: a build was recorded"
    );
    let tags = strata_oscontainer::list_tags(&w.join("oci")).unwrap_or_default();
    assert!(tags.is_empty(), "killed at {marker:?}: tagged {tags:?}");
    if w.join("repo/config").exists() {
        let refs = strata_process::stdout(
            Command::new("ostree")
                .arg(format!("--repo={}", w.join("repo").display()))
                .arg("refs"),
        )
        .unwrap();
        assert_eq!(refs.trim(), "", "killed at {marker:?}: refs moved");
    }
}

/// SIGKILL while a compose installs, and while it encapsulates its
/// commit (written, not yet recorded), then compose again: the killed runs
/// recorded, tagged and referenced nothing, and the next one succeeds and
/// leaves no staging and no unreferenced blob.
#[test]
fn killed_compose_leaves_the_workdir_as_it_was() {
    strata_testdistro::require_root("strata composes and derives here");
    let f = Fixture::for_tests().unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    for marker in ["composing rhel-8.6", "committed "] {
        kill_at(&mut compose_cmd(&f, &w), marker);
        assert_nothing_recorded(&w, marker);
    }

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
    assert_eq!(
        strata_oscontainer::prune(&w.join("oci")).unwrap().blobs,
        0,
        "abandoned blobs removed"
    );

    let out = compose_cmd(&f, &w).arg("--json").output().unwrap();
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["changed"], false);
    assert_eq!(again["ostree_commit"], v["ostree_commit"]);
}

/// `inspect` and `diff` show what an image says, and an image can say
/// anything: a label with a newline and a terminal escape is printed on
/// one line, escaped, and neither command writes anywhere (the current
/// directory, where the default workdir would be, stays empty).
#[test]
fn inspect_and_diff_of_a_hostile_image_escape_it_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    std::fs::create_dir_all(tree.join("usr/lib")).unwrap();
    std::fs::write(tree.join("usr/lib/os-release"), "NAME=x\nID=x\n").unwrap();
    let repo = d.path().join("repo");
    let ostree = |args: &[&str]| {
        strata_process::stdout(
            Command::new("ostree")
                .arg(format!("--repo={}", repo.display()))
                .args(args),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    ostree(&["init", "--mode=bare-user"]);
    let commit = ostree(&[
        "commit",
        "--orphan",
        "--owner-uid=0",
        "--owner-gid=0",
        &format!("--tree=dir={}", tree.display()),
    ]);
    let mut eopts = strata_oscontainer::EncapsulateOptions::default();
    for (k, v) in [
        ("org.opencontainers.image.version", "1\n  evil-line"),
        ("com.coreos.openshift-version", "4.13\noptions init=/bin/sh"),
        ("x.title", "\x1b]0;owned\x07\x1b[2J"),
    ] {
        eopts.labels.insert(k.into(), v.into());
    }
    let oci = d.path().join("oci");
    strata_oscontainer::encapsulate(&repo, commit.trim(), &oci, "hostile", &eopts).unwrap();
    let image = format!("oci:{}:hostile", oci.display());

    let cwd = d.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    for args in [
        vec!["inspect", image.as_str()],
        vec!["diff", image.as_str(), image.as_str()],
        vec!["inspect", "--json", image.as_str()],
    ] {
        let out = strata().args(&args).current_dir(&cwd).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(!stdout.contains('\x1b'), "{args:?}: {stdout}");
        assert!(
            !stdout
                .lines()
                .any(|l| l.starts_with("options") || l.trim() == "evil-line"),
            "{args:?}: {stdout}"
        );
        if args.contains(&"--json") {
            let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(
                v["labels"]["com.coreos.openshift-version"],
                "4.13\noptions init=/bin/sh"
            );
        }
    }
    assert!(std::fs::read_dir(&cwd).unwrap().next().is_none());
}

/// Records, tags, refs and build files of a workdir: what a killed
/// command must leave as it was.
fn workdir_state(w: &Path) -> (String, Vec<String>, String, Vec<String>) {
    let builds = std::fs::read_to_string(w.join("history.json")).unwrap_or_default();
    let tags = strata_oscontainer::list_tags(&w.join("oci"))
        .unwrap_or_default()
        .into_iter()
        .map(|t| format!("{} {}", t.tag, t.manifest_digest))
        .collect();
    let refs = strata_process::stdout(
        Command::new("ostree")
            .arg(format!("--repo={}", w.join("repo").display()))
            .args(["refs", "--list"]),
    )
    .unwrap();
    let mut files = Vec::new();
    let mut stack = vec![w.join("builds")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                files.push(e.path().strip_prefix(w).unwrap().display().to_string());
            }
        }
    }
    files.sort();
    (builds, tags, refs, files)
}

/// SIGKILL at several points of derive (installing; writing the layer and
/// the commit) and of disk (deploying; writing the disks): the workdir's
/// records, tags, refs and build files are what they were, and the next
/// runs succeed and leave no staging behind.
#[test]
fn killed_derive_and_disk_leave_the_workdir_as_it_was() {
    strata_testdistro::require_root("strata composes and derives here");
    let f = Fixture::for_tests().unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    let out = compose_cmd(&f, &w).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let base: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let base_tag = base["image"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let derive_cmd = || {
        let mut cmd = strata();
        cmd.arg("derive")
            .arg("--workdir")
            .arg(&w)
            .args(["--base", &base_tag])
            .arg(demo_manifest().with_file_name("ocp-4.13.yaml"))
            .arg("--var")
            .arg(format!("fixture={}", f.root.display()));
        cmd
    };
    let before = workdir_state(&w);
    for marker in ["installing", "unchanged copy-ups pruned"] {
        kill_at(&mut derive_cmd(), marker);
        assert_eq!(workdir_state(&w), before, "derive killed at {marker:?}");
    }
    let out = derive_cmd().arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let derived: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let image = derived["image"].as_str().unwrap().to_string();

    let disk_cmd = || {
        let mut cmd = strata();
        cmd.arg("disk")
            .arg("--workdir")
            .arg(&w)
            .args(["--image", &image, "--platform", "qemu"]);
        cmd
    };
    let before = workdir_state(&w);
    for marker in ["deploying", "deployed"] {
        kill_at(&mut disk_cmd(), marker);
        assert_eq!(workdir_state(&w), before, "disk killed at {marker:?}");
    }
    let out = disk_cmd().arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_dir(w.join("tmp")).unwrap().count(), 0);
    assert_eq!(
        strata_oscontainer::prune(&w.join("oci")).unwrap().blobs,
        0,
        "abandoned blobs removed"
    );
}

/// Every entry under `dir`, recursively, with its type: what a command
/// that only reads must leave as it was.
fn tree_of(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            out.push(format!(
                "{} {}",
                e.path().strip_prefix(dir).unwrap().display(),
                if t.is_dir() { "dir" } else { "file" }
            ));
            if t.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// `list` and `prune` on a damaged workdir (`tmp` a regular file) tried to
/// create its directories and failed with "File exists": read-only
/// commands create nothing, and a damaged workdir is one error line
/// naming the part that is wrong.
#[test]
fn list_and_prune_on_a_damaged_workdir_create_nothing_and_name_the_damage() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    std::fs::create_dir(&w).unwrap();
    std::fs::write(w.join("history.json"), r#"{"builds": []}"#).unwrap();
    // Only a history: list and a dry prune read it and create nothing.
    let before = tree_of(&w);
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["prune", "--keep", "1", "--dry-run"],
    ] {
        let out = strata()
            .args(&args)
            .arg("--workdir")
            .arg(&w)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(tree_of(&w), before, "{args:?} created something");
    }

    std::fs::write(w.join("tmp"), "not a directory").unwrap();
    let before = tree_of(&w);
    for args in [
        vec!["list"],
        vec!["prune", "--keep", "1", "--dry-run"],
        vec!["prune", "--keep", "1"],
    ] {
        let out = strata()
            .args(&args)
            .arg("--workdir")
            .arg(&w)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ")
                && stderr.contains(&format!(
                    "{} is a regular file, not a directory",
                    w.join("tmp").display()
                ))
                && !stderr.contains("File exists"),
            "{args:?}: {stderr}"
        );
        assert_eq!(tree_of(&w), before, "{args:?} created something");
    }
}

/// A compose SIGKILLed while its install ran left the install job's files
/// in `/tmp/strata-dnf-job-*` (the install root, the rpm macros), where
/// nothing removes them: they are in the workdir's `tmp/`, and the
/// workdir's next writer removes them.
#[test]
fn a_killed_install_leaves_its_job_files_in_the_workdir_for_the_next_writer() {
    strata_testdistro::require_root("strata composes here");
    let f = Fixture::for_tests().unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    let host_tmp = d.path().join("host-tmp");
    std::fs::create_dir(&host_tmp).unwrap();
    // The worker's command line names the job file once it is written.
    kill_at(compose_cmd(&f, &w).env("TMPDIR", &host_tmp), "job.json");
    assert_eq!(
        tree_of(&host_tmp),
        Vec::<String>::new(),
        "the host's temporary directory is left alone"
    );
    let left: Vec<String> = tree_of(&w.join("tmp"))
        .into_iter()
        .filter(|e| e.ends_with("job.json file"))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with("dnf-job-"), "{left:?}");
    // The next writer.
    let wd = strata_workdir::Workdir::open(&w).unwrap();
    drop(wd.lock().unwrap());
    assert_eq!(tree_of(&w.join("tmp")), Vec::<String>::new());
}

/// A bad --artifact-url exited 1 where the other usage errors exit 2; a
/// URL with a password or a `..` segment, or one of 2049 characters, was
/// taken (and would have been published in stream.json).
#[test]
fn a_bad_artifact_url_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    let long = format!("https://m.example/{}", "a".repeat(2031));
    for url in [
        "ftp://m.example/x",
        "https://user:secret@m.example/rhcos",
        "https://m.example/rhcos/../x",
        long.as_str(),
    ] {
        let out = strata()
            .args(["disk", "--image", "x", "--platform", "qemu", "--workdir"])
            .arg(d.path().join("w"))
            .args(["--artifact-url", url])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}: {out:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{url}: {stderr}");
        assert!(stderr.starts_with("error: --artifact-url: "), "{stderr}");
        assert!(stderr.len() < 300, "the URL is cut: {stderr}");
        assert!(out.stdout.is_empty());
        assert!(!d.path().join("w").exists(), "{url}: a workdir was made");
    }
}

/// A newline inside a package name of a lockfile printed a second
/// `error:` line; the lockfile is refused before anything is done.
#[test]
fn a_newline_in_a_lockfile_package_name_prints_one_error_line() {
    let d = tempfile::tempdir().unwrap();
    let lock = d.path().join("lock.json");
    std::fs::write(
        &lock,
        "{\"packages\": {\"bash\\nerror: forged\": {\"evr\": \"1-1\"}}}",
    )
    .unwrap();
    let out = strata()
        .args(["compose", "--workdir"])
        .arg(d.path().join("w"))
        .arg(demo_manifest())
        .arg("--lockfile")
        .arg(&lock)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(
        errors,
        [format!(
            "error: {}: `bash\\nerror: forged` is not a package name (letters, digits, `-._+`)",
            lock.display()
        )],
        "{stderr}"
    );
    assert!(!d.path().join("w").exists(), "a workdir was made");
}
