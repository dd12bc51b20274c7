//! Real programs for the fixture: Debian 12's own packages, repackaged under
//! RHEL's names and file locations.
//!
//! `ci/install-deps` downloads every package of `debian/packages` into a
//! cache directory. Here each one is unpacked (`dpkg-deb --fsys-tarfile`,
//! read as a tar stream so that modes, links and owners come from the
//! package, not from the filesystem it was unpacked on) and its paths are
//! moved to where RHEL keeps them: `/bin`, `/sbin` and `/lib` under `/usr`,
//! libraries from the multiarch directories into `/usr/lib64`. Documentation
//! and Debian's init scripts are left out. Which RPM gets which Debian
//! package is the distribution's business (`distro.rs`).
//!
//! Shared libraries give RPM-style automatic dependencies (`libfoo.so.1()(64bit)`),
//! read from the ELF dynamic section, so that a missing library shows up as an
//! unresolvable dependency instead of a program that fails at run time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::spec::{FileKind, FileSpec};

/// Where `ci/install-deps` puts the packages unless told otherwise.
pub const DEFAULT_DEB_CACHE: &str = "/var/cache/strata/debs";

/// The list `ci/install-deps` downloads (a package name, then the Debian
/// suite when it is not Debian 12's).
const LIST: &str = include_str!("../debian/packages");

/// Debian's multiarch library directory, where its programs look for libraries.
pub const MULTIARCH_LIBDIR: &str = "/usr/lib/x86_64-linux-gnu";

/// Paths that are not carried over at all (prefixes, without the leading `/`).
const DROPPED: &[&str] = &[
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "usr/share/bug",
    "usr/share/doc-base",
    "usr/share/menu",
    "etc/init.d",
    "etc/cron.daily",
    "etc/cron.weekly",
    "etc/ld.so.conf.d",
];

/// Debian location -> RHEL location, longest prefix first.
const MOVED: &[(&str, &str)] = &[
    ("usr/lib/x86_64-linux-gnu", "usr/lib64"),
    ("lib/x86_64-linux-gnu", "usr/lib64"),
    ("lib64", "usr/lib64"),
    ("bin", "usr/bin"),
    ("sbin", "usr/sbin"),
    ("lib", "usr/lib"),
];

/// The package names of the list, in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    LIST.lines()
        .filter_map(|l| l.split('#').next().unwrap_or("").split_whitespace().next())
}

/// The cached `.deb` of every listed package.
pub struct DebCache {
    /// Debian package name -> its file.
    pub debs: BTreeMap<String, PathBuf>,
}

impl DebCache {
    /// Every package of `debian/packages` in `dir`.
    pub fn find(dir: &Path) -> Result<Self> {
        Self::find_named(dir, &names().collect::<Vec<_>>())
    }

    /// Each of `wanted` in `dir`.
    pub fn find_named(dir: &Path, wanted: &[&str]) -> Result<Self> {
        let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| {
                format!(
                    "reading the Debian package cache {} (run ci/install-deps to fetch the packages)",
                    dir.display()
                )
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "deb"))
            .collect();
        all.sort();
        let mut debs = BTreeMap::new();
        let mut missing = Vec::new();
        for &name in wanted {
            let prefix = format!("{name}_");
            // The newest one when a refresh left several (names sort by version
            // closely enough for Debian's stable updates).
            match all.iter().rev().find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
            }) {
                Some(p) => {
                    debs.insert(name.to_string(), p.clone());
                }
                None => missing.push(name),
            }
        }
        if !missing.is_empty() {
            bail!(
                "the Debian package cache {} lacks {} (run ci/install-deps to fetch them)",
                dir.display(),
                missing.join(", ")
            );
        }
        Ok(Self { debs })
    }

    /// Unpacks the packages `names` (all of them when empty) into `dir`
    /// as Debian lays them out, for running their programs in place.
    pub fn unpack_into(&self, names: &[&str], dir: &Path) -> Result<()> {
        if let Some(missing) = names.iter().find(|n| !self.debs.contains_key(**n)) {
            bail!("the Debian package cache lacks {missing} (run ci/install-deps to fetch it)");
        }
        for (name, path) in &self.debs {
            if names.is_empty() || names.contains(&name.as_str()) {
                strata_process::run(Command::new("dpkg-deb").arg("-x").arg(path).arg(dir))?;
            }
        }
        Ok(())
    }

    /// Debian package -> version, from the file names (`name_1%3a2.3-4_amd64.deb`).
    pub fn versions(&self) -> BTreeMap<String, String> {
        self.debs
            .iter()
            .map(|(name, path)| {
                let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let version = file
                    .strip_prefix(&format!("{name}_"))
                    .and_then(|rest| rest.split('_').next())
                    .unwrap_or("")
                    .replace("%3a", ":");
                (name.clone(), version)
            })
            .collect()
    }
}

