//! What a run is measured on: the fixture's scale, the manifest of the
//! demo base plus the synthetic packages, and what a build installs from
//! it (packages, bytes, files), read from the fixture's own RPMs.
//!
//! What it must not do: run strata's stages or the baselines, or time
//! anything; it reads the fixture, the builds' lockfiles and the RPMs'
//! headers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use strata_testdistro::{Fixture, SNAPSHOTS};

use crate::measure::Composed;

/// Which fixture the bench runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// `--scale N`: N small synthetic packages.
    Packages(usize),
    /// `--scale rhcos`: a real RHCOS base's size.
    Rhcos,
}

impl Scale {
    pub fn parse(s: &str) -> Result<Scale> {
        match s {
            "rhcos" => Ok(Scale::Rhcos),
            n => Ok(Scale::Packages(n.parse().with_context(|| {
                format!("--scale {n}: a number of packages, or `rhcos`")
            })?)),
        }
    }

    pub fn options(self) -> strata_testdistro::Options {
        match self {
            Scale::Packages(n) => strata_testdistro::Options::default().scale(n),
            Scale::Rhcos => strata_testdistro::Options::default().scale_rhcos(),
        }
    }

    pub fn fixture_dir(self, target: &Path) -> PathBuf {
        match self {
            Scale::Packages(_) => target.join("strata-bench-fixture"),
            Scale::Rhcos => target.join("strata-bench-fixture-rhcos"),
        }
    }

    /// Rounds of the sides that are compared by medians: at realistic
    /// scale one round of each takes minutes.
    pub fn rounds(self) -> u32 {
        match self {
            Scale::Packages(_) => 3,
            Scale::Rhcos => 1,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Scale::Packages(n) => format!("--scale {n}"),
            Scale::Rhcos => "--scale rhcos".into(),
        }
    }
}

/// The fixture's figures for the table's title: how long generating it
/// took (about 0 when it was reused) and its disk use.
pub fn fixture_figures(dir: &Path, generated: Duration) -> Result<String> {
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

/// The demo base plus the synthetic packages: all of them, or every
/// other one (`half`, for the cost-growth lines).
pub fn scale_manifest(fixture: &Fixture, dir: &Path, half: bool) -> Result<PathBuf> {
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

pub fn manifest_packages(r: &Composed) -> Result<Vec<String>> {
    let lock = strata_compose::Lockfile::load(&r.lockfile)?;
    Ok(lock.packages.keys().cloned().collect())
}

/// The RPM files of a build's packages, from its lockfile.
pub fn package_files(
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
pub struct Installed {
    packages: usize,
    pub bytes: u64,
    files: usize,
    symlinks: usize,
    dirs: usize,
}

impl Installed {
    pub fn of(fixture: &Fixture, r: &Composed) -> Result<Installed> {
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

/// Packages whose version differs between two builds, and the size of their
/// RPMs in the second build's snapshot.
pub fn changed_packages(
    fixture: &Fixture,
    a: &Composed,
    b: &Composed,
) -> Result<(Vec<String>, u64)> {
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
