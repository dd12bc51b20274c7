//! The base lock: a release installs on top of the base, and the base's
//! packages stay as they are unless the release manifest lets it update
//! them (`allow-base-upgrade`). A refusal names the packages that need the
//! update and the requirement, read from the downloaded RPMs' headers.
//!
//! It judges a resolve that already happened: it must not resolve, download
//! or change the package set itself.

use std::collections::BTreeSet;

use anyhow::{bail, Result};
use strata_dnf::Package;
use strata_manifest::ReleaseManifest;
use strata_workdir::record::nevra_name;

/// Base packages are locked: an update of one fails naming the release
/// packages that need it, unless `allow-base-upgrade` names it. Returns
/// the allowed updates.
pub(crate) fn check_base_locked(
    m: &ReleaseManifest,
    packages: &[Package],
    removed: &[String],
) -> Result<Vec<String>> {
    let mut allowed = Vec::new();
    let mut refused = Vec::new();
    // What the manifest itself asked for is the cause when it names a base
    // package: blaming the packages that happen to need it misleads.
    let requested: BTreeSet<&str> = m
        .packages
        .iter()
        .flat_map(|p| p.split_whitespace())
        .collect();
    for old in removed {
        let replacement = packages.iter().find(|p| nevra_name(old) == p.name);
        let name = replacement
            .map(|p| p.name.clone())
            .unwrap_or_else(|| nevra_name(old).to_string());
        if m.allow_base_upgrade.contains(&name) {
            allowed.push(format!(
                "{old} -> {}",
                replacement.map(|p| p.nevra.as_str()).unwrap_or("(removed)")
            ));
            continue;
        }
        let needed_by = replacement
            .map(|r| requirers(packages, r))
            .unwrap_or_default();
        refused.push(match (replacement, needed_by.is_empty()) {
            (Some(r), _) if requested.contains(r.name.as_str()) => format!(
                "packages asks for {}, which would update base package {old} to {}",
                r.name, r.nevra
            ),
            (Some(r), false) => format!(
                "{} needs {} but the base has {old}",
                needed_by.join(", "),
                r.nevra
            ),
            (Some(r), true) => {
                format!("the release would update base package {old} to {}", r.nevra)
            }
            (None, _) => format!("the release would remove base package {old}"),
        });
    }
    if !refused.is_empty() {
        bail!(
            "release {}: base packages are locked: {} (list a package under allow-base-upgrade to let this release update it)",
            m.release,
            refused.join("; ")
        );
    }
    Ok(allowed)
}

/// The packages among `packages` whose requirements `target` satisfies
/// (by name or a provide), with the requirement: `crun-1.8 (libseccomp >= 2.5.3)`.
fn requirers(packages: &[Package], target: &Package) -> Vec<String> {
    let provides: BTreeSet<String> = target
        .local_path
        .as_ref()
        .and_then(|p| rpm::PackageMetadata::open(p).ok())
        .and_then(|m| m.get_provides().ok())
        .map(|deps| deps.into_iter().map(|d| d.name).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for p in packages.iter().filter(|p| p.name != target.name) {
        let Some(meta) = p
            .local_path
            .as_ref()
            .and_then(|l| rpm::PackageMetadata::open(l).ok())
        else {
            continue;
        };
        for d in meta.get_requires().unwrap_or_default() {
            if d.name == target.name || provides.contains(&d.name) {
                out.push(format!("{} ({})", p.nevra, dependency_text(&d)));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn dependency_text(d: &rpm::Dependency) -> String {
    use rpm::DependencyFlags as F;
    if d.version.is_empty() {
        return d.name.clone();
    }
    let less = d.flags.contains(F::LESS);
    let greater = d.flags.contains(F::GREATER);
    let equal = d.flags.contains(F::EQUAL);
    let op = match (less, greater, equal) {
        (true, _, true) => "<=",
        (true, _, false) => "<",
        (_, true, true) => ">=",
        (_, true, false) => ">",
        _ => "=",
    };
    format!("{} {op} {}", d.name, d.version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpm::Dependency as D;

    #[test]
    fn requirements_read_as_rpm_writes_them() {
        for (dep, want) in [
            (D::any("libseccomp"), "libseccomp"),
            (D::eq("crun", "1.8"), "crun = 1.8"),
            (D::less("a", "2"), "a < 2"),
            (D::less_eq("a", "2"), "a <= 2"),
            (D::greater("a", "2"), "a > 2"),
            (D::greater_eq("libseccomp", "2.5.3"), "libseccomp >= 2.5.3"),
        ] {
            assert_eq!(dependency_text(&dep), want);
        }
    }
}
