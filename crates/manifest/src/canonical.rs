//! Canonical JSON: one byte sequence per value, for hashing.
//!
//! Keys are sorted at every level (whatever serde_json's map ordering
//! feature says), there is no whitespace, and strings are escaped the way
//! serde_json escapes them.
//!
//! Must not: be used for output meant for people; it is for digests.

use serde::Serialize;
use serde_json::{Map, Value};

/// The canonical JSON of `value`.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    // The manifest types hold only strings, numbers, booleans, lists and
    // string-keyed maps: serializing them to a Value cannot fail.
    let value = match serde_json::to_value(value) {
        Ok(v) => v,
        Err(e) => unreachable!("manifest types serialize to JSON: {e}"),
    };
    sorted(value).to_string()
}

/// Serializes a path as a string, replacing what is not UTF-8, so that
/// serializing a manifest cannot fail (`#[serde(serialize_with)]`).
pub(crate) fn path<S: serde::Serializer>(path: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// [`path`] for an optional path.
pub(crate) fn option_path<S: serde::Serializer>(
    path: &Option<std::path::PathBuf>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => s.serialize_some(&p.to_string_lossy()),
        None => s.serialize_none(),
    }
}

fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k, sorted(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct S {
        zebra: u32,
        apple: Vec<BTreeMap<String, bool>>,
    }

    #[test]
    fn keys_sorted_no_whitespace() {
        let s = S {
            zebra: 1,
            apple: vec![BTreeMap::from([("b".into(), true), ("a".into(), false)])],
        };
        assert_eq!(to_json(&s), r#"{"apple":[{"a":false,"b":true}],"zebra":1}"#);
    }
}