/// Every cached package, unpacked and moved to RHEL's locations.
pub struct Debian {
    files: BTreeMap<String, Vec<FileSpec>>,
}

impl Debian {
    pub fn unpack(cache: &DebCache) -> Result<Self> {
        let mut files = BTreeMap::new();
        for (name, path) in &cache.debs {
            let list = unpack_one(path).with_context(|| format!("unpacking {}", path.display()))?;
            files.insert(name.clone(), list);
        }
        Ok(Self { files })
    }

    /// The files of the Debian packages `debs`, as one RPM's file list:
    /// where two give the same path, a file or directory wins over a symlink.
    pub fn take(&self, debs: &[&str]) -> Vec<FileSpec> {
        let mut out: BTreeMap<String, FileSpec> = BTreeMap::new();
        for deb in debs {
            let list = self
                .files
                .get(*deb)
                .unwrap_or_else(|| panic!("{deb} is not in debian/packages"));
            for f in list {
                match out.get(&f.path) {
                    Some(old) if !matches!(old.kind, FileKind::Symlink(_)) => {}
                    _ => {
                        out.insert(f.path.clone(), f.clone());
                    }
                }
            }
        }
        out.into_values().collect()
    }
}

fn unpack_one(deb: &Path) -> Result<Vec<FileSpec>> {
    let tar = strata_process::run(Command::new("dpkg-deb").arg("--fsys-tarfile").arg(deb))?.stdout;
    let mut archive = tar::Archive::new(&tar[..]);
    let mut out: Vec<FileSpec> = Vec::new();
    // archive path -> index in `out`, for hard links
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let raw = entry.path()?.to_string_lossy().into_owned();
        let rel = raw
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_string();
        let Some(path) = rhel_path(&rel) else {
            continue;
        };
        let header = entry.header();
        let mut mode = (header.mode()? & 0o7777) as u16;
        let user = header
            .username()
            .ok()
            .flatten()
            .unwrap_or("root")
            .to_string();
        let group = header
            .groupname()
            .ok()
            .flatten()
            .unwrap_or("root")
            .to_string();
        // Debian's special groups (shadow, tty) do not exist on the fixture:
        // such files become root's, without the set-group-id bit.
        if group != "root" {
            mode &= !0o2000;
        }
        if user != "root" {
            mode &= !0o4000;
        }
        let kind = header.entry_type();
        let spec = if kind.is_dir() {
            FileSpec::dir(&path, mode)
        } else if kind.is_symlink() {
            let target = entry
                .link_name()?
                .context("symlink without a target")?
                .to_string_lossy()
                .into_owned();
            match link_target(&rel, &target) {
                Some(t) if t != path => FileSpec::symlink(&path, &t),
                _ => continue,
            }
        } else if kind.is_hard_link() {
            let target = entry
                .link_name()?
                .context("hard link without a target")?
                .to_string_lossy()
                .into_owned();
            let target = target.trim_start_matches("./").to_string();
            let Some(&i) = index.get(&target) else {
                bail!("{rel}: hard link to {target}, which comes later or not at all");
            };
            let identity = out[i].path.clone();
            out[i] = out[i].clone().hardlink(&identity);
            let mut linked = out[i].clone();
            linked.path = path;
            linked
        } else if kind.is_file() {
            let mut content = Vec::with_capacity(header.size()? as usize);
            entry.read_to_end(&mut content)?;
            FileSpec::file(&path, content, mode)
        } else {
            bail!("{rel}: unsupported entry type {kind:?}");
        };
        index.insert(rel, out.len());
        out.push(spec);
    }
    Ok(out)
}

/// Where RHEL keeps what Debian ships at `rel` (no leading `/`), or `None`
/// when it is not carried over.
fn rhel_path(rel: &str) -> Option<String> {
    if rel.is_empty() || DROPPED.iter().any(|d| under(rel, d)) {
        return None;
    }
    for (from, to) in MOVED {
        if under(rel, from) {
            return Some(format!("/{to}{}", &rel[from.len()..]));
        }
    }
    Some(format!("/{rel}"))
}

