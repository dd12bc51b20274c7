//! `make bench` and `make bench-full`: strata measured against the
//! baselines users would otherwise run, side by side in one run, ending
//! with one table (docs/bench.md says how to read it).
//!
//! `strata-bench [--scale N | --scale rhcos] [compose | zstream | derive | disk | rpmdb]`:
//! the fixture with N small synthetic packages on top of the demo base
//! (`make bench`, N = 300), or one of a real RHCOS base's size
//! (`make bench-full`: about 500 packages, 2.5 GB, 50,000 files; see
//! docs/fixture.md). The lines, snapshot 20261101 first:
//!
//! - compose cold: strata's compose up to the ostree commit (depsolve,
//!   install, initramfs, conventions, commit) against Debian's
//!   `dnf --installroot`, dracut in the tree (what RHEL's kernel-core runs
//!   from its %posttrans) and `ostree commit` of the same package set;
//!   compose to the chunked image against that plus ostree-ext
//!   0.15.3's `encapsulate` (the library rpm-ostree's `compose
//!   container-encapsulate` uses), given the same package -> content
//!   mapping; strata's no-op rebuild.
//! - compose after the z-stream (snapshot 20261115, a handful of packages
//!   changed) in the first build's workdir, against a cold compose of the
//!   same set in a fresh one; then for strata and ostree-ext, the bytes a
//!   client holding the first image downloads, against the compressed
//!   size of the changed packages.
//! - disk: `strata disk` (metal) against a script doing `ostree admin
//!   deploy` + sfdisk + mkfs on the same commit (see `disk.rs`); qemu,
//!   metal and metal4k in one run against metal alone.
//! - cost growth: compose and disk (metal) of half the synthetic packages
//!   and of all, in seconds per GB installed.
//! - derive: the kubelet override rebuild against a full compose, and
//!   derive against umoci unpack + dnf --installroot + umoci repack (see
//!   `derive.rs`).
//!
//! strata's stages run as the `strata` binary, each a process measured
//! for time and peak memory like every baseline step (`measure.rs`).
//! compose's time includes its own encapsulation; the compose-to-commit
//! time is that minus strata's encapsulation of the same commit measured
//! on its own (the same image: the digests are checked to be equal).
//! Times are wall-clock seconds; the machine is shared, so read ratios,
//! not absolute numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use strata_testdistro::{Fixture, SNAPSHOTS};

mod derive;
mod disk;
mod measure;
mod scratch;
mod table;

use measure::{Composed, Run};
use table::{Figure, Goal, Line};

/// The stream the demo manifest composes.
const STREAM: &str = "rhel-8.6";

/// Which fixture the bench runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    /// `--scale N`: N small synthetic packages.
    Packages(usize),
    /// `--scale rhcos`: a real RHCOS base's size.
    Rhcos,
}

impl Scale {
    fn parse(s: &str) -> Result<Scale> {
        match s {
            "rhcos" => Ok(Scale::Rhcos),
            n => Ok(Scale::Packages(n.parse().with_context(|| {
                format!("--scale {n}: a number of packages, or `rhcos`")
            })?)),
        }
    }

    fn options(self) -> strata_testdistro::Options {
        match self {
            Scale::Packages(n) => strata_testdistro::Options::default().scale(n),
            Scale::Rhcos => strata_testdistro::Options::default().scale_rhcos(),
        }
    }

    fn fixture_dir(self, target: &Path) -> PathBuf {
        match self {
            Scale::Packages(_) => target.join("strata-bench-fixture"),
            Scale::Rhcos => target.join("strata-bench-fixture-rhcos"),
        }
    }

    /// Rounds of the sides that are compared by medians: at realistic
    /// scale one round of each takes minutes.
    fn rounds(self) -> u32 {
        match self {
            Scale::Packages(_) => 3,
            Scale::Rhcos => 1,
        }
    }

    fn describe(self) -> String {
        match self {
            Scale::Packages(n) => format!("--scale {n}"),
            Scale::Rhcos => "--scale rhcos".into(),
        }
    }
}

