//! A manifest's file edits applied to a tree, and the plumbing from
//! manifest repos and policies to dnf and [`Policy`].
//!
//! Everything here works on a root directory given by the caller; nothing
//! runs a program except [`make_device_nodes`] (mknod).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use strata_dnf::RepoConfig;
use strata_manifest::{is_unit_name, AddFile, InputPolicy, KeyRef, Repo};

use crate::policy::{self, Policy};

/// Copies each add-files entry into the tree (parents created, mode set),
/// then removes every path matching a remove-files pattern.
pub fn add_and_remove(root: &Path, add: &[AddFile], remove: &[String]) -> Result<()> {
    for f in add {
        let dest = root.join(f.dest.trim_start_matches('/'));
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        // Never write through a file that may be shared (a hard link into
        // an ostree repo, or a lower overlay layer): replace it.
        let _ = fs::remove_file(&dest);
        fs::copy(&f.src, &dest)
            .with_context(|| format!("add-files: copying {} to {}", f.src.display(), f.dest))?;
        if let Some(mode) = f.mode {
            fs::set_permissions(&dest, fs::Permissions::from_mode(mode))?;
        }
    }
    for pattern in remove {
        remove_glob(root, pattern)?;
    }
    Ok(())
}

/// Removes paths matching `pattern` (`*` within one component).
fn remove_glob(root: &Path, pattern: &str) -> Result<()> {
    let mut current = vec![root.to_path_buf()];
    for comp in pattern.trim_start_matches('/').split('/') {
        let mut next = Vec::new();
        for dir in &current {
            if comp.contains('*') {
                let Ok(rd) = fs::read_dir(dir) else {
                    continue;
                };
                for e in rd.flatten() {
                    if glob_match(comp, &e.file_name().to_string_lossy()) {
                        next.push(e.path());
                    }
                }
            } else {
                let p = dir.join(comp);
                if p.symlink_metadata().is_ok() {
                    next.push(p);
                }
            }
        }
        current = next;
    }
    for p in current {
        if p.is_dir() && !p.is_symlink() {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        }
        .with_context(|| format!("remove-files: removing {}", p.display()))?;
    }
    Ok(())
}

fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, rest)) => {
            name.starts_with(pre)
                && (0..=name.len() - pre.len()).any(|i| glob_match(rest, &name[pre.len() + i..]))
        }
    }
}

/// Enables units the way `systemctl enable` would: a symlink in each
/// target's `.wants` (`WantedBy=`) or `.requires` (`RequiredBy=`)
/// directory under `/etc/systemd/system`, pointing at the unit file where
/// the tree has it (`/etc/systemd/system` first, then
/// `/usr/lib/systemd/system`). A unit without `[Install]` targets is wanted
/// by `multi-user.target`. Unit files come from packages: the file must be a
/// regular file inside the tree, and the targets it names must be unit
/// names, before any of them reaches a path.
pub fn enable_units(root: &Path, units: &[String]) -> Result<()> {
    for unit in units {
        if !is_unit_name(unit) {
            bail!("units: `{unit}` is not a unit name like sshd.service");
        }
        let (dir, name, text) = find_unit(root, unit)?;
        let mut links: Vec<(String, &str)> = Vec::new();
        for line in text.lines().map(str::trim) {
            for (key, kind) in [("WantedBy=", "wants"), ("RequiredBy=", "requires")] {
                if let Some(value) = line.strip_prefix(key) {
                    for target in value.split_whitespace() {
                        if !is_unit_name(target) {
                            bail!("units: {unit} names `{target}` in {key} (not a unit name)");
                        }
                        links.push((target.to_string(), kind));
                    }
                }
            }
        }
        if links.is_empty() {
            links.push(("multi-user.target".into(), "wants"));
        }
        for (target, kind) in links {
            let wants = root
                .join("etc/systemd/system")
                .join(format!("{target}.{kind}"));
            fs::create_dir_all(&wants)?;
            let link = wants.join(&name);
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(format!("/{dir}/{name}"), &link)
                .with_context(|| format!("enabling {unit}"))?;
        }
    }
    Ok(())
}

/// Where systemd looks for units, most important first.
const UNIT_DIRS: [&str; 2] = ["etc/systemd/system", "usr/lib/systemd/system"];

