//! Packing components into image layers, stably across builds.
//!
//! An update should make clients download only the layers holding what
//! changed. This module decides which component goes into which layer: it sees
//! opaque components (a name, a size in bytes, a change frequency) and nothing
//! else — it must not know about RPM, packages or paths; the caller maps
//! content to components.
//!
//! The plan is a [`LayerMap`]: an ordered list of bins, one image layer each,
//! after the ostree commit layer. A fresh plan gives each big component a bin
//! of its own, packs the small ones (ordered by change frequency, so that
//! things that change together share a layer) into the remaining bins, and
//! keeps one bin empty, reserved for components that appear later. Given the
//! previous build's map, components stay in their bins, new components go into
//! the reserved bin, and removed ones drop out — so an update changes only the
//! layers of the components that changed. The map is serializable; the
//! workdir keeps it between builds.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Layer annotation listing the components of a layer (ostree-ext's name).
pub const COMPONENTS_ANNOTATION: &str = "ostree.components";
/// Separator of component names in [`COMPONENTS_ANNOTATION`].
pub const COMPONENT_SEPARATOR: char = ',';
/// Default total number of layers (commit layer included), as ostree-ext.
pub const DEFAULT_MAX_LAYERS: u32 = 64;

/// One unit of content the chunker places as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    /// Unique name (e.g. a package name); must not contain `,`.
    pub name: String,
    /// Bytes of content (uncompressed).
    pub size: u64,
    /// How often it changes; higher means more often. Only the order matters.
    pub change_frequency: u32,
}

/// The components of one layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin {
    /// Component names, sorted.
    pub components: BTreeSet<String>,
    /// New components of later builds go into this bin.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserved: bool,
}

/// Which components go into which layer: layer `i + 1` of the image holds
/// `bins[i]` (layer 0 is the ostree commit). Components in no bin are stored
/// in the commit layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerMap {
    /// Format version of this document.
    pub version: u32,
    /// The layer limit the map was planned for (commit layer included).
    pub max_layers: u32,
    /// The bins, in layer order.
    pub bins: Vec<Bin>,
}

const MAP_VERSION: u32 = 1;

impl LayerMap {
    /// Plans the layers for `components` with at most `max_layers` layers in
    /// total (the commit layer included). With `prior` (the previous build's
    /// map, planned for the same `max_layers`), components keep their bins.
    pub fn plan(
        components: &[Component],
        max_layers: u32,
        prior: Option<&LayerMap>,
    ) -> Result<LayerMap> {
        if max_layers == 0 {
            return Err(Error::InvalidOption("max_layers must be at least 1".into()));
        }
        let mut names = BTreeSet::new();
        for c in components {
            if c.name.is_empty() || c.name.contains(COMPONENT_SEPARATOR) {
                return Err(Error::Chunking(format!(
                    "component name {:?} is empty or contains {COMPONENT_SEPARATOR:?}",
                    c.name
                )));
            }
            if !names.insert(c.name.as_str()) {
                return Err(Error::Chunking(format!("duplicate component {:?}", c.name)));
            }
        }
        match prior {
            Some(p) if p.max_layers == max_layers && p.bins.len() < max_layers as usize => {
                Ok(Self::update(p, components))
            }
            _ => Ok(Self::fresh(components, max_layers)),
        }
    }