fn main() -> Result<()> {
    // The stages' own log lines, for finding where a side spends its time.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let mut scale = Scale::Packages(300);
    let mut part = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--scale" => scale = Scale::parse(&args.next().context("--scale needs a value")?)?,
            "compose" | "zstream" | "derive" | "disk" | "rpmdb" if part.is_none() => part = Some(a),
            other => {
                bail!("usage: strata-bench [--scale N|rhcos] [compose|zstream|derive|disk|rpmdb] (got {other:?})")
            }
        }
    }
    measure::strata()?;
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    eprintln!("bench: the fixture at {}", scale.describe());
    let start = Instant::now();
    let fixture = Fixture::generate(&scale.fixture_dir(&target), &scale.options())?;
    let generated = start.elapsed();
    let scratch = tempfile::tempdir_in(&target).context("scratch directory")?;
    let dir = scratch.path();
    scratch::init(dir)?;
    let mut bench = Bench {
        fixture: &fixture,
        dir,
        workdir: dir.join("strata-work"),
        manifest: scale_manifest(&fixture, dir, false)?,
        scale,
        lines: Vec::new(),
        installed: None,
    };
    match part.as_deref() {
        Some("compose") => {
            let (_, _, ext_oci) = bench.cold()?;
            crate::scratch::set_aside(&ext_oci)?;
        }
        Some("zstream") => {
            let (v1, _, ext_oci) = bench.cold()?;
            bench.zstream(&v1, &ext_oci)?;
            crate::scratch::set_aside(&ext_oci)?;
        }
        Some("derive") => {
            let v1 = bench.compose_v1()?;
            bench.derive(&target, &v1)?;
        }
        Some("disk") => {
            let v1 = bench.compose_v1()?;
            bench.disk(&v1)?;
        }
        Some("rpmdb") => {
            let v1 = bench.compose_v1()?;
            bench.rpmdb(&v1)?;
        }
        _ => bench.all(&target)?,
    }
    let figures = fixture_figures(&scale.fixture_dir(&target), generated)?;
    let installed = bench
        .installed
        .map(|i| format!("; the base composed from it: {i}"))
        .unwrap_or_default();
    table::print(
        &format!(
            "strata bench, fixture at {} ({figures}{installed})\nratios: `base/strata` above 1 and `strata/base` below 1 mean strata is ahead",
            scale.describe()
        ),
        &bench.lines,
    );
    Ok(())
}

/// One run's shared state: the fixture, the scratch directory, the
/// workdir of the first builds, and the lines gathered so far.
struct Bench<'a> {
    fixture: &'a Fixture,
    dir: &'a Path,
    workdir: PathBuf,
    manifest: PathBuf,
    scale: Scale,
    lines: Vec<Line>,
    /// What the first build installed.
    installed: Option<Installed>,
}

