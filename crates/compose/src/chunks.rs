//! What the base image is chunked by: which package owns each file of the
//! composed tree, and how often each package is expected to change.
//!
//! The chunker in strata-oscontainer sees opaque components with sizes and
//! change frequencies; the RPM knowledge lives here. A package's expected
//! change frequency comes from two sources:
//!
//! - its release: RHEL rebuilds a package for a z-stream with a dist tag
//!   `elX_Y` and one more release field per rebuild (`189.5.el8_6`). The
//!   packages a minor release's z-streams rebuilt once (kernel, glibc,
//!   openssl, systemd, NetworkManager, sudo) are the ones its next
//!   z-streams rebuild again, while most packages are never rebuilt during
//!   a minor: each rebuild counts [`PER_REBUILD`], so that a first build,
//!   which has no history, gives each of them a layer of its own (the
//!   smallest share one, with each other only);
//! - the workdir's history: how many earlier builds of the stream changed
//!   it (`package_diff.changed` of each build's strata.json), each counting
//!   twice a rebuild: a change seen here is stronger evidence.
//!
//! The initramfs is a component of its own, which changes at least as
//! often as the most volatile package: compose generates it from the
//! tree, so it changes with the kernel's modules and with every library
//! or program it copies (a glibc or systemd z-stream changes it without a
//! kernel update). The kernel image stays with its package (kernel-core),
//! whose other files change whenever it does. Files whose size differs
//! from the size their package declares (rewritten by compose: os-release,
//! passwd) are left to oscontainer's "unpackaged" component, so they do not
//! drag a package's layer along with every build. The EFI payload compose
//! moved to `/usr/lib/bootupd/updates` stays its packages' (shim, GRUB).
//!
//! This module must not decide layers itself.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use strata_oscontainer::ContentMap;
use strata_workdir::record::nevra_name;
use strata_workdir::Workdir;

/// Component of the initramfs compose generates.
pub const INITRAMFS: &str = "initramfs";

/// What one z-stream rebuild in a package's release adds to its change
/// frequency. The chunker weighs a component of frequency `f` as `f + 1`
/// times as likely to change as one never seen changing, and trades that
/// against size: a package rebuilt once weighs as much as 33 stable
/// packages of its size. An estimate of RHEL's errata: a z-stream batch
/// brings the kernel almost always and one or more of the few dozen
/// packages already rebuilt in the minor, while a first rebuild of one
/// of the hundreds never rebuilt is rare. Weaker weights (9) let the
/// chunker pair small rebuilt packages (openssl-libs, sudo) with stable
/// neighbours to give big stable packages layers of their own.
const PER_REBUILD: u32 = 32;

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
    PER_REBUILD
        .saturating_mul(zstream_rebuilds(release).saturating_add(history_changes.saturating_mul(2)))
}

/// The components of the tree whose rpmdb is at `rpmdb` (its
/// `usr/share/rpm`), with the kernel `kver`'s initramfs as its own
/// component.
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
    map.add_component(INITRAMFS, most.saturating_add(1));
    map.assign(&format!("/usr/lib/modules/{kver}/initramfs.img"), INITRAMFS);
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

    #[test]
    fn frequencies_weigh_rebuilds_and_history() {
        assert_eq!(frequency("12.el8", 0), 0);
        assert_eq!(frequency("7.el8_6", 0), PER_REBUILD);
        assert_eq!(frequency("189.5.el8_6", 0), 2 * PER_REBUILD);
        // A change this workdir saw counts twice a rebuild.
        assert_eq!(frequency("12.el8", 1), 2 * PER_REBUILD);
        assert_eq!(frequency("7.el8_6", u32::MAX), u32::MAX);
    }
}
