//! Users and groups of a composed tree.
//!
//! On an ostree system `/etc` belongs to the machine, so the users and
//! groups that packages create live in `/usr/lib/passwd` and
//! `/usr/lib/group` (read through nss-altfiles); `/etc` keeps only root.
//! Ids are allocated by package scriptlets at install time; to keep them
//! stable from build to build, the previous build's complete lists are put
//! in place before the install, so that `getent … || useradd …` finds them.

use std::path::Path;

use anyhow::{Context, Result};

use crate::tree::write_file;

/// The complete user and group lists of a build, kept with the build so the
/// next one can reuse its ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Accounts {
    pub passwd: String,
    pub group: String,
}

/// Entries that stay in `/etc` (the machine's own files).
const ETC_USERS: &[&str] = &["root"];
const ETC_GROUPS: &[&str] = &["root", "wheel"];

/// Seeds `root/etc/{passwd,group}` with `previous` before packages install.
/// rpm then keeps them (setup ships them `%config(noreplace)`) and the
/// scriptlets' `useradd` finds existing users instead of allocating ids.
pub fn seed(root: &Path, previous: &Accounts) -> Result<()> {
    if previous.passwd.is_empty() {
        return Ok(());
    }
    write_file(&root.join("etc/passwd"), previous.passwd.as_bytes(), 0o644)?;
    write_file(&root.join("etc/group"), previous.group.as_bytes(), 0o644)?;
    Ok(())
}

/// Splits the installed tree's accounts between `/etc` and `/usr/lib`, turns
/// on `altfiles` in nsswitch.conf, and returns the complete lists.
///
/// Entries already in `/usr/lib` stay first (a derived tree keeps its
/// base's accounts); entries `/etc` gained are appended. Files whose
/// content does not change are not rewritten, so a tree layered over a base
/// gets no copies of untouched files.
pub fn split(root: &Path) -> Result<Accounts> {
    let mut complete = Vec::new();
    for (file, keep) in [("passwd", ETC_USERS), ("group", ETC_GROUPS)] {
        let all = read(root, &format!("etc/{file}"))?;
        let lib_path = root.join("usr/lib").join(file);
        let existing = std::fs::read_to_string(&lib_path).unwrap_or_default();
        let (etc, new) = partition(&all, keep);
        let lib = merge(&existing, &new);
        if !lib.is_empty() && !has_altfiles(root) {
            anyhow::bail!(
                "the tree has system {file} entries to keep in /usr/lib/{file}, which only nss-altfiles makes visible, and no {}: add the package nss-altfiles",
                ALTFILES_MODULES[0]
            );
        }
        write_if_changed(&root.join("etc").join(file), &etc, 0o644)?;
        write_if_changed(&lib_path, &lib, 0o644)?;
        complete.push(format!("{etc}{lib}"));
    }
    for (file, keep) in [("shadow", ETC_USERS), ("gshadow", ETC_GROUPS)] {
        let path = root.join("etc").join(file);
        if path.exists() {
            let (etc, _) = partition(&read(root, &format!("etc/{file}"))?, keep);
            write_if_changed(&path, &etc, 0o000)?;
        }
    }
    enable_altfiles(root)?;
    let group = complete.pop().unwrap_or_default();
    let passwd = complete.pop().unwrap_or_default();
    Ok(Accounts { passwd, group })
}