impl Bench<'_> {
    fn vars(&self, snapshot: &str) -> Vec<String> {
        vec![
            format!("fixture={}", self.fixture.root.display()),
            format!("snapshot={snapshot}"),
        ]
    }

    fn compose_v1(&mut self) -> Result<Composed> {
        eprintln!("bench: strata compose of snapshot {}", SNAPSHOTS[0]);
        let v1 = measure::compose(&self.workdir, &self.manifest, &self.vars(SNAPSHOTS[0]))?.1;
        self.installed = Some(Installed::of(self.fixture, &v1)?);
        Ok(v1)
    }

    fn all(&mut self, target: &Path) -> Result<()> {
        let (v1, strata_total, ext_oci) = self.cold()?;
        // A part that fails becomes a FAILED line, and the others still
        // run: at realistic scale a run takes long, and what broke is
        // itself a finding.
        let r = self.zstream(&v1, &ext_oci);
        self.record("z-stream", r);
        crate::scratch::set_aside(&ext_oci)?;
        let r = self.rpmdb(&v1);
        self.record("rpmdb", r);
        let full_disk = self.disk(&v1);
        match full_disk {
            Ok(full_disk) => {
                let r = self.growth(&v1, &strata_total, &full_disk);
                self.record("cost growth", r);
            }
            Err(e) => self.record("disk", Err(e)),
        }
        let r = self.derive(target, &v1);
        self.record("derive", r);
        Ok(())
    }

    /// The cold compose against its baselines, the encapsulation against
    /// ostree-ext's, the no-op rebuild. Returns the build, strata's whole
    /// compose and ostree-ext's image of it.
    fn cold(&mut self) -> Result<(Composed, Run, PathBuf)> {
        let dir = self.dir;
        eprintln!("bench: strata compose of snapshot {}", SNAPSHOTS[0]);
        let (strata_total, v1) =
            measure::compose(&self.workdir, &self.manifest, &self.vars(SNAPSHOTS[0]))?;
        self.installed = Some(Installed::of(self.fixture, &v1)?);
        let repo = self.workdir.join("repo");
        let content = content_map(
            self.fixture,
            &repo,
            &v1.ostree_commit,
            &self.workdir,
            0,
            dir,
        )?;
        let mut o = strata_oscontainer::EncapsulateOptions::default();
        o.content = Some(content.clone());
        o.labels = image_labels(&v1.image, &v1.inputhash)?;
        o.source_date_epoch = Some(source_date_epoch(&v1)?);
        let (strata_enc, enc) = timed(|| {
            Ok(strata_oscontainer::encapsulate(
                &repo,
                &v1.ostree_commit,
                &dir.join("strata-oci"),
                "v1",
                &o,
            )?)
        })?;
        ensure!(
            enc.manifest_digest == v1.digest,
            "encapsulating the commit again gave {} instead of compose's {}",
            enc.manifest_digest,
            v1.digest
        );
        crate::scratch::set_aside(&dir.join("strata-oci"))?;
        eprintln!("bench: ostree-ext encapsulate");
        let ostree_ext = strata_testdistro::peers::ostree_ext_client()?;
        let ext_oci = dir.join("ostree-ext-oci");
        let ext_input = OstreeExtInput::write(&repo, &v1.ostree_commit, &content, dir, "v1")?;
        let ext_enc = ostree_ext_encapsulate(
            ostree_ext,
            &repo,
            &v1.ostree_commit,
            &ext_oci,
            "v1",
            &ext_input,
            None,
        )?;
        eprintln!("bench: baseline dnf --installroot + dracut + ostree commit");
        let baseline = dnf_and_ostree_commit(self.fixture, dir, &manifest_packages(&v1)?)?;
        eprintln!("bench: strata no-op rebuild");
        let (noop, again) =
            measure::compose(&self.workdir, &self.manifest, &self.vars(SNAPSHOTS[0]))?;
        ensure!(!again.changed, "the second compose was not a no-op");

        let to_commit = Run {
            wall: strata_total.wall.saturating_sub(strata_enc),
            rss: strata_total.rss,
        };
        let ext_enc_run = ext_enc;
        self.lines.push(Line::faster(
            format!("compose cold to the commit ({} packages)", v1.packages),
            &to_commit,
            &baseline,
            Goal::AtLeast(2.0),
        ));
        self.lines.push(Line::faster(
            "compose cold to the chunked image (base: + ostree-ext encapsulate)",
            &strata_total,
            &baseline.then(ext_enc_run),
            Goal::None,
        ));
        self.lines.push(Line::faster(
            "encapsulation (base: ostree-ext 0.15.3; strata in-process, no RSS)",
            &Run {
                wall: strata_enc,
                rss: 0,
            },
            &ext_enc_run,
            Goal::None,
        ));
        let mut noop_line = Line::new("no-op rebuild (target: under 2 s)");
        noop_line.strata = Some(Figure::secs(&noop));
        noop_line.strata_rss = Some(noop.rss);
        self.lines.push(noop_line);
        Ok((v1, strata_total, ext_oci))
    }

    /// A part's failure as a FAILED line (and on stderr in full).
    fn record(&mut self, part: &str, result: Result<()>) {
        if let Err(e) = result {
            eprintln!("bench: {part} failed: {e:#}");
            self.lines.push(Line::failed(
                part,
                format!("failed: {}", first_line(&format!("{e:#}"))),
                Goal::None,
            ));
        }
    }

    /// The z-stream: compose in the first build's workdir against a cold
    /// compose of the same set, and the download each image format makes
    /// a client holding the first image pay.
    fn zstream(&mut self, v1: &Composed, ext_oci: &Path) -> Result<()> {
        let dir = self.dir;
        let repo = self.workdir.join("repo");
        eprintln!(
            "bench: cold compose of snapshot {} in a fresh workdir",
            SNAPSHOTS[1]
        );
        let cold_workdir = dir.join("strata-work-z");
        let (cold, cold_v2) =
            measure::compose(&cold_workdir, &self.manifest, &self.vars(SNAPSHOTS[1]))?;
        eprintln!(
            "bench: strata compose of snapshot {} after {}",
            SNAPSHOTS[1], SNAPSHOTS[0]
        );
        let (v2, repo2, image2) = match measure::compose(
            &self.workdir,
            &self.manifest,
            &self.vars(SNAPSHOTS[1]),
        ) {
            Ok((incremental, v2)) => {
                ensure!(v2.changed, "the z-stream compose changed nothing");
                let line = "compose after the z-stream vs cold compose of that set";
                // What the update reused must not show in its result.
                self.lines
                    .push(if v2.ostree_commit == cold_v2.ostree_commit {
                        Line::faster(line, &incremental, &cold, Goal::AtLeast(4.0))
                    } else {
                        Line::failed(
                            line,
                            format!(
                                "commit {} differs from the cold compose's {}",
                                v2.ostree_commit, cold_v2.ostree_commit
                            ),
                            Goal::AtLeast(4.0),
                        )
                    });
                let image = strata_oscontainer::ImageRef::parse(&v2.image, None)?;
                (v2, repo.clone(), image)
            }
            Err(e) => {
                // Give the fresh workdir's commit the first build's
                // layer map, as compose would have, to still measure
                // the download.
                eprintln!("bench: the z-stream compose failed ({e:#}); encapsulating the cold compose with the first build's layer map");
                self.lines.push(Line::failed(
                    "compose after the z-stream vs cold compose of that set",
                    format!("failed: {}", first_line(&format!("{e:#}"))),
                    Goal::AtLeast(4.0),
                ));
                let repo2 = cold_workdir.join("repo");
                let prior = strata_oscontainer::LayerMap::from_json(&std::fs::read_to_string(
                    v1.build_dir.join("layer-map.json"),
                )?)?;
                let mut o = strata_oscontainer::EncapsulateOptions::default();
                o.content = Some(content_map(
                    self.fixture,
                    &repo2,
                    &cold_v2.ostree_commit,
                    &self.workdir,
                    1,
                    dir,
                )?);
                o.labels = image_labels(&cold_v2.image, &cold_v2.inputhash)?;
                o.source_date_epoch = Some(source_date_epoch(&cold_v2)?);
                o.prior = Some(prior);
                strata_oscontainer::encapsulate(
                    &repo2,
                    &cold_v2.ostree_commit,
                    &self.workdir.join("oci"),
                    "z",
                    &o,
                )?;
                (
                    cold_v2.clone(),
                    repo2,
                    strata_oscontainer::ImageRef::oci(&self.workdir.join("oci"), "z"),
                )
            }
        };
        let strata_diff = strata_oscontainer::diff(
            &strata_oscontainer::ImageRef::parse(&v1.image, None)?,
            &image2,
            &strata_oscontainer::TransportOptions::default(),
        )?;
        let content2 = content_map(
            self.fixture,
            &repo2,
            &v2.ostree_commit,
            &self.workdir,
            1,
            dir,
        )?;
        let ext_input2 = OstreeExtInput::write(&repo2, &v2.ostree_commit, &content2, dir, "v2")?;
        let prior = dir.join("ostree-ext-v1.manifest.json");
        std::fs::write(
            &prior,
            strata_process::stdout(
                Command::new("skopeo")
                    .arg("inspect")
                    .arg("--raw")
                    .arg(format!("oci:{}:v1", ext_oci.display())),
            )?,
        )?;
        ostree_ext_encapsulate(
            strata_testdistro::peers::ostree_ext_client()?,
            &repo2,
            &v2.ostree_commit,
            ext_oci,
            "v2",
            &ext_input2,
            Some(&prior),
        )?;
        let ext_diff = strata_oscontainer::diff(
            &strata_oscontainer::ImageRef::oci(ext_oci, "v1"),
            &strata_oscontainer::ImageRef::oci(ext_oci, "v2"),
            &strata_oscontainer::TransportOptions::default(),
        )?;
        let (changed_names, changed_bytes) = changed_packages(self.fixture, v1, &v2)?;
        eprintln!(
            "bench: z-stream: {} changed packages ({}), {:.2} MiB as RPMs; strata's changed layers:",
            changed_names.len(),
            changed_names.join(" "),
            mib(changed_bytes)
        );
        for l in &strata_diff.layers_added {
            eprintln!(
                "bench:   {:>8.2} MiB  {}",
                mib(l.size),
                describe(&l.components)
            );
        }
        let per_changed =
            |d: &strata_oscontainer::ImageDiff| d.download_bytes as f64 / changed_bytes as f64;
        let mut line = Line::new(format!(
            "z-stream download / changed RPMs ({:.0} MiB; base: ostree-ext)",
            mib(changed_bytes)
        ));
        line.strata = Some(Figure::of(mib(strata_diff.download_bytes), "MiB"));
        line.baseline = Some(Figure::of(mib(ext_diff.download_bytes), "MiB"));
        line.ratio = Some(per_changed(&strata_diff));
        line.ratio_of = "strata/RPMs";
        line.goal = Goal::AtMost(1.1);
        self.lines.push(line);
        let mut ext = Line::new("  (ostree-ext's download / changed RPMs)");
        ext.ratio = Some(per_changed(&ext_diff));
        ext.ratio_of = "ext/RPMs";
        self.lines.push(ext);
        // A new kernel means a new initramfs, which no RPM carries: what
        // the rest of the download weighs against the RPMs.
        let initramfs: u64 = strata_diff
            .layers_added
            .iter()
            .filter(|l| l.components == [strata_compose::INITRAMFS])
            .map(|l| l.size)
            .sum();
        let without = strata_diff.download_bytes - initramfs;
        let mut rest = Line::new("  (strata's download without the initramfs / changed RPMs)");
        rest.strata = Some(Figure::of(mib(without), "MiB"));
        rest.ratio = Some(without as f64 / changed_bytes as f64);
        rest.ratio_of = "strata/RPMs";
        self.lines.push(rest);
        crate::scratch::set_aside(&cold_workdir)?;
        Ok(())
    }

    /// What RHEL 8's rpmdb format costs: the composed commit's Berkeley DB
    /// database written again by strata (export with the host's rpm, write
    /// with libdb), against the host's rpm importing the same headers into
    /// sqlite (`rpmdb --importdb`), the format it writes natively.
    fn rpmdb(&mut self, v1: &Composed) -> Result<()> {
        let db = self.dir.join("rpmdb-bench");
        strata_process::run(
            Command::new("ostree")
                .arg(format!("--repo={}", self.workdir.join("repo").display()))
                .args([
                    "checkout",
                    "-U",
                    "--subpath=/usr/share/rpm",
                    &v1.ostree_commit,
                ])
                .arg(&db),
        )?;
        ensure!(
            strata_rpmdb::Backend::detect(&db) == Some(strata_rpmdb::Backend::Bdb),
            "the composed RHEL 8 commit has no Berkeley DB rpmdb"
        );
        let (to_sqlite, ()) =
            timed(|| Ok(strata_rpmdb::convert(&db, strata_rpmdb::Backend::Sqlite)?))?;
        let (to_bdb, ()) = timed(|| Ok(strata_rpmdb::convert(&db, strata_rpmdb::Backend::Bdb)?))?;
        let mut line = Line::share(
            "rpmdb: Berkeley DB write vs rpm's sqlite import (in-process)",
            &Run {
                wall: to_bdb,
                rss: 0,
            },
            &Run {
                wall: to_sqlite,
                rss: 0,
            },
            Goal::None,
        );
        line.ratio_of = "bdb/sqlite";
        self.lines.push(line);
        crate::scratch::set_aside(&db)?;
        Ok(())
    }

    /// The disk lines on the first build; returns the metal measurement.
    fn disk(&mut self, v1: &Composed) -> Result<disk::Metal> {
        let subject = disk::Subject {
            workdir: &self.workdir,
            image: &v1.image,
            commit: &v1.ostree_commit,
        };
        let rounds = self.scale.rounds() as usize;
        let metal = disk::metal(&subject, rounds, &self.dir.join("disk-work"))?;
        self.lines.push(Line::faster(
            format!(
                "disk metal ({:.0} MiB of files) vs deploy + sfdisk + mkfs, median of {rounds}",
                mib(metal.content)
            ),
            &metal.strata,
            &metal.baseline,
            Goal::AtLeast(1.5),
        ));
        let all = disk::all_platforms(&subject)?;
        self.lines.push(Line::share(
            "disk qemu + metal + metal4k vs metal alone",
            &all,
            &metal.strata,
            Goal::AtMost(1.3),
        ));
        Ok(metal)
    }

    /// Compose and disk of half the synthetic packages, in a workdir of
    /// their own, against the full set: seconds per GB installed.
    fn growth(&mut self, v1: &Composed, compose: &Run, metal: &disk::Metal) -> Result<()> {
        eprintln!("bench: compose and disk of half the synthetic packages");
        let half_dir = self.dir.join("half");
        std::fs::create_dir_all(&half_dir)?;
        let manifest = scale_manifest(self.fixture, &half_dir, true)?;
        let workdir = half_dir.join("work");
        let (half_compose, half) = measure::compose(&workdir, &manifest, &self.vars(SNAPSHOTS[0]))?;
        let subject = disk::Subject {
            workdir: &workdir,
            image: &half.image,
            commit: &half.ostree_commit,
        };
        let half_metal = disk::metal(&subject, 1, &self.dir.join("disk-work"))?;
        let (half_gb, full_gb) = (
            Installed::of(self.fixture, &half)?.bytes as f64 / 1e9,
            Installed::of(self.fixture, v1)?.bytes as f64 / 1e9,
        );
        for (what, half_run, full_run) in [
            ("compose", &half_compose, compose),
            ("disk metal", &half_metal.strata, &metal.strata),
        ] {
            let (per_half, per_full) = (half_run.secs() / half_gb, full_run.secs() / full_gb);
            let mut line = Line::new(format!(
                "{what} s/GB: full ({full_gb:.2} GB) vs half ({half_gb:.2} GB)"
            ));
            line.strata = Some(Figure::of(per_full, "s/GB"));
            line.baseline = Some(Figure::of(per_half, "s/GB"));
            line.ratio = Some(per_full / per_half);
            line.ratio_of = "full/half";
            line.goal = Goal::AtMost(1.1);
            line.strata_rss = Some(full_run.rss);
            line.baseline_rss = Some(half_run.rss);
            self.lines.push(line);
        }
        crate::scratch::set_aside(&half_dir)?;
        Ok(())
    }

    fn derive(&mut self, target: &Path, v1: &Composed) -> Result<()> {
        let base = derive::Base::new(&self.workdir, &v1.image, &self.manifest)?;
        let lines = derive::bench(self.fixture, &base, target, self.dir, self.scale.rounds())?;
        self.lines.extend(lines);
        Ok(())
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect()
}

