//! Synthetic packages that give the fixture the size of a real RHCOS base
//! (`Options::scale_rhcos`): package count, installed bytes, file count and
//! the spread of package and file sizes. docs/fixture.md gives the figures
//! and where they come from.
//!
//! Everything is drawn from one seeded generator, so the same scale gives
//! the same packages on any machine; file content is described, not held
//! (`FileKind::Generated`), and made when each package is built. This
//! module does not touch the fixture's real programs: the demo base keeps
//! them, and these packages come on top, sized so that base and synthetic
//! packages together match the figures.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;

use crate::spec::{FileSpec, PkgSpec};
use crate::synth::{Content, Kind};

/// A real RHCOS base: packages in its rpmdb.
pub const RHCOS_PACKAGES: usize = 500;
/// A real RHCOS base: bytes of its installed files.
pub const RHCOS_BYTES: u64 = 2_500_000_000;
/// A real RHCOS base: regular files and symlinks (ostree's content
/// objects, before deduplication).
pub const RHCOS_FILES: usize = 50_000;

/// What the demo base's own packages (Debian's programs, the kernel)
/// already bring, as a bench run counted them in its packages' headers:
/// subtracted from the figures above.
const BASE_PACKAGES: usize = 103;
const BASE_BYTES: u64 = 220_000_000;
const BASE_FILES: usize = 3_600;

/// Spread of package sizes: log-normal, its sigma. With the mean fixed by
/// the figures above this gives a median package of about 600 KB, a
/// largest of a few hundred MB (linux-firmware's size) and the smallest
/// of a few hundred bytes, as in a real package set.
const PACKAGE_SIGMA: f64 = 2.27;
/// Files per package grow with its size to this power, times a log-normal
/// factor of this sigma (some packages are one large binary, others many
/// small modules or data files).
const FILES_EXPONENT: f64 = 0.6;
const FILES_SIGMA: f64 = 0.8;
/// Spread of file sizes inside one package (log-normal sigma).
const FILE_SIGMA: f64 = 1.5;
/// One entry in ten is a symlink.
const SYMLINK_EVERY: usize = 10;
/// Files per directory.
const DIR_FILES: usize = 24;

/// How much of a real RHCOS base the synthetic packages make up, with the
/// demo base: 1000 per mille is a full base, 500 half of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RhcosScale {
    pub permille: u32,
}

impl RhcosScale {
    pub const FULL: RhcosScale = RhcosScale { permille: 1000 };
    pub const HALF: RhcosScale = RhcosScale { permille: 500 };

    fn of(self, n: f64) -> f64 {
        n * f64::from(self.permille) / 1000.0
    }

    /// Synthetic packages, bytes and files this scale adds to the base.
    pub fn synthetic(self) -> (usize, u64, usize) {
        (
            self.of((RHCOS_PACKAGES - BASE_PACKAGES) as f64).round() as usize,
            self.of((RHCOS_BYTES - BASE_BYTES) as f64) as u64,
            self.of((RHCOS_FILES - BASE_FILES) as f64).round() as usize,
        )
    }
}

/// What a package mostly holds, which decides the kind of its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Firmware, compressed kernel modules, databases: many files of
    /// already-compressed data.
    Data,
    /// A few large executables and their text (Go programs, containers'
    /// tools).
    Program,
    /// Libraries, scripts, configuration, documentation.
    Mixed,
}

/// The synthetic packages of `scale`.
pub fn rhcos_packages(scale: RhcosScale) -> Vec<PkgSpec> {
    let (count, bytes, files) = scale.synthetic();
    let mut rng = ChaCha12Rng::seed_from_u64(0x5254_4843_4f53);
    let draws: Vec<(f64, f64, Class)> = (0..count)
        .map(|_| {
            let size = (PACKAGE_SIGMA * gauss(&mut rng)).exp();
            let files = size.powf(FILES_EXPONENT) * (FILES_SIGMA * gauss(&mut rng)).exp();
            let class = match rng.gen_range(0.0..1.0) {
                u if u < 0.12 => Class::Data,
                u if u < 0.30 => Class::Program,
                _ => Class::Mixed,
            };
            (size, files, class)
        })
        .collect();
    let size_sum: f64 = draws.iter().map(|d| d.0).sum();
    let files_sum: f64 = draws.iter().map(|d| d.1).sum();
    let mut sizes: Vec<u64> = draws
        .iter()
        .map(|d| (bytes as f64 * d.0 / size_sum) as u64)
        .collect();
    // What rounding down left over goes to the largest package.
    if let Some(largest) = (0..sizes.len()).max_by_key(|&i| sizes[i]) {
        sizes[largest] += bytes - sizes.iter().sum::<u64>();
    }
    draws
        .iter()
        .zip(sizes)
        .enumerate()
        .map(|(i, (&(_, nfiles, class), size))| {
            let entries = ((files as f64 * nfiles / files_sum).round() as usize)
                .clamp(1, (size as usize / 64).max(1));
            package(&mut rng, i, size, entries, class)
        })
        .collect()
}