/// `existing` lines, then the lines of `new` whose name `existing` lacks.
fn merge(existing: &str, new: &str) -> String {
    let names: std::collections::BTreeSet<&str> = existing
        .lines()
        .filter_map(|l| l.split(':').next())
        .collect();
    let mut out: String = existing
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    for line in new.lines() {
        if !names.contains(line.split(':').next().unwrap_or("")) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Writes `content` unless the file already holds exactly it. The old
/// file is replaced, never written through (it may be a hard link into an
/// ostree repo or a lower overlay layer).
fn write_if_changed(path: &Path, content: &str, mode: u32) -> Result<()> {
    if std::fs::read(path).is_ok_and(|c| c == content.as_bytes()) {
        return Ok(());
    }
    let _ = std::fs::remove_file(path);
    write_file(path, content.as_bytes(), mode)
}

fn read(root: &Path, rel: &str) -> Result<String> {
    std::fs::read_to_string(root.join(rel)).with_context(|| format!("reading /{rel} of the tree"))
}

/// Lines whose name is in `keep`, and the others, each in file order.
fn partition(text: &str, keep: &[&str]) -> (String, String) {
    let mut etc = String::new();
    let mut lib = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let name = line.split(':').next().unwrap_or("");
        let out = if keep.contains(&name) {
            &mut etc
        } else {
            &mut lib
        };
        out.push_str(line);
        out.push('\n');
    }
    (etc, lib)
}

/// Where RHEL (and a tree without lib64) keeps the `altfiles` NSS module.
const ALTFILES_MODULES: &[&str] = &[
    "/usr/lib64/libnss_altfiles.so.2",
    "/usr/lib/libnss_altfiles.so.2",
];

fn has_altfiles(root: &Path) -> bool {
    ALTFILES_MODULES
        .iter()
        .any(|m| root.join(m.trim_start_matches('/')).is_file())
}

fn enable_altfiles(root: &Path) -> Result<()> {
    let path = root.join("etc/nsswitch.conf");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut out = String::new();
    let mut seen = (false, false);
    for line in text.lines() {
        let mut line = line.to_string();
        for (db, flag) in [("passwd:", &mut seen.0), ("group:", &mut seen.1)] {
            if line.trim_start().starts_with(db) {
                *flag = true;
                if !line.contains("altfiles") {
                    line = line.replacen("files", "files altfiles", 1);
                }
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    if !seen.0 {
        out.push_str("passwd: files altfiles\n");
    }
    if !seen.1 {
        out.push_str("group: files altfiles\n");
    }
    write_if_changed(&path, &out, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module nss-altfiles installs (content does not matter here).
    fn install_altfiles(r: &Path) {
        std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
        std::fs::write(r.join("usr/lib64/libnss_altfiles.so.2"), "").unwrap();
    }

    #[test]
    fn a_tree_without_nss_altfiles_is_refused_by_package_name() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(
            r.join("etc/passwd"),
            "root:x:0:0::/root:/bin/bash
sshd:x:74:74::/:/sbin/nologin
",
        )
        .unwrap();
        std::fs::write(
            r.join("etc/group"),
            "root:x:0:
",
        )
        .unwrap();
        let err = format!("{:#}", split(r).unwrap_err());
        assert!(err.contains("add the package nss-altfiles"), "{err}");
        assert!(err.contains("/usr/lib64/libnss_altfiles.so.2"), "{err}");
        // Nothing moved.
        assert!(!r.join("usr/lib/passwd").exists());
    }

    #[test]
    fn accounts_move_to_usr_lib_and_altfiles_is_on() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(r.join("etc/passwd"), "root:x:0:0::/root:/bin/bash\nsshd:x:74:74::/:/sbin/nologin\nchrony:x:998:997::/:/sbin/nologin\n").unwrap();
        std::fs::write(r.join("etc/group"), "root:x:0:\nwheel:x:10:\nsshd:x:74:\n").unwrap();
        std::fs::write(r.join("etc/shadow"), "root:*::\nsshd:!!::\n").unwrap();
        install_altfiles(r);
        std::fs::write(
            r.join("etc/nsswitch.conf"),
            "passwd: files\nshadow: files\ngroup: files\nhosts: files dns\n",
        )
        .unwrap();
        let acc = split(r).unwrap();
        assert!(acc.passwd.contains("chrony:x:998"));
        assert_eq!(
            std::fs::read_to_string(r.join("etc/passwd")).unwrap(),
            "root:x:0:0::/root:/bin/bash\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("usr/lib/passwd")).unwrap(),
            "sshd:x:74:74::/:/sbin/nologin\nchrony:x:998:997::/:/sbin/nologin\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("etc/group")).unwrap(),
            "root:x:0:\nwheel:x:10:\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("etc/shadow")).unwrap(),
            "root:*::\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("etc/nsswitch.conf")).unwrap(),
            "passwd: files altfiles\nshadow: files\ngroup: files altfiles\nhosts: files dns\n"
        );
        let again = tempfile::tempdir().unwrap();
        seed(again.path(), &acc).unwrap();
        assert_eq!(
            std::fs::read_to_string(again.path().join("etc/passwd")).unwrap(),
            acc.passwd
        );
    }

    #[test]
    fn a_layered_tree_keeps_its_base_accounts_and_adds_new_ones() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::create_dir_all(r.join("usr/lib")).unwrap();
        std::fs::write(r.join("usr/lib/passwd"), "sshd:x:74:74::/:/sbin/nologin\n").unwrap();
        std::fs::write(r.join("usr/lib/group"), "sshd:x:74:\n").unwrap();
        install_altfiles(r);
        std::fs::write(
            r.join("etc/passwd"),
            "root:x:0:0::/root:/bin/bash\nopenvswitch:x:997:996::/:/sbin/nologin\n",
        )
        .unwrap();
        std::fs::write(r.join("etc/group"), "root:x:0:\nopenvswitch:x:996:\n").unwrap();
        std::fs::write(
            r.join("etc/nsswitch.conf"),
            "passwd: files altfiles\ngroup: files altfiles\n",
        )
        .unwrap();
        let acc = split(r).unwrap();
        assert_eq!(
            std::fs::read_to_string(r.join("usr/lib/passwd")).unwrap(),
            "sshd:x:74:74::/:/sbin/nologin\nopenvswitch:x:997:996::/:/sbin/nologin\n"
        );
        assert_eq!(acc.group, "root:x:0:\nsshd:x:74:\nopenvswitch:x:996:\n");
    }
}
