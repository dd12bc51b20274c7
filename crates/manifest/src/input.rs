//! The one way strata reads a YAML or JSON file a user hands it (manifests,
//! includes, `.repo` files, lockfiles, overrides files): a regular file
//! only, never more than a limit, checked against the manifest limits
//! before a parser sees it, and refused when a mapping repeats a key.
//!
//! A FIFO, a device or a directory is refused by name without being
//! opened for real (an `include: /dev/zero` would otherwise be read whole
//! before any limit applied, an `include: /dev/watchdog` would arm the
//! watchdog), and a file is read through `Read::take` of one byte more
//! than the limit, so that a file that grows while it is read costs no
//! more: [`strata_process::regular`] does both.
//!
//! Must not: know a format's fields. Callers deserialize into their own
//! types; this module only guarantees the text is bounded and unambiguous.

use std::fs::File;
use std::io;
use std::path::Path;

use serde::de::{self, DeserializeOwned, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use strata_process::regular::FinalSymlink;
use strata_process::text::shown;

use crate::error::{Location, ManifestError, Position};
use crate::spanned::{check_limits, MAX_FILE_BYTES};

/// The most strata reads of a YAML or JSON file it is given (1 MiB).
pub const MAX_INPUT_BYTES: u64 = MAX_FILE_BYTES as u64;

pub use strata_process::regular::read_regular;

/// Opens `path` (a final symlink followed) for reading if it is a regular
/// file: [`strata_process::regular::open_regular`], which refuses a
/// device, a FIFO or a directory without opening it for real.
pub fn open_regular(path: &Path) -> io::Result<File> {
    strata_process::regular::open_regular(path, FinalSymlink::Follow).map(|r| r.file)
}

/// A YAML or JSON file a user gave, as text: a regular file of at most
/// [`MAX_INPUT_BYTES`], in UTF-8.
pub fn read_input(path: &Path) -> io::Result<String> {
    let bytes = read_regular(path, MAX_INPUT_BYTES)?;
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (from byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Parses a data file that is not a manifest (a lockfile, an overrides
/// file): JSON when it starts with `{`, else YAML. The text is held to
/// the manifest limits first and refused when a mapping repeats a key;
/// an error names `file:line:column` and cuts the values it quotes.
pub fn parse_data<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, ManifestError> {
    check_limits(text, file)?;
    let located = |message: String, line: usize, column: usize| ManifestError::Syntax {
        location: Location {
            file: file.to_path_buf(),
            position: (line > 0).then(|| Position::new(line, column)),
        },
        message: cut_quoted(&message),
    };
    if text.trim_start().starts_with('{') {
        let json = |e: serde_json::Error| {
            let mut message = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            if let Some(i) = message.rfind(&suffix) {
                message.truncate(i);
            }
            located(message, e.line(), e.column())
        };
        serde_json::from_str::<NoDuplicateKeys>(text).map_err(json)?;
        serde_json::from_str(text).map_err(json)
    } else {
        let yaml = |e: serde_yaml::Error| crate::spanned::yaml_error(&e, file);
        serde_yaml::from_str::<NoDuplicateKeys>(text).map_err(yaml)?;
        serde_yaml::from_str(text).map_err(yaml)
    }
}

/// Checks a YAML text for a mapping that repeats a key (serde_yaml keeps
/// the last of them in a map, silently).
pub(crate) fn check_yaml_keys(text: &str, file: &Path) -> Result<(), ManifestError> {
    serde_yaml::from_str::<NoDuplicateKeys>(text)
        .map(drop)
        .map_err(|e| crate::spanned::yaml_error(&e, file))
}

/// `message` with every quoted part (`"…"`, `` `…` ``) longer than a
/// [`shown`] value cut the same way.
pub(crate) fn cut_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(1024));
    let mut rest = message;
    while let Some(open) = rest.find(['"', '`']) {
        let quote = rest[open..].chars().next().unwrap_or('"');
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        // The closing quote: the last one of the message for `"` (a value
        // may hold escaped quotes), the next one for a backquote.
        let close = match quote {
            '`' => after.find('`'),
            _ => after.rfind('"'),
        };
        let Some(close) = close else {
            out.push_str(&shown(after));
            return out;
        };
        out.push_str(&shown(&after[..close]));
        out.push(quote);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Walks a whole document and fails at the first mapping that repeats a
/// key, naming it. Keys are compared as the text of their scalar.
struct NoDuplicateKeys;

impl<'de> Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk).map(|_| NoDuplicateKeys)
    }
}

/// A mapping key, as text for comparison (`None`: a collection, compared
/// with nothing).
struct Key(Option<String>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk).map(Key)
    }
}

