//! The image format's vocabulary: the label names strata and ostree-ext
//! clients read, the validated values that may leave an image, and the
//! config's RFC 3339 times (encapsulate, import and derived use them all
//! from here).
//!
//! Labels come from whoever built the image, so they are untrusted input.
//! A value that reaches a path (the stateroot, the build directory), a
//! file's content (a BLS entry, a GRUB title) or a command line becomes
//! one of the newtypes here when it is read, and code that builds those
//! things takes the newtype, never a `String`. Each type admits only the
//! grammar its value has in RHCOS: no `/`, no `..`, no whitespace, no
//! control characters. Refusals name the label and show the value escaped.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Label: the ostree commit checksum.
pub const LABEL_COMMIT: &str = "ostree.commit";
/// Label: diff ID of the last ostree layer.
pub const LABEL_FINAL_DIFFID: &str = "ostree.final-diffid";
/// Label: the image is bootable by ostree.
pub const LABEL_BOOTABLE: &str = "ostree.bootable";
/// Label: the image is a bootc image.
pub const LABEL_BOOTC: &str = "containers.bootc";
/// Label: the kernel version.
pub const LABEL_LINUX: &str = "ostree.linux";
/// Label: the image version (OCI standard annotation key).
pub const LABEL_VERSION: &str = "org.opencontainers.image.version";
/// Label: the ostree osname (stateroot) nodes deploy the image under.
pub const LABEL_OSNAME: &str = "com.coreos.osname";
/// Label: the OpenShift release a derived image belongs to (`4.13`).
pub const LABEL_OPENSHIFT_VERSION: &str = "com.coreos.openshift-version";
/// Label: the versions the cluster-version operator reads
/// (`machine-os=<version>`).
pub const LABEL_BUILD_VERSIONS: &str = "io.openshift.build.versions";

/// A value that can be read from a label, with the rule it must follow.
pub trait LabelValue: Sized {
    /// The grammar, in words, for error messages.
    const RULE: &'static str;
    /// The value, if `text` follows the rule.
    fn parse_value(text: &str) -> Option<Self>;
}

/// The label `name` of `labels` as a `T`: `None` when the image does not
/// carry it, an error naming the label and its (escaped) value when it
/// breaks `T`'s rule.
pub fn label<T: LabelValue>(labels: &BTreeMap<String, String>, name: &str) -> Result<Option<T>> {
    labels
        .get(name)
        .map(|v| {
            T::parse_value(v).ok_or_else(|| Error::BadLabel {
                label: name.to_string(),
                value: cut(v),
                rule: T::RULE,
            })
        })
        .transpose()
}

/// `value`, found where `what` says (a kernel directory of a commit, a
/// field of commit metadata), as a `T`, or an error naming both.
pub fn checked<T: LabelValue>(what: &str, value: &str) -> Result<T> {
    T::parse_value(value).ok_or_else(|| Error::BadValue {
        what: what.to_string(),
        value: value.to_string(),
        rule: T::RULE,
    })
}

/// The labels strata gives a meaning to, each read as its newtype: what
/// every stage that takes an image's labels (the disk stage; derive, which
/// also passes the base's on) checks, in one place, before it uses or
/// republishes any of them. A label the image does not carry is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KnownLabels {
    /// [`LABEL_COMMIT`].
    pub commit: Option<CommitId>,
    /// [`LABEL_VERSION`].
    pub version: Option<Version>,
    /// [`LABEL_OSNAME`].
    pub osname: Option<OsName>,
    /// [`LABEL_OPENSHIFT_VERSION`].
    pub openshift_version: Option<OcpVersion>,
    /// [`LABEL_LINUX`].
    pub linux: Option<KernelVersion>,
}

impl KnownLabels {
    /// Every label of `labels` that strata reads, checked against its
    /// grammar: the first that breaks it is the error (naming the label
    /// and its escaped value).
    /// Then every label, read or not, is held to [`check_all`]: a stage
    /// that takes an image's labels passes them on (derive into its
    /// image, the disk stage into its records).
    pub fn check(labels: &BTreeMap<String, String>) -> Result<Self> {
        let known = KnownLabels {
            commit: label(labels, LABEL_COMMIT)?,
            version: label(labels, LABEL_VERSION)?,
            osname: label(labels, LABEL_OSNAME)?,
            openshift_version: label(labels, LABEL_OPENSHIFT_VERSION)?,
            linux: label(labels, LABEL_LINUX)?,
        };
        check_all(labels)?;
        Ok(known)
    }
}

