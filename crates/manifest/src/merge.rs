//! How an including file is applied on top of what it includes.
//!
//! Scalars override, lists append (keeping the first occurrence of a value
//! that appears twice), maps and nested sections merge key by key. Merging
//! works on the all-optional "partial" structs each file deserializes into,
//! so a field a file does not mention leaves the merged value alone.
//!
//! Must not: validate. A merged partial may still miss required fields or
//! hold conflicting values; the document's `finish` step reports those.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use crate::spanned::{OneOrMany, Spanned};

/// Applies `later` (the including file, or a later include) on top of `self`.
pub(crate) trait Merge {
    fn overlay(&mut self, later: Self);
}

/// A scalar: the later value wins.
impl<T> Merge for Spanned<T> {
    fn overlay(&mut self, later: Self) {
        *self = later;
    }
}

/// A field a file may omit: an omitted field leaves the earlier value.
impl<T: Merge> Merge for Option<T> {
    fn overlay(&mut self, later: Self) {
        match (self.as_mut(), later) {
            (Some(earlier), Some(later)) => earlier.overlay(later),
            (None, Some(later)) => *self = Some(later),
            (_, None) => {}
        }
    }
}

/// A list: append, skipping values already present.
impl<T: PartialEq> Merge for Vec<T> {
    fn overlay(&mut self, later: Self) {
        for item in later {
            if !self.contains(&item) {
                self.push(item);
            }
        }
    }
}

impl Merge for OneOrMany {
    fn overlay(&mut self, later: Self) {
        self.0.overlay(later.0);
    }
}

/// A map: merge key by key.
impl<K: Ord, V: Merge> Merge for BTreeMap<K, V> {
    fn overlay(&mut self, later: Self) {
        for (key, value) in later {
            match self.entry(key) {
                Entry::Occupied(mut e) => e.get_mut().overlay(value),
                Entry::Vacant(e) => {
                    e.insert(value);
                }
            }
        }
    }
}

/// Implements [`Merge`] for a struct field by field. Naming a field that does
/// not exist, or leaving one out, is a compile error.
macro_rules! merge_fields {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        impl $crate::merge::Merge for $ty {
            fn overlay(&mut self, later: Self) {
                let Self { $($field),* } = later;
                $( $crate::merge::Merge::overlay(&mut self.$field, $field); )*
            }
        }
    };
}
pub(crate) use merge_fields;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spanned::{At, Str};

    fn s(v: &str) -> Str {
        Spanned::new(v.to_string(), At::Nowhere)
    }

    #[derive(Default, Debug, PartialEq)]
    struct Section {
        scalar: Option<Str>,
        list: Option<Vec<Str>>,
        map: Option<BTreeMap<Str, Option<Str>>>,
    }
    merge_fields!(Section { scalar, list, map });

    #[derive(Default, Debug, PartialEq)]
    struct Doc {
        name: Option<Str>,
        nested: Option<Section>,
    }
    merge_fields!(Doc { name, nested });

    fn list(items: &[&str]) -> Option<Vec<Str>> {
        Some(items.iter().map(|i| s(i)).collect())
    }

    #[test]
    fn scalars_override_lists_append_maps_merge() {
        let mut earlier = Doc {
            name: Some(s("base")),
            nested: Some(Section {
                scalar: Some(s("a")),
                list: list(&["x", "y"]),
                map: Some(BTreeMap::from([
                    (s("k1"), Some(s("1"))),
                    (s("k2"), Some(s("2"))),
                ])),
            }),
        };
        let later = Doc {
            name: None,
            nested: Some(Section {
                scalar: Some(s("b")),
                list: list(&["y", "z", "z"]),
                map: Some(BTreeMap::from([(s("k2"), Some(s("two"))), (s("k3"), None)])),
            }),
        };
        earlier.overlay(later);
        let want = Doc {
            name: Some(s("base")),
            nested: Some(Section {
                scalar: Some(s("b")),
                list: list(&["x", "y", "z"]),
                map: Some(BTreeMap::from([
                    (s("k1"), Some(s("1"))),
                    (s("k2"), Some(s("two"))),
                    (s("k3"), None),
                ])),
            }),
        };
        assert_eq!(earlier, want);
    }

    #[test]
    fn a_null_does_not_erase_an_earlier_value() {
        let mut earlier = Some(s("keep"));
        earlier.overlay(None);
        assert_eq!(earlier, Some(s("keep")));
        let mut map = BTreeMap::from([(s("v"), Some(s("default")))]);
        map.overlay(BTreeMap::from([(s("v"), None)]));
        assert_eq!(map[&s("v")], Some(s("default")));
    }
}
