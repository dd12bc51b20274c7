//! The Berkeley DB writer, judged by readers that are not strata: rpm's
//! read-only bdb backend (`bdb_ro`) and libdb's own dump and verify tools,
//! on a database holding the fixture's RHEL 8.6 packages.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use strata_rpmdb::{convert, Backend};
use strata_testdistro::Fixture;

fn run(cmd: &mut Command) -> String {
    let program = cmd.get_program().to_string_lossy().into_owned();
    strata_process::require(&program).unwrap_or_else(|e| panic!("{e}"));
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A sqlite database holding every package of the fixture's RHEL 8.6
/// snapshot, written by the host's rpm.
fn sqlite_db(dir: &Path) -> PathBuf {
    let fixture = Fixture::for_tests().unwrap();
    let mut rpms: Vec<PathBuf> = Vec::new();
    for repo in ["rhel-8.6-baseos", "rhel-8.6-appstream"] {
        let packages = fixture.path(&format!("snapshots/20261115/{repo}/Packages"));
        for entry in walk(&packages) {
            if entry.extension().is_some_and(|e| e == "rpm") {
                rpms.push(entry);
            }
        }
    }
    rpms.sort();
    let db = dir.join("rpm");
    fs::create_dir_all(&db).unwrap();
    run(Command::new("rpm").arg("--dbpath").arg(&db).arg("--initdb"));
    run(Command::new("rpm")
        .arg("--dbpath")
        .arg(&db)
        .args(["-i", "--justdb", "--nodeps", "--noscripts", "--nosignature"])
        .args(&rpms));
    for lock in [".rpm.lock", "rpmdb.sqlite-shm", "rpmdb.sqlite-wal"] {
        let _ = fs::remove_file(db.join(lock));
    }
    db
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn query(db: &Path, backend: &str, args: &[&str]) -> String {
    run(Command::new("rpm")
        .args(["--define", &format!("_db_backend {backend}"), "--dbpath"])
        .arg(db)
        .args(args))
}

/// Every (key, header, position) of a bdb index file, read with libdb's
/// own dump tool.
fn bdb_index(file: &Path) -> BTreeMap<String, Vec<(u32, u32)>> {
    let dump = run(Command::new("db5.3_dump").arg(file));
    let mut lines = dump.lines().skip_while(|l| *l != "HEADER=END").skip(1);
    let mut out = BTreeMap::new();
    while let (Some(k), Some(v)) = (lines.next(), lines.next()) {
        let (key, items) = (
            hex::decode(k.trim()).unwrap(),
            hex::decode(v.trim()).unwrap(),
        );
        let pairs = items
            .chunks(8)
            .map(|c| {
                (
                    u32::from_ne_bytes(c[..4].try_into().unwrap()),
                    u32::from_ne_bytes(c[4..].try_into().unwrap()),
                )
            })
            .collect::<Vec<_>>();
        out.insert(hex::encode_upper(key), pairs);
    }
    out
}

/// The same index as rpm 4.18 keeps it in the sqlite database.
fn sqlite_index(db: &Path, table: &str) -> BTreeMap<String, Vec<(u32, u32)>> {
    let rows = run(Command::new("sqlite3").arg(db.join("rpmdb.sqlite")).arg(format!(
        "SELECT CASE WHEN length(key) = 0 THEN '00' ELSE hex(key) END, hnum, idx FROM '{table}' ORDER BY hnum, idx"
    )));
    let mut out: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
    for row in rows.lines() {
        let f: Vec<&str> = row.split('|').collect();
        out.entry(f[0].to_string())
            .or_default()
            .push((f[1].parse().unwrap(), f[2].parse().unwrap()));
    }
    out
}

#[test]
fn bdb_database_reads_with_rpms_bdb_ro_backend_and_matches_rpms_own_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    let sqlite = sqlite_db(tmp.path());
    let bdb = tmp.path().join("bdb");
    run(Command::new("cp").arg("-a").arg(&sqlite).arg(&bdb));
    convert(&bdb, Backend::Bdb).unwrap();
    assert_eq!(Backend::detect(&bdb), Some(Backend::Bdb));
    assert!(!bdb.join("rpmdb.sqlite").exists());

    // rpm lists every package, and answers through the indexes.
    let all = |db: &Path, backend: &str| {
        let mut v: Vec<String> = query(db, backend, &["-qa"])
            .lines()
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let listed = all(&bdb, "bdb_ro");
    assert_eq!(listed, all(&sqlite, "sqlite"));
    assert!(listed.len() > 50, "{listed:?}");
    for args in [
        &["-q", "bash"][..],
        &["-qf", "/usr/bin/bash"],
        &["-q", "--whatprovides", "/bin/sh"],
        &["-q", "--whatrequires", "glibc"],
        &["-q", "--qf", "%{NAME} %{INSTALLTID}\\n", "bash"],
    ] {
        assert_eq!(
            query(&bdb, "bdb_ro", args),
            query(&sqlite, "sqlite", args),
            "{args:?}"
        );
    }

    // The indexes hold exactly what rpm's own index code put into sqlite
    // (header numbers agree: both number in the database's order).
    for entry in fs::read_dir(&bdb).unwrap() {
        let file = entry.unwrap().path();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        run(Command::new("db5.3_verify").arg("-q").arg(&file));
        if name == "Packages" {
            continue;
        }
        let mut ours = bdb_index(&file);
        let mut rpms = sqlite_index(&sqlite, &name);
        for map in [&mut ours, &mut rpms] {
            map.values_mut().for_each(|v| v.sort());
        }
        assert_eq!(ours, rpms, "index {name}");
    }

    // Same headers, same bytes, wherever it is written.
    let again = tempfile::tempdir().unwrap();
    let copy = again.path().join("elsewhere");
    run(Command::new("cp").arg("-a").arg(&sqlite).arg(&copy));
    convert(&copy, Backend::Bdb).unwrap();
    for entry in fs::read_dir(&bdb).unwrap() {
        let name = entry.unwrap().file_name();
        let (a, b) = (
            fs::read(bdb.join(&name)).unwrap(),
            fs::read(copy.join(&name)).unwrap(),
        );
        let first: Vec<usize> = a
            .iter()
            .zip(&b)
            .enumerate()
            .filter(|(i, (x, y))| x != y && *i >= 72)
            .map(|(i, _)| i)
            .take(20)
            .collect();
        assert!(
            a.len() == b.len() && first.is_empty(),
            "{name:?} differs between two writes at byte {first:?}"
        );
    }

    // rpm itself converts it (what one does by hand to install into it
    // with the host's rpm).
    let rebuilt = tmp.path().join("rebuilt");
    run(Command::new("cp").arg("-a").arg(&bdb).arg(&rebuilt));
    run(Command::new("rpmdb")
        .args(["--define", "_db_backend sqlite", "--dbpath"])
        .arg(&rebuilt)
        .arg("--rebuilddb"));
    assert_eq!(all(&rebuilt, "sqlite"), listed);

    // And back: sqlite again, the same packages.
    convert(&bdb, Backend::Sqlite).unwrap();
    assert_eq!(Backend::detect(&bdb), Some(Backend::Sqlite));
    assert_eq!(all(&bdb, "sqlite"), listed);
}