/// The unit file of `unit` in the tree: its directory, its name (an alias,
/// a symlink to another unit, is followed to the unit it names, as
/// `systemctl enable` does) and its text. Links are resolved by name inside
/// the tree's unit directories, never on the host.
fn find_unit(root: &Path, unit: &str) -> Result<(&'static str, String, String)> {
    let mut name = unit.to_string();
    for _ in 0..8 {
        let Some((dir, meta)) = UNIT_DIRS.iter().find_map(|d| {
            fs::symlink_metadata(root.join(d).join(&name))
                .ok()
                .map(|m| (*d, m))
        }) else {
            bail!("units: {unit} is not installed by any package (no /etc/systemd/system/{name} or /usr/lib/systemd/system/{name})");
        };
        let path = root.join(dir).join(&name);
        if meta.is_file() {
            let text =
                fs::read_to_string(&path).with_context(|| format!("reading /{dir}/{name}"))?;
            return Ok((dir, name, text));
        }
        if !meta.file_type().is_symlink() {
            bail!("units: /{dir}/{name} is not a regular file");
        }
        let target = fs::read_link(&path)?;
        let next = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| is_unit_name(n))
            .with_context(|| {
                format!(
                    "units: /{dir}/{name} links to {}, not to a unit",
                    target.display()
                )
            })?;
        name = next;
    }
    bail!("units: {unit} is an alias of an alias… (more than 8 links)")
}

/// Puts the tree's os-release where RHEL keeps it: the file in
/// `/usr/lib/os-release`, `/etc/os-release` a relative link to it. A tree
/// whose package ships only `/etc/os-release` (a regular file) gets it
/// moved; a tree with neither is an error naming what provides it.
pub fn normalize_os_release(root: &Path) -> Result<()> {
    let lib = root.join("usr/lib/os-release");
    let etc = root.join("etc/os-release");
    let is_file = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    if !is_file(&lib) {
        if !is_file(&etc) {
            bail!(
                "the tree has no os-release: neither /usr/lib/os-release nor /etc/os-release is \
                 a file (on RHEL the package redhat-release provides it; is it in the package \
                 list?)"
            );
        }
        if fs::symlink_metadata(&lib).is_ok() {
            fs::remove_file(&lib).with_context(|| format!("removing {}", lib.display()))?;
        }
        fs::create_dir_all(root.join("usr/lib"))?;
        fs::rename(&etc, &lib)
            .with_context(|| format!("moving {} to {}", etc.display(), lib.display()))?;
    }
    if fs::read_link(&etc).ok().as_deref() != Some(Path::new("../usr/lib/os-release")) {
        if fs::symlink_metadata(&etc).is_ok() {
            fs::remove_file(&etc).with_context(|| format!("removing {}", etc.display()))?;
        }
        fs::create_dir_all(root.join("etc"))?;
        std::os::unix::fs::symlink("../usr/lib/os-release", &etc)
            .with_context(|| format!("linking {}", etc.display()))?;
    }
    Ok(())
}

/// The value of `key` in the tree's `/usr/lib/os-release`, unquoted.
pub fn os_release_value(root: &Path, key: &str) -> Option<String> {
    let text = fs::read_to_string(root.join("usr/lib/os-release")).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
                .replace("\\\"", "\"")
                .replace("\\\\", "\\")
        })
    })
}

/// The os-release keys every image strata builds carries on top of the
/// distribution's own: `VARIANT_ID=coreos` makes the Machine Config
/// Operator treat nodes as CoreOS (its rule: `ID` is `rhcos` or `scos`, or
/// `VARIANT_ID` is `coreos`) while `ID`, `NAME` and `VERSION_ID` stay the
/// distribution's, so that a base is still its RHEL minor to every tool
/// that asks.
pub const COREOS_VARIANT: [(&str, &str); 2] = [("VARIANT", "CoreOS"), ("VARIANT_ID", "coreos")];