/// The fixture's figures for the table's title: how long generating it
/// took (about 0 when it was reused) and its disk use.
fn fixture_figures(dir: &Path, generated: Duration) -> Result<String> {
    let du = strata_process::stdout(Command::new("du").args(["-s", "-B1"]).arg(dir))?;
    let disk: u64 = du
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok(format!(
        "fixture made in {:.0} s, {:.2} GB on disk",
        generated.as_secs_f64(),
        disk as f64 / 1e9
    ))
}

fn describe(components: &[String]) -> String {
    match components {
        [] => "(commit layer)".into(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let start = Instant::now();
    let v = f()?;
    Ok((start.elapsed(), v))
}

/// The demo base plus the synthetic packages: all of them, or every
/// other one (`half`, for the cost-growth lines).
fn scale_manifest(fixture: &Fixture, dir: &Path, half: bool) -> Result<PathBuf> {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo/rhel-8.6.yaml");
    let scale = fixture
        .repo("rhel-8.6-scale", None)
        .context("fixture without the scale repo")?;
    let names: Vec<&str> = scale
        .packages
        .iter()
        .enumerate()
        .filter(|(i, _)| !half || i % 2 == 0)
        .map(|(_, p)| p.name.as_str())
        .collect();
    let text = format!(
        "edition: 1\ninclude: {demo}\nrepos:\n  - id: rhel-8.6-scale\n    baseurl: file://{root}/{dir}\n    gpgkey: file://{root}/{key}\ninputs:\n  repos: [rhel-8.6-scale]\npackages:\n  - {names}\n",
        demo = std::fs::canonicalize(demo)?.display(),
        root = fixture.root.display(),
        dir = scale.dir,
        key = fixture.info.release_key.path,
        names = names.join(" "),
    );
    let path = dir.join("scale.yaml");
    std::fs::write(&path, text)?;
    Ok(path)
}

fn manifest_packages(r: &Composed) -> Result<Vec<String>> {
    let lock = strata_compose::Lockfile::load(&r.lockfile)?;
    Ok(lock.packages.keys().cloned().collect())
}

/// The RPM files of a build's packages, from its lockfile.
fn package_files(
    fixture: &Fixture,
    r: &Composed,
    snapshot: &str,
) -> Result<Vec<(String, PathBuf)>> {
    let lock = strata_compose::Lockfile::load(&r.lockfile)?;
    lock.packages
        .iter()
        .map(|(name, locked)| {
            let (_, p) = fixture
                .info
                .repos
                .iter()
                .filter(|repo| {
                    Some(repo.id.as_str()) == locked.repo()
                        && repo.snapshot.as_deref().is_none_or(|s| s == snapshot)
                })
                .flat_map(|repo| repo.packages.iter().map(move |p| (repo, p)))
                .find(|(_, p)| {
                    &p.name == name
                        && locked
                            .evra
                            .as_deref()
                            .is_none_or(|evra| p.nevra.ends_with(evra))
                })
                .with_context(|| {
                    format!(
                        "{name} {} is not in the fixture's repo {}",
                        locked.evra.as_deref().unwrap_or("?"),
                        locked.repo().unwrap_or("?")
                    )
                })?;
            Ok((name.clone(), fixture.root.join(&p.file)))
        })
        .collect()
}

/// What a build installs, as its packages' headers list it (a directory
/// two packages own counts twice, as in `rpm -qal`).
#[derive(Clone, Copy, Debug, Default)]
struct Installed {
    packages: usize,
    bytes: u64,
    files: usize,
    symlinks: usize,
    dirs: usize,
}

impl Installed {
    fn of(fixture: &Fixture, r: &Composed) -> Result<Installed> {
        let files = package_files(fixture, r, SNAPSHOTS[0])?;
        let out = strata_process::stdout(
            Command::new("rpm")
                .args(["-qp", "--nosignature", "--nodigest", "--qf"])
                .arg("S %{SIZE}\\n[%{FILEMODES}\\n]")
                .args(files.iter().map(|(_, f)| f)),
        )?;
        let mut i = Installed {
            packages: files.len(),
            ..Installed::default()
        };
        for l in out.lines() {
            if let Some(size) = l.strip_prefix("S ") {
                i.bytes += size.trim().parse::<u64>().unwrap_or(0);
                continue;
            }
            match l.trim().parse::<u32>().map(|m| m & 0o170_000) {
                Ok(0o100_000) => i.files += 1,
                Ok(0o120_000) => i.symlinks += 1,
                Ok(0o040_000) => i.dirs += 1,
                _ => {}
            }
        }
        Ok(i)
    }
}

impl std::fmt::Display for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} packages, {:.2} GB installed, {} files + {} symlinks, {} directories",
            self.packages,
            self.bytes as f64 / 1e9,
            self.files,
            self.symlinks,
            self.dirs
        )
    }
}

