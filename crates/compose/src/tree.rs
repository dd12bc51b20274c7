//! Turns an installed root filesystem into a tree that follows the ostree
//! conventions of DESIGN.md, ready to commit.
//!
//! `/etc` becomes `/usr/etc`, the rpmdb moves to `/usr/share/rpm`, content of
//! `/var` becomes tmpfiles.d entries (plus factory copies for files), the
//! top-level directories that must be writable become symlinks into `/var`,
//! `/boot` is emptied (the kernel lives in `/usr/lib/modules/<kver>/`), and
//! API filesystems and caches are cleared. This module only moves files
//! inside the given root; it never runs a program.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Top-level directories that become symlinks (target relative to `/`).
const TOPLEVEL_LINKS: &[(&str, &str)] = &[
    ("home", "var/home"),
    ("root", "var/roothome"),
    ("opt", "var/opt"),
    ("srv", "var/srv"),
    ("mnt", "var/mnt"),
    ("media", "run/media"),
    ("ostree", "sysroot/ostree"),
];

/// Directories whose content never belongs in a commit. `/boot` among
/// them: the kernel and initramfs live in `/usr/lib/modules/<kver>`.
const EMPTIED: &[&str] = &["boot", "dev", "proc", "sys", "run", "tmp", "var", "sysroot"];

/// Where the tmpfiles.d entries for `/var` go.
pub const VAR_TMPFILES: &str = "usr/lib/tmpfiles.d/strata-var.conf";
/// Factory copies of files that packages put under `/var`.
pub const VAR_FACTORY: &str = "usr/share/factory/var";
/// The rpm macro that points tools at the relocated rpmdb.
pub const RPMDB_MACROS: &str = "usr/lib/rpm/macros.d/macros.strata";

/// The kernel found in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    pub kver: String,
    pub vmlinuz: PathBuf,
    pub initramfs: PathBuf,
}

/// The single `/usr/lib/modules/<kver>` with a `vmlinuz` in it.
pub fn find_kernel(root: &Path) -> Result<KernelInfo> {
    let moddir = root.join("usr/lib/modules");
    let mut kvers: Vec<String> = match fs::read_dir(&moddir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("vmlinuz").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    kvers.sort();
    match kvers.as_slice() {
        [kver] => Ok(KernelInfo {
            kver: kver.clone(),
            vmlinuz: moddir.join(kver).join("vmlinuz"),
            initramfs: moddir.join(kver).join("initramfs.img"),
        }),
        [] => bail!("the tree has no kernel: no /usr/lib/modules/<kver>/vmlinuz (is kernel-core in the package list?)"),
        many => bail!("the tree has {} kernels ({}); a bootable tree needs exactly one", many.len(), many.join(", ")),
    }
}

/// Applies every convention to `root`. Call after packages, initramfs and
/// postprocess scripts, before committing.
pub fn apply(root: &Path) -> Result<()> {
    relocate_rpmdb(root)?;
    var_to_tmpfiles(root)?;
    for dir in EMPTIED {
        empty_dir(&root.join(dir))?;
    }
    for (name, target) in TOPLEVEL_LINKS {
        replace_with_symlink(root, name, target)?;
    }
    replace_with_symlink(root, "usr/local", "../var/usrlocal")?;
    move_etc(root)?;
    Ok(())
}

/// `/var/lib/rpm` -> `/usr/share/rpm`, with a compatibility symlink and the
/// `%_dbpath` macro.
fn relocate_rpmdb(root: &Path) -> Result<()> {
    let old = root.join("var/lib/rpm");
    let new = root.join("usr/share/rpm");
    if old.is_dir() && !old.is_symlink() {
        if new.exists() {
            fs::remove_dir_all(&new)?;
        }
        fs::create_dir_all(new.parent().expect("has parent"))?;
        fs::rename(&old, &new).with_context(|| format!("moving {}", old.display()))?;
    }
    if !new.is_dir() {
        bail!("the tree has no rpm database at /var/lib/rpm or /usr/share/rpm");
    }
    // Lock and temporary files of the transaction are not content.
    for entry in fs::read_dir(&new)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.starts_with("__db") || name == ".rpm.lock" || name == ".dbenv.lock" {
            fs::remove_file(&path)?;
        }
    }
    // sqlite's write-ahead log, once checkpointed (empty), and its shared
    // memory index are run-time state that differs from run to run.
    let wal = new.join("rpmdb.sqlite-wal");
    if fs::metadata(&wal).map(|m| m.len() == 0).unwrap_or(false) {
        fs::remove_file(&wal)?;
        let _ = fs::remove_file(new.join("rpmdb.sqlite-shm"));
    }
    write_file(
        &root.join(RPMDB_MACROS),
        b"# The rpm database of an ostree-based system lives in /usr.\n%_dbpath /usr/share/rpm\n",
        0o644,
    )?;
    Ok(())
}

