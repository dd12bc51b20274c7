//! A worker in a user namespace under no_new_privs (as in a bubblewrap
//! sandbox, where `make test-image` first ran strata): its root would get
//! no capabilities, and the deployment's mount failed with a bare
//! "permission denied". strata now refuses it by name. Needs root (the
//! namespace's map is the identity).

use std::process::Command;

use strata_process::userns::IdMap;
use strata_process::worker::{self, Isolation, Worker};

/// Set for the re-run of this test binary under no_new_privs.
const PROBE: &str = "STRATA_NO_NEW_PRIVS_PROBE";

/// A worker that answers its effective capabilities (`CapEff`).
fn capabilities() -> Result<String, worker::JobError> {
    let scratch = tempfile::tempdir().unwrap();
    let sh = Worker::new("/bin/sh").arg("-c").arg(
        r#"printf '{"outcome":"ok","value":"%s"}' "$(awk '$1 == "CapEff:" {print $2}' /proc/self/status)" > "$2""#,
    ).arg("sh");
    let map = IdMap::for_this_process().unwrap();
    worker::run(&sh, &Isolation::User(map), scratch.path(), &"job")
}

#[test]
fn a_namespaced_worker_under_no_new_privs_is_refused_by_name() {
    if std::env::var_os(PROBE).is_some() {
        let err = capabilities().unwrap_err().to_string();
        assert!(err.contains("no_new_privs"), "{err}");
        return;
    }
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root: as root the worker's map is the identity"
    );
    // Without no_new_privs, the namespace's root has its capabilities.
    let caps = capabilities().unwrap();
    assert_ne!(u64::from_str_radix(&caps, 16).unwrap(), 0, "{caps}");

    let out = Command::new("setpriv")
        .args(["--no-new-privs", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_namespaced_worker_under_no_new_privs_is_refused_by_name",
            "--nocapture",
        ])
        .env(PROBE, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}
