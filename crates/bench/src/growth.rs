//! The cost-growth lines: compose and disk (metal) of half the synthetic
//! packages against the full set, in seconds per GB installed.
//!
//! What it must not do: build the half set in the first build's workdir
//! (its compose would then reuse the first build's work, not start cold).

use anyhow::Result;
use strata_testdistro::SNAPSHOTS;

use crate::bench::Bench;
use crate::disk;
use crate::fixture::{scale_manifest, Installed};
use crate::measure::{self, Composed, Run};
use crate::table::{Figure, Goal, Line};

impl Bench<'_> {
    /// Compose and disk of half the synthetic packages, in a workdir of
    /// their own, against the full set: seconds per GB installed.
    pub fn growth(&mut self, v1: &Composed, compose: &Run, metal: &disk::Metal) -> Result<()> {
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
}
