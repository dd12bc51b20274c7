//! Packing components into image layers, stably across builds.
//!
//! An update should make clients download only the layers holding what
//! changed. This module decides which component goes into which layer: it sees
//! opaque components (a name, a size in bytes, a change frequency) and nothing
//! else — it must not know about RPM, packages or paths; the caller maps
//! content to components.
//!
//! The plan is a [`LayerMap`]: an ordered list of bins, one image layer each,
//! after the ostree commit layer. A fresh plan orders components by change
//! frequency then size and cuts that order into bins minimizing the bytes an
//! update is expected to re-download (the sum over bins of the bin's weight
//! times its size): big or volatile components get a bin of their own, many
//! small stable ones share one. One bin stays empty, reserved for
//! components that appear later. Given the
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
    /// How often it changes: the chunker takes a component of frequency `f`
    /// to be `f + 1` times as likely to change in an update as one of
    /// frequency 0 (never seen changing).
    pub change_frequency: u32,
    /// Identifies the component's content (e.g. a digest of its files); a
    /// component whose fingerprint differs from the previous build's makes
    /// its layer change. Empty: unknown.
    #[serde(default)]
    pub fingerprint: String,
}

/// The components of one layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin {
    /// Component names, sorted.
    pub components: BTreeSet<String>,
    /// New components of later builds go into this bin.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserved: bool,
    /// The components' fingerprints when the map was planned (absent in
    /// maps written before fingerprints existed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fingerprints: BTreeMap<String, String>,
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
        let mut map = match prior {
            Some(p) if p.max_layers == max_layers && p.bins.len() < max_layers as usize => {
                Self::update(p, components)
            }
            _ => Self::fresh(components, max_layers),
        };
        let fingerprints: BTreeMap<&str, &str> = components
            .iter()
            .filter(|c| !c.fingerprint.is_empty())
            .map(|c| (c.name.as_str(), c.fingerprint.as_str()))
            .collect();
        for b in &mut map.bins {
            b.fingerprints = b
                .components
                .iter()
                .filter_map(|c| Some((c.clone(), fingerprints.get(c.as_str())?.to_string())))
                .collect();
        }
        Ok(map)
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
        sort_for_packing(&mut sorted);
        let bins: Vec<BTreeSet<String>> = partition(&sorted, usable)
            .into_iter()
            .map(|g| g.iter().map(|c| c.name.clone()).collect())
            .collect();
        map.bins = bins
            .into_iter()
            .map(|components| Bin {
                components,
                ..Bin::default()
            })
            .collect();
        if available >= 2 {
            map.bins.push(Bin::reserved());
        } else if let Some(b) = map.bins.last_mut() {
            b.reserved = true;
        } else {
            map.bins.push(Bin::reserved());
        }
        map
    }

    /// The previous plan, with removed components dropped and new ones put
    /// into the reserved bin. The bins that change anyway (a component's
    /// fingerprint differs, one was removed, new ones arrived) are downloaded
    /// whole by clients, so their components are repacked among them for
    /// free, by the current change frequencies: what proved volatile moves
    /// away from stable neighbours, and the next update is smaller.
    fn update(prior: &LayerMap, components: &[Component]) -> LayerMap {
        let current: BTreeMap<&str, &Component> =
            components.iter().map(|c| (c.name.as_str(), c)).collect();
        let mut changed: Vec<bool> = Vec::with_capacity(prior.bins.len());
        let mut bins: Vec<Bin> = Vec::with_capacity(prior.bins.len());
        for b in &prior.bins {
            let kept: BTreeSet<String> = b
                .components
                .iter()
                .filter(|c| current.contains_key(c.as_str()))
                .cloned()
                .collect();
            if !b.reserved && kept.is_empty() {
                continue;
            }
            let modified = kept.iter().any(|c| {
                let now = &current[c.as_str()].fingerprint;
                b.fingerprints
                    .get(c)
                    .is_some_and(|before| !now.is_empty() && before != now)
            });
            changed.push(modified || kept.len() != b.components.len());
            bins.push(Bin {
                components: kept,
                reserved: b.reserved,
                fingerprints: BTreeMap::new(),
            });
        }
        let placed: BTreeSet<String> = bins
            .iter()
            .flat_map(|b| b.components.iter().cloned())
            .collect();
        let new: Vec<String> = current
            .keys()
            .filter(|c| !placed.contains(**c))
            .map(|c| c.to_string())
            .collect();
        if !new.is_empty() {
            let idx = match bins.iter().position(|b| b.reserved) {
                Some(i) => i,
                // No reserved bin and no room for one: the last bin takes them.
                None if bins.len() + 1 >= prior.max_layers as usize && !bins.is_empty() => {
                    bins.len() - 1
                }
                None => {
                    bins.push(Bin::reserved());
                    changed.push(false);
                    bins.len() - 1
                }
            };
            bins[idx].components.extend(new);
            changed[idx] = true;
        }
        let slots: Vec<usize> = (0..bins.len()).filter(|i| changed[*i]).collect();
        if slots.len() >= 2 {
            let mut pool: Vec<&Component> = slots
                .iter()
                .flat_map(|i| bins[*i].components.iter())
                .map(|c| current[c.as_str()])
                .collect();
            sort_for_packing(&mut pool);
            let mut groups = partition(&pool, slots.len()).into_iter();
            for i in &slots {
                let g = groups.next().unwrap_or_default();
                bins[*i] = Bin {
                    components: g.iter().map(|c| c.name.clone()).collect(),
                    ..Bin::default()
                };
            }
            // The reserved bin took part in the repacking: reserve another
            // one when the limit allows, else the last repacked bin takes
            // later components.
            let used = bins.iter().filter(|b| !b.components.is_empty()).count();
            let room = used + 1 < prior.max_layers as usize;
            let has_reserved = bins.iter().any(|b| b.reserved);
            if !room && !has_reserved {
                if let Some(last) = slots
                    .iter()
                    .rev()
                    .find(|i| !bins[**i].components.is_empty())
                {
                    bins[*last].reserved = true;
                }
            }
            bins.retain(|b| !b.components.is_empty() || b.reserved);
            if room && !has_reserved {
                bins.push(Bin::reserved());
            }
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
                ..Bin::default()
            })
            .collect();
        if bins.len() + 1 < max_layers as usize {
            bins.push(Bin::reserved());
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

impl Bin {
    /// An empty bin for components that appear later.
    fn reserved() -> Bin {
        Bin {
            reserved: true,
            ..Bin::default()
        }
    }
}

/// Most frequently changing first, so that what changes together is
/// adjacent; then biggest first, so that big components end up alone.
fn sort_for_packing(components: &mut [&Component]) {
    components.sort_by(|a, b| {
        b.change_frequency
            .cmp(&a.change_frequency)
            .then_with(|| b.size.cmp(&a.size))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// How likely a component is to change, relative to others.
fn weight(c: &Component) -> u128 {
    u128::from(c.change_frequency) + 1
}

/// Splits `items` (kept in order) into at most `bins` contiguous groups,
/// minimizing the sum over groups of (total weight × total size): the bytes
/// an update re-downloads, if each component changes with a probability
/// proportional to its weight. Big or volatile components end up alone,
/// many small stable ones share a layer. Dynamic programming, O(n² · bins)
/// in the worst case; a group that alone costs more than the best split
/// found so far ends the search early. Integer arithmetic only, so the
/// result is the same on every machine.
fn partition<'c>(items: &[&'c Component], bins: usize) -> Vec<Vec<&'c Component>> {
    let n = items.len();
    if n <= bins {
        return items.iter().map(|c| vec![*c]).collect();
    }
    let mut w = vec![0u128; n + 1];
    let mut s = vec![0u128; n + 1];
    for (i, c) in items.iter().enumerate() {
        w[i + 1] = w[i] + weight(c);
        s[i + 1] = s[i] + u128::from(c.size);
    }
    let cost = |j: usize, i: usize| (w[i] - w[j]) * (s[i] - s[j]);
    // prev[i]: least cost of the first i items in exactly k groups.
    let mut prev = vec![u128::MAX; n + 1];
    prev[0] = 0;
    let mut choice: Vec<Vec<u32>> = Vec::with_capacity(bins);
    for _ in 0..bins {
        let mut cur = vec![u128::MAX; n + 1];
        let mut from = vec![0u32; n + 1];
        for i in 1..=n {
            let mut best = u128::MAX;
            for j in (0..i).rev() {
                let g = cost(j, i);
                // Smaller j only makes the last group costlier.
                if g >= best {
                    break;
                }
                if prev[j] == u128::MAX {
                    continue;
                }
                let total = prev[j].saturating_add(g);
                if total < best {
                    best = total;
                    from[i] = j as u32;
                }
            }
            cur[i] = best;
        }
        choice.push(from);
        prev = cur;
    }
    let mut groups = Vec::with_capacity(bins);
    let mut i = n;
    for from in choice.iter().rev() {
        if i == 0 {
            break;
        }
        let j = from[i] as usize;
        groups.push(items[j..i].to_vec());
        i = j;
    }
    groups.reverse();
    groups
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
            fingerprint: String::new(),
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
                name: "volatile ones together, big ones alone, stable small ones binned",
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
                    vec!["s1", "s3"],
                    vec!["glibc"],
                    vec!["kernel", "s2", "s4"],
                    vec![],
                ],
            },
            Case {
                name: "small ones spread evenly",
                components: (0..8).map(|i| comp(&format!("p{i}"), 10, 0)).collect(),
                max_layers: 5,
                want: vec![
                    vec!["p0", "p1", "p2"],
                    vec!["p3", "p4", "p5"],
                    vec!["p6", "p7"],
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

    /// The shape of the RHCOS-sized fixture's base: a few huge stable
    /// packages, hundreds of stable small ones, a score already rebuilt for
    /// z-streams (weighed 33 or 65 by compose), the initramfs above them
    /// and the generated content above everything. No layer mixes a
    /// volatile component with a stable one, and every volatile component
    /// of a few MB has a layer of its own: a z-stream of those downloads
    /// nothing it did not change.
    #[test]
    fn volatile_components_get_layers_of_their_own_among_many_stable_ones() {
        let mut components: Vec<Component> = [430u64, 232, 108, 93, 57, 40, 33]
            .iter()
            .enumerate()
            .map(|(i, mb)| comp(&format!("huge{i}"), mb * 1_000_000, 0))
            .collect();
        components.extend(
            (0..450u64).map(|i| comp(&format!("stable{i:03}"), (i * 7919) % 6_000_000 + 20_000, 0)),
        );
        let volatile: Vec<Component> = [
            ("kernel-core", 14_898, 32),
            ("glibc", 14_595, 64),
            ("kernel-modules", 14_535, 32),
            ("systemd", 12_720, 32),
            ("systemd-udev", 10_985, 32),
            ("NetworkManager", 6_200, 32),
            ("openssl-libs", 5_657, 32),
            ("shim-x64", 4_142, 32),
            ("sudo", 3_400, 32),
            ("grub2-pc-modules", 2_427, 32),
            ("libgcrypt", 1_337, 32),
            ("vim-minimal", 1_300, 32),
            ("bash", 1_293, 32),
            ("systemd-libs", 1_027, 32),
            ("grub2-efi-x64", 970, 32),
            ("xz-libs", 190, 32),
            ("lz4-libs", 149, 32),
            ("zlib", 121, 32),
            ("libcap", 69, 32),
            ("initramfs", 15_940, 65),
            ("generated", 9_000, u32::MAX),
        ]
        .iter()
        .map(|(name, kb, f)| comp(name, kb * 1000, *f))
        .collect();
        components.extend(volatile.iter().cloned());
        let map = LayerMap::plan(&components, 64, None).unwrap();
        check_invariants(&map, &components);
        let bin_of = map.bin_of();
        for v in &volatile {
            let bin = &map.bins[bin_of[v.name.as_str()]];
            let with_stable = bin
                .components
                .iter()
                .any(|c| !volatile.iter().any(|v| &v.name == c));
            assert!(!with_stable, "{} shares {:?}", v.name, bin.components);
            if v.size >= 3_000_000 {
                assert_eq!(
                    bin.components.len(),
                    1,
                    "{} shares {:?}",
                    v.name,
                    bin.components
                );
            }
        }
    }

    #[test]
    fn partition_minimizes_expected_download() {
        // Brute force over all splits of a small input agrees with the DP.
        let items: Vec<Component> = [(50, 0), (7, 3), (30, 0), (1, 0), (1, 9), (12, 0), (3, 1)]
            .iter()
            .enumerate()
            .map(|(i, (s, f))| comp(&format!("c{i}"), *s, *f))
            .collect();
        let refs: Vec<&Component> = items.iter().collect();
        let total = |groups: &[Vec<&Component>]| -> u128 {
            groups
                .iter()
                .map(|g| {
                    g.iter().map(|c| weight(c)).sum::<u128>()
                        * g.iter().map(|c| u128::from(c.size)).sum::<u128>()
                })
                .sum()
        };
        for bins in 1..=6 {
            let got = partition(&refs, bins);
            assert_eq!(got.len(), bins);
            let mut best = u128::MAX;
            // Every way to place bins-1 cuts among n-1 gaps.
            for mask in 0u32..(1 << (refs.len() - 1)) {
                if mask.count_ones() as usize != bins - 1 {
                    continue;
                }
                let mut groups = vec![vec![refs[0]]];
                for (k, c) in refs.iter().enumerate().skip(1) {
                    if mask & (1 << (k - 1)) != 0 {
                        groups.push(Vec::new());
                    }
                    groups.last_mut().unwrap().push(*c);
                }
                best = best.min(total(&groups));
            }
            assert_eq!(total(&got), best, "{bins} bins");
        }
    }

    #[test]
    fn many_components_pack_quickly() {
        let components: Vec<Component> = (0..3000u64)
            .map(|i| {
                comp(
                    &format!("pkg{i:04}"),
                    (i * 7919) % 5_000_000 + 1000,
                    (i % 7) as u32,
                )
            })
            .collect();
        let start = std::time::Instant::now();
        let map = LayerMap::plan(&components, 64, None).unwrap();
        assert_eq!(map.bins.len(), 63);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            start.elapsed()
        );
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
                        ..Bin::default()
                    })
                    .collect(),
            };
            let comps: Vec<Component> = case.now.iter().map(|n| comp(n, 100, 0)).collect();
            let map = LayerMap::plan(&comps, 10, Some(&prior)).unwrap();
            assert_eq!(bins(&map), case.want, "{}", case.name);
        }
    }

    #[test]
    fn update_without_room_for_a_reserved_bin_stays_within_the_limit() {
        let prior = LayerMap {
            version: MAP_VERSION,
            max_layers: 3,
            bins: vec![
                Bin {
                    components: BTreeSet::from(["a".to_string()]),
                    ..Bin::default()
                },
                Bin {
                    components: BTreeSet::from(["b".to_string()]),
                    ..Bin::default()
                },
            ],
        };
        let comps = vec![comp("a", 1, 0), comp("b", 1, 0), comp("new", 1, 0)];
        let map = LayerMap::plan(&comps, 3, Some(&prior)).unwrap();
        assert_eq!(bins(&map), vec![vec!["a"], vec!["b", "new"]]);
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
        // The layers that change anyway: p77's (it lost p77) and the
        // reserved one (it gains newpkg); their components may be
        // repacked among them, every other component stays.
        let reserved = map1.bins.iter().position(|b| b.reserved).unwrap();
        let changing = [b1["p77"], reserved];
        for c in &v2 {
            match b1.get(c.name.as_str()) {
                Some(before) if !changing.contains(before) => {
                    assert_eq!(*before, b2[c.name.as_str()], "{}", c.name)
                }
                _ => assert!(changing.contains(&b2[c.name.as_str()]), "{}", c.name),
            }
        }
        assert!(!b2.contains_key("p77"));
        check_invariants(&map2, &v2);
    }

    #[test]
    fn bins_that_change_anyway_are_repacked_by_frequency() {
        let fp = |c: &str, v: u32| {
            let mut x = comp(c, 0, 0);
            x.fingerprint = format!("{c}-{v}");
            x
        };
        let with = |c: Component, size: u64, freq: u32| Component {
            size,
            change_frequency: freq,
            ..c
        };
        // Build 1 knew nothing: the volatile v shares a bin with stable
        // small ones, w sits with x.
        let v1 = vec![
            with(fp("big", 1), 1000, 0),
            with(fp("s1", 1), 10, 0),
            with(fp("s2", 1), 10, 0),
            with(fp("v", 1), 10, 0),
            with(fp("w", 1), 50, 0),
            with(fp("x", 1), 50, 0),
        ];
        let prior = LayerMap {
            version: MAP_VERSION,
            max_layers: 10,
            bins: vec![
                Bin {
                    components: ["big".to_string()].into(),
                    ..Bin::default()
                },
                Bin {
                    components: ["s1", "s2", "v"].map(String::from).into(),
                    ..Bin::default()
                },
                Bin {
                    components: ["w", "x"].map(String::from).into(),
                    ..Bin::default()
                },
                Bin::reserved(),
            ],
        };
        // Fingerprints recorded as plan() does.
        let prior = LayerMap::plan(&v1, 10, Some(&prior)).unwrap();
        assert_eq!(
            bins(&prior),
            vec![vec!["big"], vec!["s1", "s2", "v"], vec!["w", "x"], vec![]]
        );
        // Build 2: v and w changed and are now known to change.
        let v2 = vec![
            with(fp("big", 1), 1000, 0),
            with(fp("s1", 1), 10, 0),
            with(fp("s2", 1), 10, 0),
            with(fp("v", 2), 10, 2),
            with(fp("w", 2), 50, 2),
            with(fp("x", 1), 50, 0),
        ];
        let map = LayerMap::plan(&v2, 10, Some(&prior)).unwrap();
        // The unchanged bin keeps its place and content; the two changed
        // bins now hold the volatile pair and the stable rest.
        assert_eq!(
            bins(&map),
            vec![vec!["big"], vec!["v", "w"], vec!["s1", "s2", "x"], vec![]]
        );
        assert!(map.bins[3].reserved);
        assert_eq!(map.bins[1].fingerprints["v"], "v-2");
        // Nothing changed: nothing moves.
        assert_eq!(LayerMap::plan(&v2, 10, Some(&map)).unwrap(), map);
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