/// The chunking input compose used for `commit`: its rpmdb checked out,
/// the workdir's history as it was before that build.
fn content_map(
    fixture: &Fixture,
    repo: &Path,
    commit: &str,
    workdir: &Path,
    snapshot: usize,
    dir: &Path,
) -> Result<strata_oscontainer::ContentMap> {
    let rpmdb = dir.join(format!("rpmdb-{commit}"));
    if !rpmdb.exists() {
        strata_process::run(
            Command::new("ostree")
                .arg(format!("--repo={}", repo.display()))
                .args(["checkout", "-U", "--subpath=/usr/share/rpm", commit])
                .arg(&rpmdb),
        )?;
    }
    let mut history = strata_compose::ChangeHistory::load(workdir, STREAM)?;
    if snapshot == 0 {
        history = strata_compose::ChangeHistory::default();
    }
    strata_compose::content_map(&rpmdb, &fixture.info.kernel_kvers[snapshot], &history)
}

/// The labels compose gives the image (besides those from the commit).
fn image_labels(image: &str, inputhash: &str) -> Result<BTreeMap<String, String>> {
    let info = strata_oscontainer::inspect(
        &strata_oscontainer::ImageRef::parse(image, None)?,
        &strata_oscontainer::TransportOptions::default(),
    )?;
    let osname = info
        .labels
        .get("com.coreos.osname")
        .cloned()
        .unwrap_or_default();
    Ok([
        ("com.coreos.osname".to_string(), osname),
        ("strata.inputhash".to_string(), inputhash.to_string()),
    ]
    .into())
}

