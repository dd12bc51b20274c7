//! `make bench`: strata measured against the baselines users would
//! otherwise run, side by side in one run, printing ratios.
//!
//! compose: the fixture at `--scale 300` (300 synthetic packages, most
//! small, a few tens of MB, on top of the demo base) composed by strata
//! (depsolve, install, initramfs, conventions, commit, chunked image)
//! against Debian's `dnf --installroot` followed by `ostree commit` of the
//! same package set; then strata's no-op rebuild. Times are wall-clock
//! seconds of one run each; the machine is shared, so read ratios, not
//! absolute numbers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

const SCALE: usize = 300;

fn main() -> Result<()> {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let fixture = strata_testdistro::Fixture::generate(
        &target.join("strata-bench-fixture"),
        &strata_testdistro::Options::default().scale(SCALE),
    )?;
    let scratch = tempfile::tempdir_in(&target).context("scratch directory")?;
    let manifest = scale_manifest(&fixture, scratch.path())?;
    let vars =
        strata_manifest::Vars::from_assignments([format!("fixture={}", fixture.root.display())])?;

    println!("compose, fixture at --scale {SCALE}");
    let workdir = scratch.path().join("strata-work");
    let (strata, result) = timed(|| {
        strata_compose::compose(
            &strata_compose::ComposeOptions::new(&manifest, &workdir).vars(vars.clone()),
        )
    })?;
    let packages = result.packages;
    let (baseline, ()) =
        timed(|| dnf_and_ostree_commit(&fixture, scratch.path(), &manifest_packages(&result)?))?;
    let (noop, again) = timed(|| {
        strata_compose::compose(
            &strata_compose::ComposeOptions::new(&manifest, &workdir).vars(vars.clone()),
        )
    })?;
    anyhow::ensure!(!again.changed, "the second compose was not a no-op");

    println!("  {packages} packages");
    println!(
        "  strata compose (to a chunked OCI image)      {:>8.2} s",
        secs(strata)
    );
    println!(
        "  baseline: dnf --installroot + ostree commit  {:>8.2} s",
        secs(baseline)
    );
    println!(
        "  ratio baseline/strata                        {:>8.2}x (above 1: strata is faster)",
        secs(baseline) / secs(strata)
    );
    println!(
        "  strata no-op rebuild                         {:>8.2} s (target: under 2 s)",
        secs(noop)
    );
    Ok(())
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let start = Instant::now();
    let v = f()?;
    Ok((start.elapsed(), v))
}

/// The demo base plus every synthetic package.
fn scale_manifest(fixture: &strata_testdistro::Fixture, dir: &Path) -> Result<PathBuf> {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo/rhel-8.6.yaml");
    let scale = fixture
        .repo("rhel-8.6-scale", None)
        .context("fixture without the scale repo")?;
    let names: Vec<&str> = scale.packages.iter().map(|p| p.name.as_str()).collect();
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

fn manifest_packages(r: &strata_compose::ComposeResult) -> Result<Vec<String>> {
    let lock = strata_compose::Lockfile::load(&r.lockfile)?;
    Ok(lock.packages.keys().cloned().collect())
}

/// What a release engineer would script without strata.
fn dnf_and_ostree_commit(
    fixture: &strata_testdistro::Fixture,
    dir: &Path,
    packages: &[String],
) -> Result<()> {
    let reposdir = dir.join("baseline-repos.d");
    std::fs::create_dir_all(&reposdir)?;
    for file in ["rhel-8.6-20261101.repo", "scale.repo"] {
        std::fs::copy(fixture.path(&format!("repos/{file}")), reposdir.join(file))?;
    }
    let root = dir.join("baseline-root");
    strata_process::run(
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
    let repo = dir.join("baseline-ostree");
    strata_process::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["init", "--mode=bare-user"]),
    )?;
    strata_process::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["commit", "-b", "baseline", "--no-xattrs"])
            .arg(format!("--tree=dir={}", root.display())),
    )?;
    Ok(())
}
