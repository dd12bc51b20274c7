//! The derived image's identity, from its base's os-release (RHCOS on
//! RHEL, OKD's SCOS on CentOS Stream). The base's os-release is read here, and
//! everything named after it comes from here: the build stream's prefix,
//! the names in the records and labels, and the derived tree's os-release.
//!
//! It reads the base checkout's `usr/lib/os-release` and nothing else; it
//! writes nothing (the worker writes the os-release these values make).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use strata_manifest::ReleaseManifest;

fn os_release_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix('=')?;
        Some(v.trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

/// What a derived image is, by its base: RHCOS on a RHEL base, OKD's SCOS
/// on a CentOS Stream one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CoreOs {
    Rhcos,
    Scos,
}

impl CoreOs {
    /// The streams' prefix: OKD's releases are streams of their own, so
    /// that one workdir can hold OpenShift 4.19 and OKD 4.19.
    pub(crate) fn stream_prefix(self) -> &'static str {
        match self {
            CoreOs::Rhcos => "ocp",
            CoreOs::Scos => "okd",
        }
    }

    /// Its os-release `ID`, and the name coreos-assembler's records use.
    pub(crate) fn osname(self) -> &'static str {
        match self {
            CoreOs::Rhcos => "rhcos",
            CoreOs::Scos => "scos",
        }
    }

    /// Its os-release `NAME` and its `io.openshift.build.version-display-names`.
    pub(crate) fn display_name(self) -> &'static str {
        match self {
            CoreOs::Rhcos => "Red Hat Enterprise Linux CoreOS",
            CoreOs::Scos => "CentOS Stream CoreOS",
        }
    }
}

/// The base's os-release, read once: what a release's plan and its derived
/// os-release need.
#[derive(Clone, Debug)]
pub(crate) struct BaseOs {
    /// `$releasever`: the major of `VERSION_ID`.
    pub(crate) releasever: String,
    /// `VERSION_ID`: the RHEL `major.minor` (`9.6`), `9` on CentOS Stream.
    pub(crate) version_id: String,
    pub(crate) kind: CoreOs,
}

impl BaseOs {
    pub(crate) fn of(lower: &Path) -> Result<BaseOs> {
        let path = lower.join("usr/lib/os-release");
        let text = fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the base tree's {} (a base composed by strata always has one: is \
                 this an ostree base image?)",
                path.display()
            )
        })?;
        let version_id = os_release_field(&text, "VERSION_ID")
            .context("the base tree's /usr/lib/os-release has no VERSION_ID")?;
        Ok(BaseOs {
            releasever: version_id
                .split('.')
                .next()
                .unwrap_or(&version_id)
                .to_string(),
            kind: match os_release_field(&text, "ID").as_deref() {
                Some("centos") => CoreOs::Scos,
                _ => CoreOs::Rhcos,
            },
            version_id,
        })
    }
}

/// The os-release of a derived tree (DESIGN.md "Versions").
pub(crate) fn os_release_values(
    m: &ReleaseManifest,
    version: &str,
    release: &str,
    base: &BaseOs,
) -> Vec<(String, String)> {
    // As RHCOS's node image names itself: ID rhcos, the OpenShift release
    // as VERSION_ID, the RHEL minor in RHEL_VERSION (docs/formats.md); on
    // a CentOS Stream base, OKD's SCOS.
    let name = base.kind.display_name();
    let rhel = base.version_id.as_str();
    let id = base.kind.osname();
    let (product, os) = match base.kind {
        CoreOs::Rhcos => ("OpenShift", "RHEL"),
        CoreOs::Scos => ("OKD", "CentOS Stream"),
    };
    vec![
        ("NAME".into(), name.into()),
        ("ID".into(), id.into()),
        ("ID_LIKE".into(), "rhel fedora".into()),
        ("VERSION".into(), version.into()),
        ("VERSION_ID".into(), release.into()),
        ("VARIANT".into(), "CoreOS".into()),
        ("VARIANT_ID".into(), "coreos".into()),
        ("OPENSHIFT_VERSION".into(), release.into()),
        ("RHEL_VERSION".into(), rhel.into()),
        ("OSTREE_VERSION".into(), version.into()),
        (
            "PRETTY_NAME".into(),
            format!("{name} {version} ({product} {}, {os} {rhel})", m.release),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_fields_unquoted() {
        let text = "NAME=\"Red Hat Enterprise Linux\"\nID='rhel'\nVERSION_ID=8.6\nID_LIKE=fedora\n";
        for (key, want) in [
            ("NAME", Some("Red Hat Enterprise Linux")),
            ("ID", Some("rhel")),
            ("VERSION_ID", Some("8.6")),
            ("VERSION", None),
        ] {
            assert_eq!(os_release_field(text, key).as_deref(), want, "{key}");
        }
    }
}