    /// A plan ignoring any previous build.
    fn fresh(components: &[Component], max_layers: u32) -> LayerMap {
        let available = max_layers as usize - 1;
        let mut map = LayerMap {
            version: MAP_VERSION,
            max_layers,
            bins: Vec::new(),
        };
        if available == 0 {
            // Everything stays in the commit layer.
            return map;
        }
        // One bin stays reserved for later components, when there is room.
        let usable = if available >= 2 {
            available - 1
        } else {
            available
        };
        let mut sorted: Vec<&Component> = components.iter().collect();
        sorted.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.name.cmp(&b.name)));

        let mut bins: Vec<BTreeSet<String>> = Vec::new();
        if sorted.len() <= usable {
            bins.extend(sorted.iter().map(|c| BTreeSet::from([c.name.clone()])));
        } else {
            // Big components get a bin each: while the largest remaining one
            // is at least the average bin size of what is left.
            let mut rest = sorted.as_slice();
            let mut bins_left = usable;
            while bins_left > 1 && rest.len() > bins_left {
                let total: u64 = rest.iter().map(|c| c.size).sum();
                let average = total / bins_left as u64;
                if rest[0].size == 0 || rest[0].size < average {
                    break;
                }
                bins.push(BTreeSet::from([rest[0].name.clone()]));
                rest = &rest[1..];
                bins_left -= 1;
            }
            // Small ones: most frequently changing first, then fill the
            // remaining bins in that order up to an even share each.
            let mut small: Vec<&Component> = rest.to_vec();
            small.sort_by(|a, b| {
                b.change_frequency
                    .cmp(&a.change_frequency)
                    .then_with(|| a.name.cmp(&b.name))
            });
            let mut remaining_total: u64 = small.iter().map(|c| c.size).sum();
            let mut i = 0;
            while i < small.len() {
                let mut bin = BTreeSet::new();
                if bins_left == 1 {
                    bin.extend(small[i..].iter().map(|c| c.name.clone()));
                    i = small.len();
                } else {
                    let share = remaining_total / bins_left as u64;
                    let mut size = 0u64;
                    // Leave at least one component for each later bin.
                    while i < small.len() && small.len() - i >= bins_left {
                        let c = small[i];
                        // Take it unless overshooting the share would be
                        // worse than stopping short of it.
                        if !bin.is_empty()
                            && size + c.size > share
                            && size + c.size - share >= share - size
                        {
                            break;
                        }
                        bin.insert(c.name.clone());
                        size += c.size;
                        i += 1;
                        if size >= share {
                            break;
                        }
                    }
                    remaining_total -= size;
                }
                bins.push(bin);
                bins_left -= 1;
            }
        }
        map.bins = bins
            .into_iter()
            .map(|components| Bin {
                components,
                reserved: false,
            })
            .collect();
        if available >= 2 {
            map.bins.push(Bin {
                components: BTreeSet::new(),
                reserved: true,
            });
        } else if let Some(b) = map.bins.last_mut() {
            b.reserved = true;
        } else {
            map.bins.push(Bin {
                components: BTreeSet::new(),
                reserved: true,
            });
        }
        map
    }

    /// The previous plan, with removed components dropped and new ones put
    /// into the reserved bin.
    fn update(prior: &LayerMap, components: &[Component]) -> LayerMap {
        let current: BTreeSet<&str> = components.iter().map(|c| c.name.as_str()).collect();
        let mut bins: Vec<Bin> = prior
            .bins
            .iter()
            .map(|b| Bin {
                components: b
                    .components
                    .iter()
                    .filter(|c| current.contains(c.as_str()))
                    .cloned()
                    .collect(),
                reserved: b.reserved,
            })
            .filter(|b| b.reserved || !b.components.is_empty())
            .collect();
        let placed: BTreeSet<String> = bins
            .iter()
            .flat_map(|b| b.components.iter().cloned())
            .collect();
        let new: Vec<String> = current
            .iter()
            .filter(|c| !placed.contains(**c))
            .map(|c| c.to_string())
            .collect();
        if !new.is_empty() {
            let idx = match bins.iter().position(|b| b.reserved) {
                Some(i) => i,
                None => {
                    bins.push(Bin {
                        components: BTreeSet::new(),
                        reserved: true,
                    });
                    bins.len() - 1
                }
            };
            bins[idx].components.extend(new);
        }
        LayerMap {
            version: MAP_VERSION,
            max_layers: prior.max_layers,
            bins,
        }
    }

    /// For each component, the index of its bin.
    pub fn bin_of(&self) -> BTreeMap<&str, usize> {
        self.bins
            .iter()
            .enumerate()
            .flat_map(|(i, b)| b.components.iter().map(move |c| (c.as_str(), i)))
            .collect()
    }

    /// Reconstructs a map from an image this crate (or ostree-ext) built:
    /// the `ostree.components` annotations of the layers after the commit
    /// layer, up to `ostree_layers` layers in total. The last bin becomes the
    /// reserved one.
    pub fn from_annotations<'a>(
        layer_annotations: impl IntoIterator<Item = Option<&'a str>>,
        max_layers: u32,
    ) -> LayerMap {
        let mut bins: Vec<Bin> = layer_annotations
            .into_iter()
            .skip(1)
            .map(|a| Bin {
                components: a
                    .unwrap_or_default()
                    .split(COMPONENT_SEPARATOR)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
                reserved: false,
            })
            .collect();
        if bins.len() + 1 < max_layers as usize {
            bins.push(Bin {
                components: BTreeSet::new(),
                reserved: true,
            });
        } else if let Some(last) = bins.last_mut() {
            last.reserved = true;
        }
        LayerMap {
            version: MAP_VERSION,
            max_layers,
            bins,
        }
    }

    /// The map as pretty JSON, for the workdir.
    pub fn to_json(&self) -> String {
        // Serializing plain strings, sets and numbers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a map written by [`LayerMap::to_json`].
    pub fn from_json(s: &str) -> Result<LayerMap> {
        let map: LayerMap = serde_json::from_str(s).map_err(|source| Error::Json {
            context: "parsing layer map".into(),
            source,
        })?;
        if map.version != MAP_VERSION {
            return Err(Error::Chunking(format!(
                "layer map version {} is not {MAP_VERSION}",
                map.version
            )));
        }
        Ok(map)
    }
}