fn source_date_epoch(r: &Composed) -> Result<u64> {
    let meta: strata_compose::BuildMeta =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("strata.json"))?)?;
    Ok(meta.source_date_epoch)
}

/// What ostree-ext is given: the same objects -> component assignment and
/// change frequencies strata chunks by.
struct OstreeExtInput {
    components: PathBuf,
    objects: PathBuf,
}

impl OstreeExtInput {
    fn write(
        repo: &Path,
        commit: &str,
        content: &strata_oscontainer::ContentMap,
        dir: &Path,
        name: &str,
    ) -> Result<Self> {
        let owners = strata_oscontainer::object_components(repo, commit, content)?;
        let mut objects = String::new();
        let mut components: BTreeMap<&str, u32> = BTreeMap::new();
        for (csum, owner) in &owners {
            objects.push_str(&format!("{csum}\t{owner}\n"));
            components.insert(owner, content.change_frequency(owner));
        }
        let components: String = components
            .iter()
            .map(|(c, f)| format!("{c}\t{f}\n"))
            .collect();
        let input = OstreeExtInput {
            components: dir.join(format!("ostree-ext-{name}.components")),
            objects: dir.join(format!("ostree-ext-{name}.objects")),
        };
        std::fs::write(&input.components, components)?;
        std::fs::write(&input.objects, objects)?;
        Ok(input)
    }
}