/// At most this many labels on an image (RHCOS's node image carries
/// about forty).
pub const MAX_LABELS: usize = 256;
/// At most this many bytes in a label's name.
pub const MAX_LABEL_NAME: usize = 256;
/// At most this many bytes in a label's value (RHCOS's longest, its
/// `description` and `io.openshift.build.versions`, are a few hundred).
pub const MAX_LABEL_VALUE: usize = 4096;

/// How many characters of an unfit label's name or value an error shows.
const SHOWN: usize = 64;

/// The rules every label follows, whatever it means or whether strata
/// reads it: at most [`MAX_LABELS`] of them, names of at most
/// [`MAX_LABEL_NAME`] bytes and values of at most [`MAX_LABEL_VALUE`],
/// no control character in either. A label that breaks them is refused
/// naming it, escaped and cut: an image strata publishes carries no
/// label it did not check.
pub fn check_all(labels: &BTreeMap<String, String>) -> Result<()> {
    if labels.len() > MAX_LABELS {
        return Err(Error::UnfitLabel(format!(
            "the image has {} labels, more than {MAX_LABELS}",
            labels.len()
        )));
    }
    for (name, value) in labels {
        let unfit = |why: String| Error::UnfitLabel(format!("label {} {why}", shown(name)));
        if name.is_empty() {
            return Err(unfit("has an empty name".into()));
        }
        if name.len() > MAX_LABEL_NAME {
            return Err(unfit(format!(
                "has a name of {} bytes, more than {MAX_LABEL_NAME}",
                name.len()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(unfit("has a control character in its name".into()));
        }
        if value.len() > MAX_LABEL_VALUE {
            return Err(unfit(format!(
                "has a value of {} bytes, more than {MAX_LABEL_VALUE} ({})",
                value.len(),
                shown(value)
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(unfit(format!(
                "has a control character in its value ({})",
                shown(value)
            )));
        }
    }
    Ok(())
}

/// `text` cut after [`SHOWN`] characters (`…` marking the cut), for a
/// value an error shows with `{:?}`.
fn cut(text: &str) -> String {
    let mut out: String = text.chars().take(SHOWN).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// `text` quoted, control characters escaped, cut after [`SHOWN`]
/// characters: an untrusted name or value fit for one error line.
fn shown(text: &str) -> String {
    let mut cut: String = text.chars().take(SHOWN).collect();
    let more = cut.len() < text.len();
    cut = format!(
        "\"{}\"",
        strata_process::text::escaped(&cut).replace('"', "\\\"")
    );
    if more {
        cut.push('…');
    }
    cut
}

macro_rules! text_newtype {
    ($(#[$doc:meta])* $name:ident, $rule:expr, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(s: String) -> Result<Self> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl $name {
            /// The value as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl LabelValue for $name {
            const RULE: &'static str = $rule;
            fn parse_value(text: &str) -> Option<Self> {
                let check: fn(&str) -> bool = $check;
                check(text).then(|| Self(text.to_string()))
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                checked(stringify!($name), s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

text_newtype!(
    /// An ostree osname (stateroot), e.g. `rhcos`: `[a-z0-9_-]+`, at most
    /// 64 characters. It names a directory of every node's sysroot.
    OsName,
    "an osname ([a-z0-9_-], 1 to 64 characters)",
    |s| (1..=64).contains(&s.len())
        && s
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
);

text_newtype!(
    /// An OpenShift release, `MAJOR.MINOR` (`4.13`), each part a number of
    /// at most 4 digits without a leading zero.
    OcpVersion,
    "an OpenShift release MAJOR.MINOR (e.g. 4.13)",
    |s| {
        let number = |p: &str| {
            (1..=4).contains(&p.len())
                && p.bytes().all(|b| b.is_ascii_digit())
                && !(p.len() > 1 && p.starts_with('0'))
        };
        matches!(s.split_once('.'), Some((a, b)) if number(a) && number(b))
    }
);

text_newtype!(
    /// A build version (`8.6.20261202-0`, `413.86.202612020930-0`,
    /// `4.19.0-okd-scos.1`): it names build directories and artifacts, so
    /// it is one path component of `[A-Za-z0-9._+~-]`, starting with a
    /// letter or digit, at most 128 characters.
    Version,
    "a version ([A-Za-z0-9._+~-], starting with a letter or digit, at most 128 characters)",
    version_like
);

text_newtype!(
    /// A kernel version as a directory of `/usr/lib/modules` names it
    /// (`4.18.0-372.9.1.el8.x86_64`): the same grammar as [`Version`]. It
    /// reaches BLS entries and boot paths.
    KernelVersion,
    "a kernel version ([A-Za-z0-9._+~-], starting with a letter or digit, at most 128 characters)",
    version_like
);

text_newtype!(
    /// An ostree commit checksum: 64 lowercase hexadecimal digits.
    CommitId,
    "an ostree commit checksum (64 lowercase hex digits)",
    is_sha256_hex
);

/// A sha256 as libostree writes checksums: 64 lowercase hex digits.
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn version_like(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'~' | b'-'))
}

/// Image config times (`created`) as the OCI format writes them.
/// RFC 3339 UTC timestamp (`1970-01-01T00:00:00Z`) of a Unix time.
pub(crate) fn rfc3339(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("@{secs}"))
}

/// Unix time of an RFC 3339 timestamp as [`rfc3339`] and most tools write it
/// (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm)`).
pub(crate) fn parse_rfc3339(s: &str) -> Option<u64> {
    let t = chrono::DateTime::parse_from_rfc3339(s).ok()?;
    u64::try_from(t.timestamp()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        let cases = [
            (0u64, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_796_212_800, "2026-12-02T12:00:00Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
        ];
        for (secs, s) in cases {
            assert_eq!(rfc3339(secs), s);
            assert_eq!(parse_rfc3339(s), Some(secs));
        }
        assert_eq!(
            parse_rfc3339("2026-12-02T13:00:00.123+01:00"),
            Some(1_796_212_800)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    fn ok<T: LabelValue>(s: &str) -> bool {
        T::parse_value(s).is_some()
    }

    #[test]
    fn osnames() {
        for good in ["rhcos", "scos", "fedora-coreos", "os_1"] {
            assert!(ok::<OsName>(good), "{good}");
        }
        for bad in [
            "",
            "../../X",
            "a/b",
            "RHCOS",
            "a b",
            ".",
            "..",
            "x\n",
            &"a".repeat(65),
        ] {
            assert!(!ok::<OsName>(bad), "{bad:?}");
        }
    }

    #[test]
    fn openshift_versions() {
        for good in ["4.13", "4.9", "10.0", "4.1000"] {
            assert!(ok::<OcpVersion>(good), "{good}");
        }
        for bad in [
            "",
            "4",
            "4.13.1",
            "4.13/../../X",
            "4.13\noptions init=/bin/sh",
            "04.13",
            "4.x",
            "4.",
            ".13",
            "4.13 ",
            "4.99999",
        ] {
            assert!(!ok::<OcpVersion>(bad), "{bad:?}");
        }
    }

    #[test]
    fn versions() {
        for good in [
            "8.6.20261202-0",
            "413.86.202612020930-0",
            "9.6.20250101-12",
            "4.19.0-okd-scos.1",
            "1.0~rc1+git",
        ] {
            assert!(ok::<Version>(good), "{good}");
            assert!(ok::<KernelVersion>(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "-rf",
            ".hidden",
            "1.0 beta",
            "1\n2",
            "1\t",
            "1;2",
            &"9".repeat(129),
        ] {
            assert!(!ok::<Version>(bad), "{bad:?}");
        }
    }

    #[test]
    fn commit_ids() {
        assert!(ok::<CommitId>(&"ab".repeat(32)));
        for bad in [
            "",
            "../x",
            &"AB".repeat(32),
            &"a".repeat(63),
            &"g".repeat(64),
        ] {
            assert!(!ok::<CommitId>(bad), "{bad:?}");
        }
    }

    /// A label that breaks its rule is refused naming the label and its
    /// value, escaped so that a newline cannot start a line of its own.
    #[test]
    fn refusals_name_label_and_value() {
        let mut labels = BTreeMap::new();
        labels.insert(
            LABEL_OPENSHIFT_VERSION.to_string(),
            "4.13\noptions init=/bin/sh".into(),
        );
        let err = label::<OcpVersion>(&labels, LABEL_OPENSHIFT_VERSION).unwrap_err();
        let text = err.to_string();
        assert_eq!(
            text,
            "image label com.coreos.openshift-version=\"4.13\\noptions init=/bin/sh\" \
             is not an OpenShift release MAJOR.MINOR (e.g. 4.13)"
        );
        assert!(!text.contains('\n'));
        assert_eq!(label::<OsName>(&labels, LABEL_OSNAME).unwrap(), None);

        // A long value is cut: the error is one short line.
        labels.insert(LABEL_OSNAME.to_string(), "a/".repeat(1 << 20));
        let text = KnownLabels::check(&labels).unwrap_err().to_string();
        assert!(
            text.starts_with("image label com.coreos.osname=\"a/a/"),
            "{text}"
        );
        assert!(text.contains("…\" is not "), "{text}");
        assert!(text.len() < 200, "{text}");
    }

    /// Every label strata reads is checked by the one call both stages
    /// make: an osname that is a path was let through by derive, which
    /// only checked the commit and version it used itself.
    #[test]
    fn known_labels_check_every_label_strata_reads() {
        let good: BTreeMap<String, String> = [
            (LABEL_COMMIT, "ab".repeat(32)),
            (LABEL_VERSION, "8.6.20261202-0".to_string()),
            (LABEL_OSNAME, "rhcos".to_string()),
            (LABEL_OPENSHIFT_VERSION, "4.13".to_string()),
            (LABEL_LINUX, "4.18.0-372.9.1.el8.x86_64".to_string()),
            ("description", "anything at all".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let k = KnownLabels::check(&good).unwrap();
        assert_eq!(k.osname.unwrap().as_str(), "rhcos");
        assert_eq!(
            KnownLabels::check(&BTreeMap::new()).unwrap(),
            KnownLabels::default()
        );
        for (name, bad) in [
            (LABEL_COMMIT, "../x"),
            (LABEL_VERSION, "8.6/../x"),
            (LABEL_OSNAME, "../../../tmp/x"),
            (LABEL_OSNAME, "/etc"),
            (LABEL_OPENSHIFT_VERSION, "4.13\nx"),
            (LABEL_LINUX, "../vmlinuz"),
        ] {
            let mut labels = good.clone();
            labels.insert(name.to_string(), bad.to_string());
            let e = KnownLabels::check(&labels).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("image label {name}={bad:?} is not ")),
                "{e}"
            );
        }
    }

    /// derive checked only the labels strata reads and republished every
    /// other one (`description`, `containers.bootc`, …) as it found it,
    /// control characters and megabytes included.
    #[test]
    fn every_label_is_refused_with_control_characters_or_oversized() {
        let rhcos: BTreeMap<String, String> = [
            (
                "description",
                "Red Hat Enterprise Linux CoreOS is the OS of OpenShift nodes",
            ),
            (
                "io.openshift.build.versions",
                "machine-os=413.86.202612020930-0",
            ),
            ("containers.bootc", "1"),
            ("ostree.bootable", "true"),
            ("vendor", "Red Hat, Inc."),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        check_all(&rhcos).unwrap();
        KnownLabels::check(&rhcos).unwrap();
        let big = "x".repeat(MAX_LABEL_VALUE + 1);
        let long_name = "n".repeat(MAX_LABEL_NAME + 1);
        for (name, value, says) in [
            (
                "description",
                "a\nb",
                "label \"description\" has a control character in its value (\"a\\nb\")",
            ),
            (
                "containers.bootc",
                "1\x1b[2J",
                "label \"containers.bootc\" has a control character in its value (\"1\\u{1b}[2J\")",
            ),
            (
                "a\nb",
                "v",
                "label \"a\\nb\" has a control character in its name",
            ),
            (
                "description",
                big.as_str(),
                "label \"description\" has a value of 4097 bytes, more than 4096 (\"xxxx",
            ),
            (
                long_name.as_str(),
                "v",
                "has a name of 257 bytes, more than 256",
            ),
            ("", "v", "label \"\" has an empty name"),
        ] {
            let mut labels = rhcos.clone();
            labels.insert(name.to_string(), value.to_string());
            for e in [
                check_all(&labels).unwrap_err(),
                KnownLabels::check(&labels).unwrap_err(),
            ] {
                let text = e.to_string();
                assert!(text.starts_with("image labels: "), "{text}");
                assert!(text.contains(says), "{text}");
                assert!(!text.chars().any(char::is_control), "{text}");
                assert!(text.len() < 300, "{text}");
            }
        }
        let many: BTreeMap<String, String> = (0..=MAX_LABELS)
            .map(|i| (format!("l{i}"), String::new()))
            .collect();
        let e = check_all(&many).unwrap_err().to_string();
        assert_eq!(e, "image labels: the image has 257 labels, more than 256");
    }
}