/// A human description of a bin, used as the layer's history entry.
pub(crate) fn describe(components: &BTreeSet<String>) -> String {
    let names: Vec<&str> = components.iter().map(String::as_str).collect();
    match names.as_slice() {
        [] => "reserved for new components".into(),
        [one] => (*one).to_string(),
        [a, b] => format!("{a} and {b}"),
        [a, b, c] => format!("{a}, {b} and {c}"),
        [a, rest @ ..] => format!("{a} and {} other components", rest.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comp(name: &str, size: u64, freq: u32) -> Component {
        Component {
            name: name.into(),
            size,
            change_frequency: freq,
        }
    }

    fn bins(map: &LayerMap) -> Vec<Vec<&str>> {
        map.bins
            .iter()
            .map(|b| b.components.iter().map(String::as_str).collect())
            .collect()
    }

    fn check_invariants(map: &LayerMap, components: &[Component]) {
        assert!(map.bins.len() < map.max_layers as usize || map.bins.is_empty());
        let mut seen = BTreeSet::new();
        for b in &map.bins {
            for c in &b.components {
                assert!(seen.insert(c.clone()), "{c} in two bins");
            }
        }
        if !map.bins.is_empty() {
            let all: BTreeSet<String> = components.iter().map(|c| c.name.clone()).collect();
            assert_eq!(seen, all, "every component is placed exactly once");
        }
        assert_eq!(map.bins.iter().filter(|b| b.reserved).count().min(1), 1);
    }

    #[test]
    fn fresh_packing_table() {
        struct Case {
            name: &'static str,
            components: Vec<Component>,
            max_layers: u32,
            want: Vec<Vec<&'static str>>,
        }
        let cases = vec![
            Case {
                name: "few components: one bin each plus reserved",
                components: vec![comp("a", 10, 0), comp("b", 30, 0), comp("c", 20, 0)],
                max_layers: 64,
                want: vec![vec!["b"], vec!["c"], vec!["a"], vec![]],
            },
            Case {
                name: "big ones alone, small ones binned by frequency",
                components: vec![
                    comp("kernel", 1000, 1),
                    comp("glibc", 800, 2),
                    comp("s1", 10, 9),
                    comp("s2", 10, 1),
                    comp("s3", 10, 9),
                    comp("s4", 10, 1),
                ],
                max_layers: 5,
                want: vec![
                    vec!["kernel"],
                    vec!["glibc"],
                    vec!["s1", "s3", "s2", "s4"].into_iter().collect(),
                    vec![],
                ],
            },
            Case {
                name: "small ones spread evenly",
                components: (0..8).map(|i| comp(&format!("p{i}"), 10, 0)).collect(),
                max_layers: 5,
                want: vec![
                    vec!["p0", "p1", "p2"],
                    vec!["p3", "p4"],
                    vec!["p5", "p6", "p7"],
                    vec![],
                ],
            },
            Case {
                name: "two layers: one bin that is also reserved",
                components: vec![comp("a", 1, 0), comp("b", 2, 0)],
                max_layers: 2,
                want: vec![vec!["a", "b"]],
            },
            Case {
                name: "one layer: everything in the commit layer",
                components: vec![comp("a", 1, 0)],
                max_layers: 1,
                want: vec![],
            },
            Case {
                name: "no components",
                components: vec![],
                max_layers: 64,
                want: vec![vec![]],
            },
        ];
        for case in cases {
            let map = LayerMap::plan(&case.components, case.max_layers, None).unwrap();
            let mut got = bins(&map);
            let mut want = case.want.clone();
            for b in got.iter_mut().chain(want.iter_mut()) {
                b.sort();
            }
            assert_eq!(got, want, "{}", case.name);
            if case.max_layers > 1 {
                check_invariants(&map, &case.components);
            }
        }
    }

    #[test]
    fn never_exceeds_max_layers() {
        for n in [0usize, 1, 5, 63, 64, 65, 300] {
            for max in [1u32, 2, 3, 4, 10, 64] {
                let components: Vec<Component> = (0..n)
                    .map(|i| {
                        comp(
                            &format!("c{i:03}"),
                            (i as u64 * 7919) % 1000 + 1,
                            (i % 5) as u32,
                        )
                    })
                    .collect();
                let map = LayerMap::plan(&components, max, None).unwrap();
                assert!(map.bins.len() < max as usize || (max == 1 && map.bins.is_empty()));
                if max > 1 {
                    check_invariants(&map, &components);
                }
            }
        }
    }

    #[test]
    fn update_keeps_components_in_place() {
        struct Case {
            name: &'static str,
            prior: Vec<(Vec<&'static str>, bool)>,
            now: Vec<&'static str>,
            want: Vec<Vec<&'static str>>,
        }
        let cases = vec![
            Case {
                name: "same set: same map",
                prior: vec![(vec!["a"], false), (vec!["b", "c"], false), (vec![], true)],
                now: vec!["a", "b", "c"],
                want: vec![vec!["a"], vec!["b", "c"], vec![]],
            },
            Case {
                name: "new components go to the reserved bin",
                prior: vec![(vec!["a"], false), (vec!["b", "c"], false), (vec![], true)],
                now: vec!["a", "b", "c", "d", "e"],
                want: vec![vec!["a"], vec!["b", "c"], vec!["d", "e"]],
            },
            Case {
                name: "removed components drop out, empty bins vanish",
                prior: vec![
                    (vec!["a"], false),
                    (vec!["b", "c"], false),
                    (vec!["x"], true),
                ],
                now: vec!["b", "x"],
                want: vec![vec!["b"], vec!["x"]],
            },
            Case {
                name: "no reserved bin in the prior map: one is appended",
                prior: vec![(vec!["a"], false)],
                now: vec!["a", "n"],
                want: vec![vec!["a"], vec!["n"]],
            },
        ];
        for case in cases {
            let prior = LayerMap {
                version: MAP_VERSION,
                max_layers: 10,
                bins: case
                    .prior
                    .iter()
                    .map(|(c, r)| Bin {
                        components: c.iter().map(|s| s.to_string()).collect(),
                        reserved: *r,
                    })
                    .collect(),
            };
            let comps: Vec<Component> = case.now.iter().map(|n| comp(n, 100, 0)).collect();
            let map = LayerMap::plan(&comps, 10, Some(&prior)).unwrap();
            assert_eq!(bins(&map), case.want, "{}", case.name);
        }
    }

    #[test]
    fn update_with_other_max_layers_repacks() {
        let comps = vec![comp("a", 1, 0), comp("b", 2, 0)];
        let prior = LayerMap::plan(&comps, 10, None).unwrap();
        let map = LayerMap::plan(&comps, 2, Some(&prior)).unwrap();
        assert_eq!(map, LayerMap::plan(&comps, 2, None).unwrap());
    }

    #[test]
    fn size_changes_do_not_move_components() {
        let v1: Vec<Component> = (0..100)
            .map(|i| comp(&format!("p{i:02}"), 1000 + i * 13, (i % 3) as u32))
            .collect();
        let map1 = LayerMap::plan(&v1, 16, None).unwrap();
        // A z-stream: a few packages grow a lot, one is new, one is gone.
        let mut v2 = v1.clone();
        v2[3].size *= 50;
        v2[40].size += 7;
        v2.retain(|c| c.name != "p77");
        v2.push(comp("newpkg", 5000, 0));
        let map2 = LayerMap::plan(&v2, 16, Some(&map1)).unwrap();
        let b1 = map1.bin_of();
        let b2 = map2.bin_of();
        for c in &v2 {
            if c.name == "newpkg" {
                assert!(map2.bins[b2["newpkg"]].reserved);
            } else {
                assert_eq!(b1[c.name.as_str()], b2[c.name.as_str()], "{}", c.name);
            }
        }
        assert!(!b2.contains_key("p77"));
    }

    #[test]
    fn refuses_bad_names() {
        for bad in [
            vec![comp("a,b", 1, 0)],
            vec![comp("", 1, 0)],
            vec![comp("a", 1, 0), comp("a", 2, 0)],
        ] {
            assert!(matches!(
                LayerMap::plan(&bad, 64, None),
                Err(Error::Chunking(_))
            ));
        }
        assert!(LayerMap::plan(&[], 0, None).is_err());
    }

    #[test]
    fn json_round_trip_and_annotations() {
        let comps = vec![comp("a", 5, 0), comp("b", 3, 0)];
        let map = LayerMap::plan(&comps, 64, None).unwrap();
        assert_eq!(LayerMap::from_json(&map.to_json()).unwrap(), map);
        let from = LayerMap::from_annotations([None, Some("a"), Some("b")], 64);
        assert_eq!(from, map);
        assert!(LayerMap::from_json("{\"version\":7,\"max_layers\":1,\"bins\":[]}").is_err());
    }

    #[test]
    fn descriptions() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(describe(&set(&["a"])), "a");
        assert_eq!(describe(&set(&["b", "a"])), "a and b");
        assert_eq!(describe(&set(&["a", "b", "c"])), "a, b and c");
        assert_eq!(
            describe(&set(&["a", "b", "c", "d"])),
            "a and 3 other components"
        );
        assert_eq!(describe(&set(&[])), "reserved for new components");
    }
}