/// Builds tests/ostree-ext-compat (its own workspace: ostree-ext pulls
/// ostree 0.19 / glib 0.18) and returns its binary.
fn ostree_ext_encapsulate(
    bin: &Path,
    repo: &Path,
    commit: &str,
    oci: &Path,
    tag: &str,
    input: &OstreeExtInput,
    prior: Option<&Path>,
) -> Result<Run> {
    std::fs::create_dir_all(oci)?;
    let mut cmd = Command::new(bin);
    cmd.arg("encapsulate")
        .arg(repo)
        .arg(commit)
        .arg(format!("oci:{}:{tag}", oci.display()))
        .arg(&input.components)
        .arg(&input.objects);
    if let Some(p) = prior {
        cmd.arg(p);
    }
    Ok(measure::run(&mut cmd)?.0)
}

/// Packages whose version differs between two builds, and the size of their
/// RPMs in the second build's snapshot.
fn changed_packages(fixture: &Fixture, a: &Composed, b: &Composed) -> Result<(Vec<String>, u64)> {
    let la = strata_compose::Lockfile::load(&a.lockfile)?;
    let lb = strata_compose::Lockfile::load(&b.lockfile)?;
    let mut names = Vec::new();
    let mut bytes = 0;
    for (name, locked) in &lb.packages {
        if la
            .packages
            .get(name)
            .is_some_and(|old| old.evra == locked.evra)
        {
            continue;
        }
        let info = fixture
            .info
            .repos
            .iter()
            .filter(|r| {
                Some(r.id.as_str()) == locked.repo()
                    && r.snapshot.as_deref().is_none_or(|s| s == SNAPSHOTS[1])
            })
            .flat_map(|r| r.packages.iter().map(move |p| (r, p)))
            .find(|(_, p)| &p.name == name)
            .with_context(|| {
                format!(
                    "{name} is not in the fixture's repo {}",
                    locked.repo().unwrap_or("?")
                )
            })?;
        let path = fixture.root.join(&info.1.file);
        bytes += std::fs::metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        names.push(name.clone());
    }
    Ok((names, bytes))
}