/// Everything packages put under `/var` becomes a tmpfiles.d line, so that a
/// deployment's `/var` (created empty) is populated at boot.
fn var_to_tmpfiles(root: &Path) -> Result<()> {
    let var = root.join("var");
    let mut lines = BTreeMap::new();
    if var.is_dir() {
        let names = passwd_names(root)?;
        collect_var(root, &var, &names, &mut lines)?;
    }
    // rpm tools that still look in /var/lib/rpm find the database in /usr.
    lines.insert(
        "/var/lib/rpm".to_string(),
        "L /var/lib/rpm - - - - ../../usr/share/rpm".to_string(),
    );
    // The symlinks created below point into these.
    for dir in ["home", "roothome", "opt", "srv", "mnt", "usrlocal"] {
        let mode = if dir == "roothome" { "0700" } else { "0755" };
        lines
            .entry(format!("/var/{dir}"))
            .or_insert_with(|| format!("d /var/{dir} {mode} root root - -"));
    }
    let mut text = String::from("# Generated by strata: the content packages put under /var.\n");
    for line in lines.values() {
        text.push_str(line);
        text.push('\n');
    }
    write_file(&root.join(VAR_TMPFILES), text.as_bytes(), 0o644)
}

fn collect_var(
    root: &Path,
    dir: &Path,
    names: &Names,
    lines: &mut BTreeMap<String, String>,
) -> Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for path in entries {
        let rel = Path::new("/").join(path.strip_prefix(root).expect("under root"));
        let key = rel.to_string_lossy().into_owned();
        // Runtime state that systemd-tmpfiles' own config manages.
        if key == "/var/run" || key == "/var/lock" || key.starts_with("/var/cache/dnf") {
            continue;
        }
        let meta = fs::symlink_metadata(&path)?;
        let owner = format!("{} {}", names.user(meta.uid()), names.group(meta.gid()));
        let mode = format!("{:04o}", meta.permissions().mode() & 0o7777);
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&path)?;
            lines.insert(key.clone(), format!("L {key} - - - - {}", target.display()));
        } else if meta.is_dir() {
            lines.insert(key.clone(), format!("d {key} {mode} {owner} - -"));
            collect_var(root, &path, names, lines)?;
        } else if meta.is_file() {
            let factory = root
                .join(VAR_FACTORY)
                .join(path.strip_prefix(root.join("var"))?);
            fs::create_dir_all(factory.parent().expect("has parent"))?;
            fs::copy(&path, &factory)?;
            let src = Path::new("/").join(factory.strip_prefix(root)?);
            lines.insert(
                key.clone(),
                format!("C {key} {mode} {owner} - {}", src.display()),
            );
        }
    }
    Ok(())
}

/// uid/gid -> name, from the tree's own passwd and group files.
struct Names {
    users: BTreeMap<u32, String>,
    groups: BTreeMap<u32, String>,
}

