//! `become_root` for a user whose subordinate ids come in two ranges, below
//! and above its own id, as a non-root pod user's do (its 65536 ids less
//! its own). Needs root (to stand in other /etc/subuid and /etc/subgid
//! tables in a mount namespace of the test's own) and the `strata-test`
//! user of `ci/install-deps`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// Set for the re-run of this test binary that plays the user.
const PROBE: &str = "STRATA_USERNS_PROBE";

#[test]
fn a_user_with_two_ranges_becomes_root_of_every_tree_id() {
    if let Some(dir) = std::env::var_os(PROBE) {
        return probe(Path::new(&dir));
    }
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root: it stands in other /etc/subuid and /etc/subgid tables"
    );
    let uid = id("-u");
    let gid = id("-g");
    let dir = tempfile::tempdir().unwrap();
    // The pod's layout, in host ids the test may use: the user's own id
    // between two ranges that make up the rest of the tree's ids.
    let below = 999;
    let above = strata_process::userns::TREE_IDS - 1 - below;
    let table = |user: &str| format!("{user}:200000:{below}\n{user}:300000:{above}\n");
    std::fs::write(dir.path().join("subuid"), table("strata-test")).unwrap();
    std::fs::write(dir.path().join("subgid"), table(&uid.to_string())).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(uid), Some(gid)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();

    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(
            "mount --bind \"$1/subuid\" /etc/subuid && mount --bind \"$1/subgid\" /etc/subgid && \
             shift && exec setpriv --reuid=\"$1\" --regid=\"$2\" --clear-groups -- \"$3\" \
             --exact a_user_with_two_ranges_becomes_root_of_every_tree_id --nocapture",
        )
        .arg("sh")
        .arg(dir.path())
        .arg(uid.to_string())
        .arg(gid.to_string())
        .arg(&exe)
        .env(PROBE, &work)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    // The map: the user as 0, then the two ranges one after the other.
    let want = format!("0 {uid} 1 / 1 200000 {below} / 1000 300000 {above}");
    assert!(text.contains(&format!("uid_map: {want}")), "{text}");
    // Files the namespace's root gave nobody (65534) belong, on the host,
    // to the last id of the upper range; the user's own files to it.
    let nobody = std::fs::metadata(work.join("nobody")).unwrap();
    assert_eq!(nobody.uid(), 300000 + above - 1);
    let own = std::fs::metadata(work.join("root")).unwrap();
    assert_eq!((own.uid(), own.gid()), (uid, gid));
}

/// The user's side: become root, then show the map and write files of the
/// tree's lowest and highest ids.
fn probe(work: &Path) {
    strata_process::userns::become_root("the probe").unwrap();
    let map = std::fs::read_to_string("/proc/self/uid_map").unwrap();
    let lines: Vec<String> = map
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    println!("uid_map: {}", lines.join(" / "));
    assert!(rustix::process::geteuid().is_root());
    std::fs::write(work.join("root"), "").unwrap();
    let nobody = work.join("nobody");
    std::fs::write(&nobody, "").unwrap();
    std::os::unix::fs::chown(&nobody, Some(65534), Some(65534)).unwrap();
}

/// An id of the `strata-test` user.
fn id(which: &str) -> u32 {
    let out = Command::new("id")
        .args([which, "strata-test"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the strata-test user is missing: run ci/install-deps"
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}
