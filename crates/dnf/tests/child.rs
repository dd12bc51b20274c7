//! Process-level behaviour: two contexts in one process are serialised by
//! the process-wide lock, and installs run in parallel in child processes
//! (`strata-dnf-child`, as the CLI starts itself as a worker).

mod common;

use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{fixture, require_root, rpm_qa};
use strata_dnf::job::{run_in_child, InstallJob};
use strata_dnf::{DepsolveRequest, Dnf, DnfOptions, Error};
use strata_process::worker::Worker;

/// The child: the crate's own worker binary, serving one job.
fn child() -> Worker {
    Worker::new(env!("CARGO_BIN_EXE_strata-dnf-child"))
}

/// Where a test's jobs write their files (a workdir's staging, in a
/// build).
fn scratch_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join("strata-dnf-tests-jobs");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A SIGKILLed build left `/tmp/strata-dnf-job-*/job.json` (the install
/// root and rpm macros) behind, where no strata process looks again: the
/// job's files are written under the scratch directory the caller gives
/// (its workdir's staging, which the workdir's next writer removes when
/// abandoned), and removed when the job ends.
#[test]
fn a_jobs_files_are_written_in_the_callers_scratch_not_in_tmp() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("where");
    // A worker that says where its job file is and fails.
    let worker = Worker::new("sh")
        .arg("-c")
        .arg(r#"cp "$1" "$REC.json"; printf %s "$1" > "$REC"; exit 3"#)
        .arg("worker")
        .env("REC", &record);
    let job = InstallJob::new(
        DnfOptions::new("/install/root", "/cache", "8"),
        vec![],
        DepsolveRequest::install(["bash"]),
    );
    let work = scratch.path().join("tmp");
    std::fs::create_dir(&work).unwrap();
    let err = run_in_child(&worker, &work, &job).unwrap_err();
    assert!(matches!(err, Error::Child { .. }), "{err}");
    let job_file = std::path::PathBuf::from(std::fs::read_to_string(&record).unwrap());
    assert!(job_file.starts_with(&work), "{}", job_file.display());
    assert!(
        std::fs::read_to_string(record.with_extension("json"))
            .unwrap()
            .contains("/install/root"),
        "the job file is the job"
    );
    assert!(!job_file.exists(), "removed once the job ended");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn contexts_in_one_process_are_serialized() {
    let f = fixture();
    let first = Dnf::new(f.options("serial-a"), vec![f.base()]).unwrap();
    let (tx, rx) = mpsc::channel();
    let opts = f.options("serial-b");
    let base = f.base();
    let second = thread::spawn(move || {
        let dnf = Dnf::new(opts, vec![base]).unwrap();
        tx.send(Instant::now()).unwrap();
        drop(dnf);
    });
    thread::sleep(Duration::from_millis(500));
    assert!(
        rx.try_recv().is_err(),
        "a second context was created while the first was alive"
    );
    let dropped_at = Instant::now();
    drop(first);
    let created_at = rx.recv().unwrap();
    assert!(created_at >= dropped_at);
    second.join().unwrap();
}

#[test]
fn parallel_installs_in_child_processes_share_one_cache() {
    require_root();
    let f = fixture();
    let (root_a, cache) = f.scratch("child-a");
    let (root_b, _) = f.scratch("child-b");
    let job = |root: &Path, pkgs: &[&str]| {
        InstallJob::new(
            DnfOptions::new(root, &cache, "8"),
            vec![f.base()],
            DepsolveRequest::install(pkgs.iter().copied()),
        )
    };
    let jobs = [job(&root_a, &["hello"]), job(&root_b, &["greeting-data"])];
    let start = Instant::now();
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|j| thread::spawn(move || run_in_child(&child(), &scratch_dir(), &j)))
        .collect();
    let reports: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    eprintln!("two parallel child installs: {:?}", start.elapsed());
    assert_eq!(reports[0].packages.len(), 4);
    assert_eq!(
        rpm_qa(&root_a),
        [
            "busybox-sh-1.35-1.x86_64",
            "filesystem-1.0-1.noarch",
            "greeting-data-2.0-1.noarch",
            "hello-1.0-1.x86_64"
        ]
    );
    assert_eq!(rpm_qa(&root_b), ["greeting-data-2.0-1.noarch"]);
    assert_eq!(
        std::fs::read_to_string(root_a.join("var/lib/hello/post-ran")).unwrap(),
        "hello post 1\n"
    );

    // A failing child reports libdnf's error text back to the parent.
    let (root_c, _) = f.scratch("child-c");
    let err = run_in_child(
        &child(),
        &scratch_dir(),
        &job(&root_c, &["no-such-package"]),
    )
    .unwrap_err();
    match &err {
        Error::Child { message, .. } => assert!(
            message.contains("no package matches 'no-such-package'"),
            "{message}"
        ),
        other => panic!("expected a child error, got {other:?}"),
    }
}

/// A job holds its child to the plan: the NEVRAs the caller checked, and
/// the time rpm stamps the headers with, given in the child's environment
/// only.
#[test]
fn a_child_installs_the_plan_with_the_jobs_header_time() {
    require_root();
    let f = fixture();
    let (root, cache) = f.scratch("child-plan");
    let job = InstallJob::new(
        DnfOptions::new(&root, &cache, "8"),
        vec![f.base()],
        DepsolveRequest::install(["greeting-data"]),
    );
    let err = run_in_child(
        &child(),
        &scratch_dir(),
        &job.clone()
            .expecting(["greeting-data-1.0-1.noarch".to_string()]),
    )
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(
            "resolved differently from the plan: resolved [greeting-data-2.0-1.noarch], \
             planned [greeting-data-1.0-1.noarch]"
        ),
        "{message}"
    );
    // Refused before the transaction: nothing was installed.
    assert!(!root.join("var/lib/rpm").exists() || rpm_qa(&root).is_empty());
    // The same job in this process, whose environment lacks the time,
    // refuses to run.
    let timed = job
        .expecting(["greeting-data-2.0-1.noarch".to_string()])
        .source_date_epoch(1_234_567_890);
    assert!(timed.run().is_err());
    let (root, _) = f.scratch("child-plan-2");
    let mut timed = timed;
    timed.options.install_root = root.clone();
    run_in_child(&child(), &scratch_dir(), &timed).unwrap();
    let out = std::process::Command::new("rpm")
        .arg("--root")
        .arg(&root)
        .args([
            "--dbpath",
            "/var/lib/rpm",
            "-q",
            "--qf",
            "%{INSTALLTIME}",
            "greeting-data",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1234567890");
}