/// Visits anything; returns the scalar's text, `None` for a collection.
struct Walk;

macro_rules! scalar {
    ($($name:ident: $t:ty),*) => {$(
        fn $name<E: de::Error>(self, v: $t) -> Result<Option<String>, E> {
            Ok(Some(v.to_string()))
        }
    )*};
}

impl<'de> Visitor<'de> for Walk {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }

    scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_i128: i128,
        visit_u128: u128, visit_f64: f64, visit_str: &str, visit_char: char);

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        Ok(Some(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some("null".to_string()))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Walk)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Walk)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            if let Some(key) = key {
                if !seen.insert(key.clone()) {
                    return Err(de::Error::custom(format!(
                        "the key `{}` is given twice in one mapping",
                        shown(&key)
                    )));
                }
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(None)
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        // A YAML value with a tag of its own (`!thing value`).
        let (_, variant) = data.variant::<Key>()?;
        de::VariantAccess::newtype_variant::<NoDuplicateKeys>(variant)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Map = BTreeMap<String, serde_json::Value>;

    #[test]
    fn a_key_given_twice_is_refused_in_json_and_yaml() {
        let cases = [
            (
                r#"{"a": 1, "a": 2}"#,
                "f:1:12: the key `a` is given twice in one mapping",
            ),
            (
                r#"{"p": {"x": {}, "y": {"k": 1, "k": 1}}}"#,
                "f:1:33: the key `k` is given twice in one mapping",
            ),
            (
                "a: 1\nb:\n  c: 1\n  c: 2\n",
                "f:3:3: b: the key `c` is given twice in one mapping",
            ),
            (
                "a: {x: 1, x: 2}\n",
                "f:1:4: a: the key `x` is given twice in one mapping",
            ),
        ];
        for (text, want) in cases {
            let err = parse_data::<Map>(text, Path::new("f")).unwrap_err();
            assert_eq!(err.to_string(), want, "{text}");
        }
        // Keys compare as text; different ones pass.
        assert!(parse_data::<Map>("a: 1\nb: 1\n\"c\": 2\n", Path::new("f")).is_ok());
    }

    #[test]
    fn long_values_are_cut_in_errors() {
        let long = "x".repeat(10_000);
        let text = format!("{{\"packages\": \"{long}\"}}");
        let err = parse_data::<BTreeMap<String, u32>>(&text, Path::new("f")).unwrap_err();
        let shown = err.to_string();
        assert!(shown.len() < 200, "{shown}");
        assert!(
            shown.contains(&format!("\"{}…\"", "x".repeat(80))),
            "{shown}"
        );
        assert_eq!(
            cut_quoted("unknown field `a\nb`, expected `c`"),
            "unknown field `a\\nb`, expected `c`"
        );
    }

    #[test]
    fn the_manifest_limits_hold_for_data_files() {
        let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
        let err = parse_data::<serde_json::Value>(&deep, Path::new("f")).unwrap_err();
        assert!(
            err.to_string().contains("nested more than 64 deep"),
            "{err}"
        );
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(20_000), "]".repeat(20_000));
        let err = parse_data::<serde_json::Value>(&deep, Path::new("f")).unwrap_err();
        assert!(
            err.to_string().contains("nested more than 64 deep"),
            "{err}"
        );
        // An escaped quote does not hide the nesting after it.
        let hidden = format!("[\"\\\"\",{}{}]", "[".repeat(100), "]".repeat(100));
        let err = parse_data::<serde_json::Value>(&hidden, Path::new("f")).unwrap_err();
        assert!(
            err.to_string().contains("nested more than 64 deep"),
            "{err}"
        );
        let many = "a,".repeat(30_000);
        let err =
            parse_data::<serde_json::Value>(&format!("[{many}]"), Path::new("f")).unwrap_err();
        assert!(err.to_string().contains("more than 20000 entries"), "{err}");
    }

    #[test]
    fn only_regular_files_are_read_and_never_past_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (
                Path::new("/dev/zero"),
                "a character device, not a regular file",
            ),
            (d.path(), "a directory, not a regular file"),
        ];
        for (path, want) in cases {
            assert_eq!(read_regular(path, 10).unwrap_err().to_string(), want);
        }
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo (coreutils)");
        // Refused at once, without waiting for a writer.
        assert_eq!(
            read_regular(&fifo, 10).unwrap_err().to_string(),
            "a FIFO, not a regular file"
        );
        let big = d.path().join("big");
        std::fs::write(&big, [b'x'; 11]).unwrap();
        assert_eq!(
            read_regular(&big, 10).unwrap_err().kind(),
            io::ErrorKind::FileTooLarge
        );
        assert_eq!(read_regular(&big, 11).unwrap().len(), 11);
    }
}