/// Sets `KEY="value"` lines in the tree's os-release (the file in
/// /usr/lib that /etc/os-release points at), replacing existing ones and
/// appending new ones in the order given. The file is replaced, never
/// written through.
pub fn set_os_release(root: &Path, values: &[(&str, &str)]) -> Result<()> {
    let path = ["usr/lib/os-release", "etc/os-release", "usr/etc/os-release"]
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.is_file() && !p.is_symlink())
        .context(
            "the tree has no os-release file (/usr/lib/os-release; on RHEL the package \
             redhat-release provides it)",
        )?;
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    let mut pending: Vec<(&str, &str)> = values.to_vec();
    let mut out = String::new();
    for line in text.lines() {
        let key = line.split_once('=').map(|(k, _)| k.trim());
        match pending.iter().position(|(k, _)| Some(*k) == key) {
            Some(i) => {
                let (k, v) = pending.remove(i);
                out.push_str(&format!("{k}={}\n", quoted(v)));
            }
            None if values.iter().any(|(k, _)| Some(*k) == key) => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (k, v) in pending {
        out.push_str(&format!("{k}={}\n", quoted(v)));
    }
    let _ = fs::remove_file(&path);
    crate::tree::write_file(&path, out.as_bytes(), 0o644)
}

/// The device nodes scriptlets write to.
const DEVICE_NODES: [(&str, u32); 3] = [("null", 3), ("zero", 5), ("urandom", 9)];

/// `/dev/{null,zero,urandom}` in an install root, for scriptlets that
/// write there, until [`DeviceNodes::remove`] (or the drop) takes them
/// away again. Root of the host makes them as nodes; in a user namespace,
/// where mknod is refused, the host's own are bind-mounted onto empty
/// files (the caller's mount namespace is private: a rootless build's
/// is).
#[derive(Debug)]
pub struct DeviceNodes {
    dev: Option<PathBuf>,
}

impl DeviceNodes {
    pub fn make(root: &Path) -> Result<Self> {
        let dev = root.join("dev");
        fs::create_dir_all(&dev).with_context(|| format!("creating {}", dev.display()))?;
        let nodes = DeviceNodes {
            dev: Some(dev.clone()),
        };
        for (name, minor) in DEVICE_NODES {
            let path = dev.join(name);
            if path.symlink_metadata().is_ok() {
                continue;
            }
            let made = rustix::fs::mknodat(
                rustix::fs::CWD,
                &path,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::from_raw_mode(0o666),
                rustix::fs::makedev(1, minor),
            );
            match made {
                Ok(()) => fs::set_permissions(&path, fs::Permissions::from_mode(0o666))
                    .with_context(|| format!("chmod {}", path.display()))?,
                Err(rustix::io::Errno::PERM) => {
                    fs::write(&path, "").with_context(|| format!("creating {}", path.display()))?;
                    strata_process::run(
                        std::process::Command::new("mount")
                            .arg("--bind")
                            .arg(format!("/dev/{name}"))
                            .arg(&path),
                    )
                    .context("mounting the host's device nodes in the install root")?;
                }
                Err(e) => bail!("creating the device node {}: {e}", path.display()),
            }
        }
        Ok(nodes)
    }

    /// Unmounts and removes the nodes: `/dev` is left as it was before.
    pub fn remove(mut self) -> Result<()> {
        match self.dev.take() {
            Some(dev) => remove_device_nodes(&dev),
            None => Ok(()),
        }
    }
}

impl Drop for DeviceNodes {
    fn drop(&mut self) {
        if let Some(dev) = self.dev.take() {
            if let Err(e) = remove_device_nodes(&dev) {
                tracing::debug!("removing the install root's device nodes: {e:#}");
            }
        }
    }
}

fn remove_device_nodes(dev: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let own = fs::metadata(dev)?.dev();
    for (name, _) in DEVICE_NODES {
        let path = dev.join(name);
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        // A bind mount shows the host's node, on the host's /dev.
        if meta.dev() != own {
            strata_process::run(std::process::Command::new("umount").arg(&path))
                .context("unmounting the host's device nodes from the install root")?;
        }
        fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

/// The dnf configuration of a manifest repo. strata checks every package
/// against the policy's keys itself, before anything is installed, and
/// reports every offender at once, so libdnf's own gpgcheck is off.
pub fn repo_config(r: &Repo) -> RepoConfig {
    let mut c = RepoConfig::default();
    c.id = r.id.clone();
    c.name = r.name.clone();
    c.baseurls = r.baseurl.clone();
    c.gpgkeys = r.gpgkey.iter().map(PathBuf::from).collect();
    c.gpgcheck = false;
    c.enabled = true;
    c
}

/// The manifest's enabled repos, split into those `inputs` allows and the
/// others (which the solver never sees).
pub fn partition_repos<'a>(
    repos: &'a [Repo],
    inputs: &InputPolicy,
) -> (Vec<&'a Repo>, Vec<&'a Repo>) {
    repos
        .iter()
        .filter(|r| r.enabled)
        .partition(|r| inputs.allows_repo(&r.id))
}

/// Fails on a `file://` repo that holds no repository.
pub fn check_local_repos(repos: &[&Repo]) -> Result<()> {
    for r in repos {
        for url in &r.baseurl {
            if let Some(dir) = url.strip_prefix("file://") {
                if !Path::new(dir).join("repodata/repomd.xml").is_file() {
                    anyhow::bail!(
                        "repo {}: {url} is not a repository (no repodata/repomd.xml)",
                        r.id
                    );
                }
            }
        }
    }
    Ok(())
}

/// The policy of `inputs` over the `allowed` repos, keys loaded.
pub fn load_policy(inputs: &InputPolicy, allowed: &[&Repo]) -> Result<Policy> {
    let mut fingerprints = Vec::new();
    let mut policy_files = Vec::new();
    for k in &inputs.keys {
        match k {
            KeyRef::Fingerprint(f) => fingerprints.push(f.as_str().to_string()),
            KeyRef::File(p) => policy_files.push(p.clone()),
            KeyRef::Url(u) => policy_files.push(policy::key_path(u)?),
        }
    }
    let key_files = allowed
        .iter()
        .flat_map(|r| r.gpgkey.iter())
        .map(|k| policy::key_path(k))
        .collect::<Result<Vec<_>>>()?;
    Policy::load(
        allowed.iter().map(|r| r.id.clone()).collect(),
        &fingerprints,
        &key_files,
        &policy_files,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_tree(units: &[(&str, &str)]) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for (path, text) in units {
            let p = t.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        t
    }

    fn link(root: &Path, rel: &str) -> String {
        fs::read_link(root.join(rel))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    #[test]
    fn units_are_enabled_where_their_files_are() {
        let t = unit_tree(&[
            (
                "usr/lib/systemd/system/a.service",
                "[Install]\nWantedBy=multi-user.target\nRequiredBy=b.target\n",
            ),
            (
                "etc/systemd/system/local.service",
                "[Service]\nExecStart=/bin/true\n",
            ),
        ]);
        let r = t.path();
        std::os::unix::fs::symlink("a.service", r.join("usr/lib/systemd/system/alias.service"))
            .unwrap();
        enable_units(r, &["a.service".into(), "local.service".into()]).unwrap();
        let wants = "etc/systemd/system/multi-user.target.wants";
        assert_eq!(
            link(r, &format!("{wants}/a.service")),
            "/usr/lib/systemd/system/a.service"
        );
        assert_eq!(
            link(r, "etc/systemd/system/b.target.requires/a.service"),
            "/usr/lib/systemd/system/a.service"
        );
        // A unit only in /etc is linked there, not into /usr/lib.
        assert_eq!(
            link(r, &format!("{wants}/local.service")),
            "/etc/systemd/system/local.service"
        );
        // An alias enables the unit it names.
        fs::remove_dir_all(r.join(wants)).unwrap();
        enable_units(r, &["alias.service".into()]).unwrap();
        assert_eq!(
            link(r, &format!("{wants}/a.service")),
            "/usr/lib/systemd/system/a.service"
        );
    }

    #[test]
    fn unit_files_cannot_steer_links_out_of_the_tree() {
        let t = unit_tree(&[(
            "usr/lib/systemd/system/evil.service",
            "[Install]\nWantedBy=../../../../tmp/x\n",
        )]);
        let r = t.path();
        let e = enable_units(r, &["evil.service".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("evil.service") && e.contains("not a unit name"),
            "{e}"
        );
        std::os::unix::fs::symlink("/etc/shadow", r.join("usr/lib/systemd/system/host.service"))
            .unwrap();
        let e = enable_units(r, &["host.service".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not to a unit"), "{e}");
        let e = enable_units(r, &["missing.service".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not installed by any package"), "{e}");
        assert!(!r.join("tmp").exists());
    }

    #[test]
    fn globs_match_within_a_component() {
        for (p, n, want) in [
            ("*.conf", "a.conf", true),
            ("*.conf", "a.conf.bak", false),
            ("lib*so*", "libfoo.so.1", true),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob_match(p, n), want, "{p} {n}");
        }
    }

    /// compose took `/etc/os-release` as it found it while derive read
    /// only `/usr/lib/os-release`: a tree shipping only the first derived
    /// as "has no VERSION_ID". Now the file is where RHEL keeps it.
    #[test]
    fn os_release_moves_to_usr_lib_with_a_link_in_etc() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::write(root.join("etc/os-release"), "ID=\"rhel\"\n").unwrap();
        normalize_os_release(root).unwrap();
        assert_eq!(
            fs::read_to_string(root.join("usr/lib/os-release")).unwrap(),
            "ID=\"rhel\"\n"
        );
        assert_eq!(
            fs::read_link(root.join("etc/os-release")).unwrap(),
            Path::new("../usr/lib/os-release")
        );
        // Again: nothing changes.
        normalize_os_release(root).unwrap();
        assert_eq!(
            fs::read_to_string(root.join("etc/os-release")).unwrap(),
            "ID=\"rhel\"\n"
        );

        let empty = tempfile::tempdir().unwrap();
        let err = normalize_os_release(empty.path()).unwrap_err().to_string();
        assert!(err.contains("redhat-release"), "{err}");
    }

    #[test]
    fn os_release_values_replace_and_append() {
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("usr/lib");
        fs::create_dir_all(&lib).unwrap();
        fs::write(
            lib.join("os-release"),
            "NAME=\"RHEL\"\nVERSION=\"8.6 (Ootpa)\"\nID=rhel\n",
        )
        .unwrap();
        set_os_release(
            t.path(),
            &[("VERSION", "413.86.1-0"), ("OPENSHIFT_VERSION", "4.13")],
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(lib.join("os-release")).unwrap(),
            "NAME=\"RHEL\"\nVERSION=\"413.86.1-0\"\nID=rhel\nOPENSHIFT_VERSION=\"4.13\"\n"
        );
    }
}