fn under(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// A symlink's target after the move: absolute targets move with their
/// files; relative ones are resolved where Debian had them and written
/// relative to where the link now is.
fn link_target(link_rel: &str, target: &str) -> Option<String> {
    if let Some(abs) = target.strip_prefix('/') {
        return rhel_path(&normalize(abs));
    }
    let parent = link_rel.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    let resolved = rhel_path(&normalize(&format!("{parent}/{target}")))?;
    let link_new = rhel_path(link_rel)?;
    let new_parent = link_new.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    Some(relative(new_parent, &resolved))
}

/// `path` with `.` and `..` components folded (never above the root).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// `to` written relative to the directory `from` (both absolute).
fn relative(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|c| !c.is_empty()).collect();
    let to: Vec<&str> = to.split('/').filter(|c| !c.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

/// RPM-style automatic dependencies of a file list: `soname()(64bit)` for
/// every shared library it ships, and for every library its ELF files need
/// that it does not ship itself.
pub fn elf_deps(files: &[FileSpec]) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut provides = BTreeSet::new();
    let mut needed = BTreeSet::new();
    for f in files {
        let FileKind::File(content) = &f.kind else {
            continue;
        };
        let Some(dynamic) = elf_dynamic(content) else {
            continue;
        };
        if let Some(soname) = dynamic.soname {
            provides.insert(format!("{soname}()(64bit)"));
        }
        needed.extend(dynamic.needed.iter().map(|n| format!("{n}()(64bit)")));
    }
    let requires = needed.difference(&provides).cloned().collect();
    (provides, requires)
}

struct Dynamic {
    soname: Option<String>,
    needed: Vec<String>,
}

/// The SONAME and NEEDED entries of a 64-bit little-endian ELF file.
fn elf_dynamic(elf: &[u8]) -> Option<Dynamic> {
    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const DT_NEEDED: u64 = 1;
    const DT_STRTAB: u64 = 5;
    const DT_SONAME: u64 = 14;
    if !elf.starts_with(b"\x7fELF\x02\x01") {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    let (phoff, phentsize, phnum) = (u64_at(0x20)? as usize, u16_at(0x36)?, u16_at(0x38)?);
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let (offset, vaddr, filesz) = (u64_at(ph + 8)?, u64_at(ph + 16)?, u64_at(ph + 32)?);
        match u32_at(ph)? {
            PT_LOAD => loads.push((offset, vaddr, filesz)),
            PT_DYNAMIC => dynamic = Some((offset as usize, filesz as usize)),
            _ => {}
        }
    }
    let (dyn_off, dyn_size) = dynamic?;
    let mut strtab = None;
    let mut soname = None;
    let mut needed = Vec::new();
    for at in (dyn_off..dyn_off + dyn_size).step_by(16) {
        let (tag, val) = (u64_at(at)?, u64_at(at + 8)?);
        match tag {
            0 => break,
            DT_STRTAB => strtab = Some(val),
            DT_SONAME => soname = Some(val),
            DT_NEEDED => needed.push(val),
            _ => {}
        }
    }
    let strtab = strtab?;
    let strtab_off = loads
        .iter()
        .find(|(_, vaddr, size)| (*vaddr..vaddr + size).contains(&strtab))
        .map(|(offset, vaddr, _)| (offset + (strtab - vaddr)) as usize)?;
    let string = |at: u64| -> Option<String> {
        let start = strtab_off + at as usize;
        let rest = elf.get(start..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    Some(Dynamic {
        soname: soname.and_then(string),
        needed: needed.into_iter().filter_map(string).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_move_to_rhel_locations() {
        assert_eq!(rhel_path("bin/bash").as_deref(), Some("/usr/bin/bash"));
        assert_eq!(
            rhel_path("sbin/ldconfig").as_deref(),
            Some("/usr/sbin/ldconfig")
        );
        assert_eq!(
            rhel_path("lib/x86_64-linux-gnu/libc.so.6").as_deref(),
            Some("/usr/lib64/libc.so.6")
        );
        assert_eq!(
            rhel_path("usr/lib/x86_64-linux-gnu/gconv").as_deref(),
            Some("/usr/lib64/gconv")
        );
        assert_eq!(
            rhel_path("lib/systemd/systemd").as_deref(),
            Some("/usr/lib/systemd/systemd")
        );
        assert_eq!(rhel_path("libexec/x").as_deref(), Some("/libexec/x"));
        assert_eq!(rhel_path("binx/y").as_deref(), Some("/binx/y"));
        assert_eq!(rhel_path("usr/share/doc/bash/README"), None);
        assert_eq!(rhel_path("usr/bin/bash").as_deref(), Some("/usr/bin/bash"));
    }

    #[test]
    fn link_targets_follow_the_move() {
        // /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
        assert_eq!(
            link_target(
                "lib64/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
            )
            .as_deref(),
            Some("/usr/lib64/ld-linux-x86-64.so.2")
        );
        // same directory
        assert_eq!(
            link_target("usr/lib/x86_64-linux-gnu/libz.so.1", "libz.so.1.2.13").as_deref(),
            Some("libz.so.1.2.13")
        );
        // across moved directories: /sbin/x -> ../usr/bin/y is now /usr/sbin/x -> ../bin/y
        assert_eq!(
            link_target("sbin/x", "../usr/bin/y").as_deref(),
            Some("../bin/y")
        );
        assert_eq!(link_target("usr/bin/x", "../share/doc/y"), None);
        assert_eq!(relative("/usr/lib64", "/usr/lib64/a"), "a");
    }

    #[test]
    fn the_list_has_no_duplicates() {
        let all: Vec<_> = names().collect();
        let set: BTreeSet<_> = all.iter().collect();
        assert_eq!(all.len(), set.len());
    }
}