/// What a release engineer would script without strata (its tree and
/// repo are removed afterwards).
fn dnf_and_ostree_commit(fixture: &Fixture, dir: &Path, packages: &[String]) -> Result<Run> {
    let reposdir = dir.join("baseline-repos.d");
    std::fs::create_dir_all(&reposdir)?;
    for file in ["rhel-8.6-20261101.repo", "scale.repo"] {
        std::fs::copy(fixture.path(&format!("repos/{file}")), reposdir.join(file))?;
    }
    let root = dir.join("baseline-root");
    let (install, _) = measure::run(
        Command::new("dnf")
            .arg("-y")
            .arg("-q")
            .arg(format!("--installroot={}", root.display()))
            .arg(format!("--setopt=reposdir={}", reposdir.display()))
            .arg(format!(
                "--setopt=cachedir={}",
                dir.join("baseline-cache").display()
            ))
            .args([
                "--releasever=8",
                "--setopt=install_weak_deps=False",
                "install",
            ])
            .args(packages),
    )?;
    // The initramfs. RHEL's kernel-core makes it from its %posttrans
    // (kernel-install runs dracut); the fixture's kernel leaves it to the
    // compose, as rpm-ostree does. Either way the tree to commit has one:
    // dracut with the demo manifest's arguments, in the tree, as one would
    // script it.
    let modules = root.join("usr/lib/modules");
    let kver = std::fs::read_dir(&modules)
        .with_context(|| format!("reading {}", modules.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .context("the baseline tree has no kernel")?;
    let (dracut, _) = measure::run(
        Command::new("bwrap")
            .arg("--bind")
            .arg(&root)
            .args(["/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
            .args(["--setenv", "SOURCE_DATE_EPOCH", "1790000000"])
            .args([
                "/usr/bin/dracut",
                "--no-hostonly",
                "--reproducible",
                "--kver",
            ])
            .arg(&kver)
            .arg("-f")
            .arg(format!("/usr/lib/modules/{kver}/initramfs.img")),
    )?;
    let repo = dir.join("baseline-ostree");
    strata_process::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["init", "--mode=bare-user"]),
    )?;
    let (commit, _) = measure::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["commit", "-b", "baseline", "--no-xattrs"])
            .arg(format!("--tree=dir={}", root.display())),
    )?;
    for d in [&root, &repo, &dir.join("baseline-cache")] {
        crate::scratch::set_aside(d)?;
    }
    Ok(install.then(dracut).then(commit))
}
