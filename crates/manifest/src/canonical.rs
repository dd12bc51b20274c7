//! Canonical JSON: one byte sequence per value, for hashing.
//!
//! RFC 8785 (the `canon-json` crate, which oscontainer's index and
//! manifests use too): keys sorted at every level whatever serde_json's
//! map ordering feature says, no whitespace, one form per number and
//! string.
//!
//! Must not: be used for output meant for people; it is for digests.

use serde::Serialize;

/// The canonical JSON of `value`.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    use canon_json::CanonJsonSerialize as _;
    // The manifest types hold only strings, numbers, booleans, lists and
    // string-keyed maps: serializing them cannot fail.
    match value.to_canon_json_string() {
        Ok(text) => text,
        Err(e) => unreachable!("manifest types serialize to JSON: {e}"),
    }
}

/// A list that means a set, as an input hash reads it: sorted, each item
/// once. The order it was written in then changes nothing, and a list
/// written sorted reads as written. (A list whose order can change what is
/// built is left alone: which lists are sets is the manifest types' to say,
/// in their `to_input_json`.)
pub(crate) fn as_set<T: Ord>(list: &mut Vec<T>) {
    list.sort();
    list.dedup();
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