/// One package of `size` bytes in `entries` files and symlinks.
fn package(rng: &mut ChaCha12Rng, i: usize, size: u64, entries: usize, class: Class) -> PkgSpec {
    let name = format!("strata-rhcos-{i:04}");
    let symlinks = entries / SYMLINK_EVERY;
    let regular = entries - symlinks;
    let sizes = split(rng, size, regular);
    let mut files = Vec::with_capacity(entries + regular / DIR_FILES + 4);
    let root = match class {
        Class::Data => format!("/usr/lib/firmware/{name}"),
        Class::Program | Class::Mixed => format!("/usr/share/{name}"),
    };
    files.push(FileSpec::dir(&root, 0o755));
    let mut paths = Vec::with_capacity(regular);
    let mut last_dir = None;
    for (j, &len) in sizes.iter().enumerate() {
        let seed = format!("{name}:{j}");
        // The largest files of a program are its executables and libraries.
        let (path, kind, mode) = match (class, j) {
            (Class::Program | Class::Mixed, 0) => (format!("/usr/bin/{name}"), Kind::Binary, 0o755),
            (Class::Program | Class::Mixed, 1..=3) => {
                (format!("/usr/lib64/lib{name}.so.{j}"), Kind::Binary, 0o755)
            }
            _ => {
                let dir = format!("{root}/d{:03}", j / DIR_FILES);
                if last_dir != Some(j / DIR_FILES) {
                    files.push(FileSpec::dir(&dir, 0o755));
                    last_dir = Some(j / DIR_FILES);
                }
                let u: f64 = rng.gen_range(0.0..1.0);
                let (kind, ext) = match class {
                    Class::Data if u < 0.85 => (Kind::Compressed, "bin.xz"),
                    Class::Data => (Kind::Text, "txt"),
                    Class::Program if u < 0.6 => (Kind::Binary, "so"),
                    Class::Program => (Kind::Text, "json"),
                    Class::Mixed if u < 0.55 => (Kind::Text, "py"),
                    Class::Mixed if u < 0.85 => (Kind::Binary, "so"),
                    Class::Mixed => (Kind::Compressed, "gz"),
                };
                (format!("{dir}/f{j:05}.{ext}"), kind, 0o644)
            }
        };
        let content = Content {
            kind,
            seed,
            size: len as usize,
        };
        files.push(FileSpec::generated(&path, content, mode));
        paths.push(path);
    }
    if symlinks > 0 {
        let dir = format!("{root}/links");
        files.push(FileSpec::dir(&dir, 0o755));
        for k in 0..symlinks {
            let target = &paths[rng.gen_range(0..paths.len())];
            files.push(FileSpec::symlink(&format!("{dir}/l{k:05}"), target));
        }
    }
    let mut p = super::pkg(&name, "1.0", "1.el8")
        .requires(&["glibc"])
        .files(files);
    p.summary = format!("Synthetic package {i} of an RHCOS-sized base (fixture)");
    p
}

/// `total` bytes split into `n` log-normally spread sizes, largest first.
fn split(rng: &mut ChaCha12Rng, total: u64, n: usize) -> Vec<u64> {
    let weights: Vec<f64> = (0..n).map(|_| (FILE_SIGMA * gauss(rng)).exp()).collect();
    let sum: f64 = weights.iter().sum();
    let mut sizes: Vec<u64> = weights
        .iter()
        .map(|w| (total as f64 * w / sum) as u64)
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let rest = total - sizes.iter().sum::<u64>();
    sizes[0] += rest;
    sizes
}

/// A standard normal draw (Box-Muller).
fn gauss(rng: &mut ChaCha12Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::FileKind;

    /// Only the plan is made here (no content is generated): the figures
    /// the docs promise hold, the spread looks like a real package set,
    /// and the same scale gives the same packages.
    #[test]
    fn rhcos_scale_has_the_promised_figures() {
        let pkgs = rhcos_packages(RhcosScale::FULL);
        let (count, bytes, files) = RhcosScale::FULL.synthetic();
        assert_eq!(pkgs.len(), count);
        let total: u64 = pkgs.iter().map(PkgSpec::payload_size).sum();
        assert_eq!(total, bytes);
        let entries = pkgs
            .iter()
            .flat_map(|p| &p.files)
            .filter(|f| !matches!(f.kind, FileKind::Dir))
            .count();
        let off = entries as f64 / files as f64;
        assert!((0.95..1.05).contains(&off), "{entries} files for {files}");

        let mut sizes: Vec<u64> = pkgs.iter().map(PkgSpec::payload_size).collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        let largest = *sizes.last().unwrap();
        assert!(
            (200_000..2_000_000).contains(&median),
            "median package {median}"
        );
        assert!(
            (50_000_000..500_000_000).contains(&largest),
            "largest package {largest}"
        );
        let mut file_sizes: Vec<u64> = pkgs
            .iter()
            .flat_map(|p| &p.files)
            .filter(|f| matches!(f.kind, FileKind::Generated(_)))
            .map(FileSpec::size)
            .collect();
        file_sizes.sort_unstable();
        let median = file_sizes[file_sizes.len() / 2];
        assert!((2_000..30_000).contains(&median), "median file {median}");

        let again = rhcos_packages(RhcosScale::FULL);
        let names = |p: &[PkgSpec]| -> Vec<(String, u64, usize)> {
            p.iter()
                .map(|p| (p.name.clone(), p.payload_size(), p.files.len()))
                .collect()
        };
        assert_eq!(names(&pkgs), names(&again));
        let half = rhcos_packages(RhcosScale::HALF);
        let half_bytes: u64 = half.iter().map(PkgSpec::payload_size).sum();
        assert_eq!(half_bytes, RhcosScale::HALF.synthetic().1);
    }
}
