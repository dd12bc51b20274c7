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
//!
//! # Modules
//!
//! Each part of a run is a module adding its lines to the one [`Bench`]
//! (`bench`); this file reads the arguments, picks the parts and prints
//! the table.
//!
//! - `fixture` — the fixture's scale, the manifest on it, what a build
//!   installs from it.
//! - `measure` — strata's stages and the baselines' steps run as processes,
//!   timed and their peak memory read.
//! - `scratch` — directories set aside, not removed, until the run ends.
//! - `table` — the lines and the one table they end in.
//! - `bench` — [`Bench`], one run's shared state, and the first compose.
//! - `baseline` — the compose lines' baselines: dnf + dracut + ostree
//!   commit, ostree-ext's encapsulation.
//! - `compose` — the cold compose, encapsulation, no-op and z-stream lines.
//! - `rpmdb`, `disk`, `growth`, `derive` — the other parts, one each.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use strata_testdistro::Fixture;

mod baseline;
mod bench;
mod compose;
mod derive;
mod disk;
mod fixture;
mod growth;
mod measure;
mod rpmdb;
mod scratch;
mod table;

use bench::Bench;
use fixture::{fixture_figures, scale_manifest, Scale};
use table::{first_line, Goal, Line};

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

impl Bench<'_> {
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
}
