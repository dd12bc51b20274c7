//! The commit metadata strata writes and reads back: the keys, once, and
//! the values read from an image's commit made typed where they are read.
//!
//! compose records how it made the initramfs in the base commit (the
//! generator under [`INITRAMFS_GENERATOR`], its arguments under
//! rpm-ostree's own [`INITRAMFS_ARGS`], which rpm-ostree reads when it
//! makes an initramfs again on a node); derive makes the initramfs again
//! from them and disk makes the live initramfs with them. A base may come
//! from a registry, so what is read is untrusted: an argument becomes an
//! [`InitramfsArg`] when it is read, and the code that builds a command
//! line takes only that.
//!
//! Must not: decide which generators strata runs (that is the runner's
//! business, `strata_rootfs::initramfs`), or read anything but the
//! commit's own metadata.

use std::fmt;

use ostree::glib;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Commit metadata key: the initramfs generator's name (`dracut`), a
/// string.
pub const INITRAMFS_GENERATOR: &str = "strata.initramfs-generator";
/// Commit metadata key: the initramfs generator's arguments, as
/// rpm-ostree records them (`as`).
pub const INITRAMFS_ARGS: &str = "rpmostree.initramfs-args";

/// The rule every initramfs argument follows.
const ARG_RULE: &str = "an initramfs generator argument (no control characters)";

/// One argument to the initramfs generator: text without control
/// characters (it becomes a word of a command line run in the tree).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InitramfsArg(String);

impl InitramfsArg {
    /// `text` as an argument; `what` names where it was found in the
    /// error (a manifest, a commit's key).
    pub fn new(what: &str, text: &str) -> Result<Self> {
        if text.chars().any(char::is_control) {
            return Err(Error::BadValue {
                what: what.to_string(),
                // Escaped where it is shown (`{value:?}`); cut here.
                value: cut(text),
                rule: ARG_RULE,
            });
        }
        Ok(Self(text.to_string()))
    }

    /// Each of `texts` as an argument, the first bad one refused.
    pub fn all<S: AsRef<str>>(what: &str, texts: &[S]) -> Result<Vec<Self>> {
        texts.iter().map(|t| Self::new(what, t.as_ref())).collect()
    }

    /// The argument as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for InitramfsArg {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        Self::new("initramfs argument", &s)
    }
}

impl From<InitramfsArg> for String {
    fn from(a: InitramfsArg) -> String {
        a.0
    }
}

// Written as rpm-ostree writes its key: an array of strings (`as`).
impl glib::variant::StaticVariantType for InitramfsArg {
    fn static_variant_type() -> std::borrow::Cow<'static, glib::VariantTy> {
        String::static_variant_type()
    }
}

impl glib::variant::ToVariant for InitramfsArg {
    fn to_variant(&self) -> glib::Variant {
        self.0.to_variant()
    }
}

impl AsRef<str> for InitramfsArg {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InitramfsArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// At most [`strata_process::text::SHOWN_CHARS`] characters of `text`,
/// then `…`.
fn cut(text: &str) -> String {
    let max = strata_process::text::SHOWN_CHARS;
    let mut out: String = text.chars().take(max).collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// How a commit records its initramfs was made. A base built elsewhere
/// may record nothing: no generator and no arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedInitramfs {
    /// The generator's name as recorded ([`INITRAMFS_GENERATOR`]); whether
    /// strata runs it is the runner's to say.
    pub generator: Option<String>,
    /// The generator's arguments ([`INITRAMFS_ARGS`]), checked.
    pub args: Vec<InitramfsArg>,
}

impl RecordedInitramfs {
    /// The values found under the two keys (`None`: the key is absent or
    /// of another type), checked.
    pub fn parse(generator: Option<String>, args: Option<Vec<String>>) -> Result<Self> {
        let args = InitramfsArg::all(
            &format!("commit metadata {INITRAMFS_ARGS}"),
            &args.unwrap_or_default(),
        )?;
        Ok(Self { generator, args })
    }

    /// What the commit `commit` (as `ostree::Repo::load_commit` gives it)
    /// records.
    pub fn read(commit: &glib::Variant) -> Result<Self> {
        let meta = glib::VariantDict::new(Some(&commit.child_value(0)));
        Self::parse(
            meta.lookup::<String>(INITRAMFS_GENERATOR).ok().flatten(),
            meta.lookup::<Vec<String>>(INITRAMFS_ARGS).ok().flatten(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostree::glib::prelude::*;

    #[test]
    fn initramfs_args_with_control_characters_are_refused_when_read() {
        let table: &[(&[&str], bool)] = &[
            (&[], true),
            (&["--no-hostonly", "--add", "ignition"], true),
            (&["--add=a b", "ünïcode"], true),
            (&["--add\nignition"], false),
            (&["ok", "\u{1b}[2J"], false),
            (&["\t"], false),
            (&["\u{85}"], false),
        ];
        for (args, ok) in table {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let got = RecordedInitramfs::parse(Some("dracut".into()), Some(args.clone()));
            assert_eq!(got.is_ok(), *ok, "{args:?}");
            if let Ok(r) = got {
                let back: Vec<&str> = r.args.iter().map(InitramfsArg::as_str).collect();
                assert_eq!(back, args);
            }
        }
    }

    #[test]
    fn a_refused_argument_is_one_line_naming_the_key_escaped_and_cut() {
        let long = format!("--x\u{7}{}", "y".repeat(1000));
        let e = RecordedInitramfs::parse(None, Some(vec!["ok".into(), long])).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("commit metadata rpmostree.initramfs-args \""),
            "{text}"
        );
        assert!(text.ends_with(ARG_RULE), "{text}");
        assert!(!text.chars().any(char::is_control), "{text}");
        assert!(text.len() < 300, "{}", text.len());
        assert!(text.contains("\\u{7}") && text.contains('…'), "{text}");
    }

    #[test]
    fn the_recorded_initramfs_is_read_from_the_commits_metadata() {
        let dict = glib::VariantDict::new(None);
        dict.insert_value(INITRAMFS_GENERATOR, &"dracut".to_variant());
        dict.insert_value(
            INITRAMFS_ARGS,
            &vec!["--no-hostonly".to_string()].to_variant(),
        );
        let commit = glib::Variant::tuple_from_iter([dict.end()]);
        let r = RecordedInitramfs::read(&commit).unwrap();
        // What compose writes from the typed arguments reads back as
        // rpm-ostree's strings.
        let written = r.args.to_variant();
        assert_eq!(written.type_().as_str(), "as");
        assert_eq!(written, vec!["--no-hostonly".to_string()].to_variant());
        assert_eq!(r.generator.as_deref(), Some("dracut"));
        assert_eq!(r.args, [InitramfsArg::new("t", "--no-hostonly").unwrap()]);

        let empty = glib::Variant::tuple_from_iter([glib::VariantDict::new(None).end()]);
        assert_eq!(
            RecordedInitramfs::read(&empty).unwrap(),
            RecordedInitramfs::default()
        );
    }

    #[test]
    fn an_argument_deserialised_from_a_job_is_checked_again() {
        let ok: InitramfsArg = serde_json::from_str("\"--add\"").unwrap();
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"--add\"");
        assert!(serde_json::from_str::<InitramfsArg>("\"a\\u0000b\"").is_err());
    }
}
