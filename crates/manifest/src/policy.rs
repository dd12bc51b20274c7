//! The input policy (`inputs:`): which repos may contribute packages, and
//! which signing keys packages must be signed with.
//!
//! This is what makes a base RHEL-only: a repo may be listed in `repos` (so
//! dnf sees it) without being allowed to contribute a single package.
//!
//! Must not: read keys or check signatures. A key given as `{file: …}` is
//! kept as a path or URL for the caller to read; enforcement is compose's and
//! derive's job.

use std::fmt;
use std::path::PathBuf;

use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::merge::merge_fields;
use crate::spanned::{Spanned, Str};

/// An OpenPGP key fingerprint: 40 (v4) or 64 (v5/v6) hex digits, stored
/// upper-case without spaces.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// Accepts hex in any case, with spaces between groups
    /// (`567E 347A D004 …` as gpg prints it).
    pub fn parse(text: &str) -> Result<Self, String> {
        let hex: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(bad) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(format!(
                "`{text}` is not a key fingerprint: `{bad}` is not a hex digit"
            ));
        }
        if hex.len() != 40 && hex.len() != 64 {
            return Err(format!(
                "`{text}` is not a key fingerprint: it has {} hex digits, not 40 or 64",
                hex.len()
            ));
        }
        Ok(Fingerprint(hex.to_ascii_uppercase()))
    }

    /// Upper-case hex, no spaces.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `other` (any case, spaces allowed) is this fingerprint.
    pub fn matches(&self, other: &str) -> bool {
        Fingerprint::parse(other).is_ok_and(|f| f == *self)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Fingerprint::parse(s)
    }
}

/// One allowed signing key. Ordered by kind (fingerprints, files, URLs),
/// then by what names it, so that the keys can be read as a set.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyRef {
    /// Given by fingerprint.
    Fingerprint(Fingerprint),
    /// An armored public key in a local file (`{file: path}` or a `file://`
    /// URL), resolved against the manifest that names it. The caller reads
    /// it and allows the key's fingerprint.
    File(#[serde(serialize_with = "crate::canonical::path")] PathBuf),
    /// An armored public key at another URL (`https://…`), for the caller
    /// to fetch.
    Url(String),
}

/// The policy: packages must come from `repos` and be signed by `keys`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InputPolicy {
    /// Repo ids allowed to contribute packages.
    pub repos: Vec<String>,
    /// Keys packages may be signed with.
    pub keys: Vec<KeyRef>,
}

impl InputPolicy {
    /// The policy's lists as the sets they are (what is allowed has no
    /// order): see [`crate::canonical::as_set`].
    pub(crate) fn as_sets(&mut self) {
        crate::canonical::as_set(&mut self.repos);
        crate::canonical::as_set(&mut self.keys);
    }

    /// Whether packages from repo `id` are allowed.
    pub fn allows_repo(&self, id: &str) -> bool {
        self.repos.iter().any(|r| r == id)
    }

    /// The keys given by fingerprint.
    pub fn fingerprints(&self) -> impl Iterator<Item = &Fingerprint> {
        self.keys.iter().filter_map(|k| match k {
            KeyRef::Fingerprint(f) => Some(f),
            _ => None,
        })
    }
}

/// `inputs:` as one file states it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartialInputs {
    pub(crate) repos: Option<Vec<Str>>,
    pub(crate) keys: Option<Vec<KeyEntry>>,
}
merge_fields!(PartialInputs { repos, keys });

/// An `inputs.keys` entry: a fingerprint, or `{file: path-or-url}`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum KeyEntry {
    Fingerprint(Str),
    File(Str),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    file: Str,
}

impl<'de> Deserialize<'de> for KeyEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyEntry;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key fingerprint (quoted if it is all digits) or {file: path-or-url}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyEntry, E> {
                let s: Str = Spanned::deserialize(de::value::StrDeserializer::<E>::new(v))?;
                Ok(KeyEntry::Fingerprint(s))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<KeyEntry, A::Error> {
                let key = KeyFile::deserialize(MapAccessDeserializer::new(map))?;
                Ok(KeyEntry::File(key.file))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_table() {
        let ok = [
            (
                "567E347AD0044ADE55BA8A5F199E2F91FD431D51",
                "567E347AD0044ADE55BA8A5F199E2F91FD431D51",
            ),
            (
                "567e347ad0044ade55ba8a5f199e2f91fd431d51",
                "567E347AD0044ADE55BA8A5F199E2F91FD431D51",
            ),
            (
                "567E 347A D004 4ADE 55BA  8A5F 199E 2F91 FD43 1D51",
                "567E347AD0044ADE55BA8A5F199E2F91FD431D51",
            ),
            (&"ab".repeat(32), &"AB".repeat(32)),
        ];
        for (input, want) in ok {
            assert_eq!(Fingerprint::parse(input).unwrap().as_str(), want);
        }
        let bad = [
            ("567E347AD0044ADE55BA8A5F199E2F91FD431D5", "`567E347AD0044ADE55BA8A5F199E2F91FD431D5` is not a key fingerprint: it has 39 hex digits, not 40 or 64"),
            ("0x567E347AD0044ADE55BA8A5F199E2F91FD431D", "`0x567E347AD0044ADE55BA8A5F199E2F91FD431D` is not a key fingerprint: `x` is not a hex digit"),
            ("", "`` is not a key fingerprint: it has 0 hex digits, not 40 or 64"),
        ];
        for (input, want) in bad {
            assert_eq!(Fingerprint::parse(input).unwrap_err(), want);
        }
        let f = Fingerprint::parse("567E347AD0044ADE55BA8A5F199E2F91FD431D51").unwrap();
        assert!(f.matches("567e 347a d004 4ade 55ba 8a5f 199e 2f91 fd43 1d51"));
        assert!(!f.matches("6A6AA7C97C8890AEC6AEBFE2F76F66C3D4082792"));
    }
}