impl Names {
    fn user(&self, id: u32) -> String {
        self.users
            .get(&id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }
    fn group(&self, id: u32) -> String {
        self.groups
            .get(&id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }
}

fn passwd_names(root: &Path) -> Result<Names> {
    let read = |files: &[&str]| -> BTreeMap<u32, String> {
        let mut map = BTreeMap::new();
        for f in files {
            let Ok(text) = fs::read_to_string(root.join(f)) else {
                continue;
            };
            for line in text.lines() {
                let fields: Vec<&str> = line.split(':').collect();
                if let (Some(name), Some(id)) = (fields.first(), fields.get(2)) {
                    if let Ok(id) = id.parse() {
                        map.entry(id).or_insert_with(|| name.to_string());
                    }
                }
            }
        }
        map
    };
    Ok(Names {
        users: read(&["etc/passwd", "usr/lib/passwd"]),
        groups: read(&["etc/group", "usr/lib/group"]),
    })
}

fn empty_dir(dir: &Path) -> Result<()> {
    if dir.is_symlink() {
        fs::remove_file(dir)?;
        fs::create_dir(dir)?;
        return Ok(());
    }
    if !dir.exists() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        return Ok(());
    }
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() && !path.is_symlink() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        }
        .with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

fn replace_with_symlink(root: &Path, name: &str, target: &str) -> Result<()> {
    let path = root.join(name);
    if path.is_symlink() {
        fs::remove_file(&path)?;
    } else if path.is_dir() {
        // Their content was moved to /var by the package (tmpfiles) or is
        // not content at all; an image's /home is empty.
        fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
    } else if path.exists() {
        fs::remove_file(&path)?;
    }
    std::os::unix::fs::symlink(target, &path)
        .with_context(|| format!("linking {} -> {target}", path.display()))
}

/// `/etc` becomes `/usr/etc`: ostree merges it into each deployment's `/etc`.
fn move_etc(root: &Path) -> Result<()> {
    let etc = root.join("etc");
    let usr_etc = root.join("usr/etc");
    if usr_etc.exists() {
        bail!("the tree already has /usr/etc; packages must not ship it");
    }
    // Left-overs of rpm's %config handling are not content.
    remove_matching(&etc, &|n| {
        n.ends_with(".rpmnew") || n.ends_with(".rpmsave") || n.ends_with("-")
    })?;
    fs::rename(&etc, &usr_etc).context("moving /etc to /usr/etc")?;
    Ok(())
}

fn remove_matching(dir: &Path, pred: &dyn Fn(&str) -> bool) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        if ft.is_dir() {
            remove_matching(&path, pred)?;
        } else if pred(&entry.file_name().to_string_lossy()) && ft.is_file() {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

pub(crate) fn write_file(path: &Path, content: &[u8], mode: u32) -> Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in [
            "etc/ssh",
            "var/lib/rpm",
            "var/lib/sshd",
            "var/log",
            "usr/lib/modules/6.1.0-1.el8.x86_64",
            "boot/efi",
            "home/user",
            "usr/local/bin",
            "dev",
            "tmp",
        ] {
            fs::create_dir_all(r.join(d)).unwrap();
        }
        fs::write(r.join("etc/passwd"), "root:x:0:0::/root:/bin/bash\n").unwrap();
        fs::write(r.join("etc/group"), "root:x:0:\n").unwrap();
        fs::write(r.join("etc/hosts.rpmnew"), "x").unwrap();
        fs::write(r.join("var/lib/rpm/rpmdb.sqlite"), "db").unwrap();
        fs::write(r.join("var/lib/rpm/.rpm.lock"), "").unwrap();
        fs::write(r.join("var/log/state"), "hello").unwrap();
        symlink("../run", r.join("var/run")).unwrap();
        symlink("../../usr/share/zoneinfo", r.join("var/lib/zone")).unwrap();
        fs::write(
            r.join("usr/lib/modules/6.1.0-1.el8.x86_64/vmlinuz"),
            "kernel",
        )
        .unwrap();
        fs::write(r.join("boot/vmlinuz-old"), "x").unwrap();
        fs::write(r.join("dev/null"), "").unwrap();
        t
    }

    #[test]
    fn conventions_are_applied() {
        let t = tree();
        let r = t.path();
        apply(r).unwrap();
        assert!(r.join("usr/etc/ssh").is_dir());
        assert!(!r.join("etc").exists());
        assert!(!r.join("usr/etc/hosts.rpmnew").exists());
        assert_eq!(
            fs::read(r.join("usr/share/rpm/rpmdb.sqlite")).unwrap(),
            b"db"
        );
        assert!(!r.join("usr/share/rpm/.rpm.lock").exists());
        assert!(fs::read_to_string(r.join(RPMDB_MACROS))
            .unwrap()
            .contains("%_dbpath /usr/share/rpm"));
        assert_eq!(
            fs::read_dir(r.join("var")).unwrap().count(),
            0,
            "/var emptied"
        );
        assert_eq!(
            fs::read_dir(r.join("boot")).unwrap().count(),
            0,
            "/boot emptied"
        );
        assert_eq!(fs::read_dir(r.join("dev")).unwrap().count(), 0);
        for (name, target) in TOPLEVEL_LINKS {
            assert_eq!(
                fs::read_link(r.join(name)).unwrap(),
                Path::new(target),
                "{name}"
            );
        }
        assert_eq!(
            fs::read_link(r.join("usr/local")).unwrap(),
            Path::new("../var/usrlocal")
        );
        assert!(r.join("sysroot").is_dir());
        let tmpfiles = fs::read_to_string(r.join(VAR_TMPFILES)).unwrap();
        assert!(
            tmpfiles.contains("d /var/lib/sshd 0755 root root - -"),
            "{tmpfiles}"
        );
        assert!(
            tmpfiles.contains("L /var/lib/zone - - - - ../../usr/share/zoneinfo"),
            "{tmpfiles}"
        );
        assert!(
            tmpfiles.contains("C /var/log/state 0644 root root - /usr/share/factory/var/log/state"),
            "{tmpfiles}"
        );
        assert!(!tmpfiles.contains("/var/run"), "{tmpfiles}");
        assert!(tmpfiles.contains("d /var/roothome 0700 root root - -"));
        assert!(tmpfiles.contains("L /var/lib/rpm - - - - ../../usr/share/rpm"));
        assert_eq!(
            fs::read(r.join("usr/share/factory/var/log/state")).unwrap(),
            b"hello"
        );
    }

    #[test]
    fn kernel_is_found_or_its_absence_explained() {
        let t = tree();
        let k = find_kernel(t.path()).unwrap();
        assert_eq!(k.kver, "6.1.0-1.el8.x86_64");
        let empty = tempfile::tempdir().unwrap();
        let err = find_kernel(empty.path()).unwrap_err().to_string();
        assert!(err.contains("no kernel"), "{err}");
    }
}
