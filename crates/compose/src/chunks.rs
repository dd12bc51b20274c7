//! What the base image is chunked by: which package owns each file of the
//! composed tree, and how often each package is expected to change.
//!
//! The chunker in strata-oscontainer sees opaque components with sizes and
//! change frequencies; the RPM knowledge lives here. A package's expected
//! change frequency comes from two sources:
//!
//! - the workdir's history: how many earlier builds of the stream changed it
//!   (`package_diff.changed` of each build's strata.json);
//! - its release: RHEL rebuilds a package for a z-stream with a dist tag
//!   `elX_Y` and one more release field per rebuild (`189.5.el8_6`), so a
//!   package that already had z-stream updates is likely to get more.
//!   This is what makes a first build, which has no history, isolate kernel,
//!   glibc, openssl and the like in their own layers.
//!
//! The kernel and initramfs form their own component, which changes at least
//! as often as the most volatile package (the initramfs is generated at
//! compose time from the tree's content). Files whose size differs from the
//! size their package declares (rewritten by compose: os-release, passwd)
//! are left to oscontainer's "unpackaged" component, so they do not drag a
//! package's layer along with every build. The EFI payload compose moved to
//! `/usr/lib/bootupd/updates` stays its packages' (shim, GRUB).
//!
//! This module must not decide layers itself.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use strata_oscontainer::ContentMap;
use strata_workdir::record::nevra_name;
use strata_workdir::Workdir;

/// Component of the kernel image and the generated initramfs.
pub const KERNEL_IMAGE: &str = "kernel-image";

/// How often a package changed in the workdir's earlier builds of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeHistory {
    /// Package name -> number of builds that changed it.
    pub changes: BTreeMap<String, u32>,
}

impl ChangeHistory {
    /// Reads the build records of `stream` in the workdir at `root`. Builds
    /// whose record is missing or unreadable count as no change.
    pub fn load(root: &Path, stream: &str) -> Result<Self> {
        let wd = Workdir::open(root)?;
        let mut changes: BTreeMap<String, u32> = BTreeMap::new();
        for b in wd.history()?.iter().filter(|b| b.stream == stream) {
            let Ok(Some(meta)) = wd.read_meta(&b.stream, &b.version) else {
                continue;
            };
            for entry in &meta.package_diff.changed {
                // "old-nevra -> new-nevra"
                if let Some(old) = entry.split(" -> ").next() {
                    *changes.entry(nevra_name(old).to_string()).or_default() += 1;
                }
            }
        }
        Ok(Self { changes })
    }
}

/// z-stream rebuilds a release shows: `7.el8_6` -> 1, `189.5.el8_6` -> 2,
/// `57.1.el8_6` -> 2, `12.el8` -> 0, `1.module+el8.6.0` -> 0.
fn zstream_rebuilds(release: &str) -> u32 {
    let Some(idx) = release.find(".el") else {
        return 0;
    };
    let (head, dist) = release.split_at(idx);
    if !dist[1..].split('.').next().is_some_and(|d| d.contains('_')) {
        return 0;
    }
    head.split('.')
        .filter(|f| f.bytes().all(|b| b.is_ascii_digit()))
        .count() as u32
}

/// Expected change frequency of a package.
fn frequency(release: &str, history_changes: u32) -> u32 {
    // A change seen in this workdir is stronger evidence than the release.
    zstream_rebuilds(release) + 2 * history_changes
}

/// The components of the tree whose rpmdb is at `rpmdb` (its
/// `usr/share/rpm`), with the kernel `kver`'s image and initramfs as their
/// own component.
pub fn content_map(rpmdb: &Path, kver: &str, history: &ChangeHistory) -> Result<ContentMap> {
    let backend = strata_rpmdb::Backend::detect(rpmdb).unwrap_or(strata_rpmdb::Backend::Sqlite);
    let out = strata_process::stdout(
        std::process::Command::new("rpm")
            .arg("--define")
            .arg(format!("_db_backend {}", backend.host_macro()))
            .arg("--dbpath")
            .arg(rpmdb)
            .args([
                "-qa",
                "--qf",
                "[%{=NAME}\\t%{=RELEASE}\\t%{FILESIZES}\\t%{FILENAMES}\\n]",
            ]),
    )
    .with_context(|| format!("listing the files of the packages in {}", rpmdb.display()))?;
    let mut map = ContentMap::new();
    let mut most = 0;
    let mut declared: BTreeMap<&str, u32> = BTreeMap::new();
    for line in out.lines() {
        let mut fields = line.splitn(4, '\t');
        let (Some(name), Some(release), Some(size), Some(path)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !declared.contains_key(name) {
            let f = frequency(release, history.changes.get(name).copied().unwrap_or(0));
            most = most.max(f);
            declared.insert(name, f);
            map.add_component(name, f);
        }
        // The EFI payload is in the commit where compose moved it, and
        // still its package's: it changes when shim or GRUB do.
        let moved = strata_rootfs::bootupd::payload_path(path);
        for p in std::iter::once(path).chain(moved.as_deref()) {
            match size.parse::<u64>() {
                Ok(s) => map.assign_sized(p, name, s),
                Err(_) => map.assign(p, name),
            }
        }
    }
    map.add_component(KERNEL_IMAGE, most + 1);
    for f in ["vmlinuz", "initramfs.img"] {
        map.assign(&format!("/usr/lib/modules/{kver}/{f}"), KERNEL_IMAGE);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstream_rebuilds_from_release() {
        for (release, want) in [
            ("7.el8_6", 1),
            ("189.5.el8_6", 2),
            ("57.1.el8_6", 2),
            ("18.el8_5", 1),
            ("12.el8", 0),
            ("1.module+el8.6.0", 0),
            ("4.git095f59c.el8", 0),
            ("35.module+el8.6.0+1234", 0),
            ("1", 0),
        ] {
            assert_eq!(zstream_rebuilds(release), want, "{release}");
        }
    }
}
