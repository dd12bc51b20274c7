//! One run's shared state, [`Bench`]: the fixture, the scratch directory,
//! the workdir of the first builds and the lines gathered so far; and the
//! first compose, which every part starts from.
//!
//! Why it exists: the parts of a run (compose, rpmdb, disk, cost growth,
//! derive) add their lines to the same table from modules of their own,
//! each adding its methods to `Bench` there.
//!
//! What it must not do: know which parts a run has (`main.rs` picks
//! them), or measure anything beyond the first compose.

use std::path::{Path, PathBuf};

use anyhow::Result;
use strata_testdistro::{Fixture, SNAPSHOTS};

use crate::fixture::{Installed, Scale};
use crate::measure::{self, Composed};
use crate::table::Line;

/// One run's shared state: the fixture, the scratch directory, the
/// workdir of the first builds, and the lines gathered so far.
pub struct Bench<'a> {
    pub fixture: &'a Fixture,
    pub dir: &'a Path,
    pub workdir: PathBuf,
    pub manifest: PathBuf,
    pub scale: Scale,
    pub lines: Vec<Line>,
    /// What the first build installed.
    pub installed: Option<Installed>,
}

impl Bench<'_> {
    pub fn vars(&self, snapshot: &str) -> Vec<String> {
        vec![
            format!("fixture={}", self.fixture.root.display()),
            format!("snapshot={snapshot}"),
        ]
    }

    pub fn compose_v1(&mut self) -> Result<Composed> {
        eprintln!("bench: strata compose of snapshot {}", SNAPSHOTS[0]);
        let v1 = measure::compose(&self.workdir, &self.manifest, &self.vars(SNAPSHOTS[0]))?.1;
        self.installed = Some(Installed::of(self.fixture, &v1)?);
        Ok(v1)
    }
}
