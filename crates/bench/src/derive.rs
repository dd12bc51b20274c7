//! derive (issue 5), side by side with what it replaces:
//!
//! - (a) the CI kubelet rebuild: `derive --override-rpm` of OCP 4.13 on an
//!   existing base, against a full compose of the same content (base +
//!   release packages in one manifest, as a monolithic build would do);
//! - (b) derive of OCP 4.13 on a small base (`--scale 60`) against the same
//!   derive on a 5x larger one (`--scale 300`): cost should follow the
//!   layered packages, not the base;
//! - (c) derive against `umoci unpack` + `dnf --installroot` + `umoci
//!   repack` of the same base image and release packages.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{ensure, Context, Result};
use strata_testdistro::spec::{FileSpec, PkgSpec};
use strata_testdistro::Fixture;
use strata_workdir::record::nevra_name;

use crate::{median, mib, ratio, row, scale_manifest, secs, timed};

/// The hidden subcommand this binary serves as derive's worker.
const WORKER: &str = "__derive-worker";

/// When started as derive's worker, serves the job and returns its exit code.
pub fn serve_worker() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != WORKER {
        return None;
    }
    Some(strata_derive::worker::main(args))
}

fn worker() -> Result<strata_derive::Worker> {
    let exe = std::env::current_exe().context("finding the bench executable")?;
    Ok(strata_derive::Worker::new(exe).arg(WORKER))
}

fn demo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../manifests/demo")
        .join(name)
}

fn vars(fixture: &Fixture) -> Result<strata_manifest::Vars> {
    Ok(strata_manifest::Vars::from_assignments([format!(
        "fixture={}",
        fixture.root.display()
    )])?)
}

/// A base composed from `fixture`'s scale manifest, in its own workdir.
struct Base {
    workdir: PathBuf,
    tag: String,
    size: u64,
}

fn compose_base(fixture: &Fixture, dir: &Path) -> Result<Base> {
    std::fs::create_dir_all(dir)?;
    let manifest = scale_manifest(fixture, dir)?;
    let workdir = dir.join("work");
    let r = strata_compose::compose(
        &strata_compose::ComposeOptions::new(&manifest, &workdir, crate::installer()?)
            .vars(vars(fixture)?),
    )?;
    let tag = r.image.rsplit(':').next().unwrap_or_default().to_string();
    let info = strata_oscontainer::inspect(
        &strata_oscontainer::ImageRef::parse(&r.image, None)?,
        &Default::default(),
    )?;
    Ok(Base {
        workdir,
        tag,
        size: info.total_size,
    })
}

fn derive(
    fixture: &Fixture,
    base: &Base,
    overrides: &[PathBuf],
) -> Result<strata_derive::DeriveResult> {
    let mut r = strata_derive::derive(
        &strata_derive::DeriveOptions::new(
            &base.workdir,
            base.tag.as_str(),
            vec![demo("ocp-4.13.yaml")],
            worker()?,
        )
        .vars(vars(fixture)?)
        .overrides(overrides.to_vec()),
    )?;
    r.pop().context("derive returned no release")
}

/// Runs the derive benchmarks: `large` is the `--scale 300` fixture the
/// other benchmarks use; a `--scale 60` one is generated next to it.
pub fn bench(large: &Fixture, target: &Path, dir: &Path) -> Result<()> {
    let small = Fixture::generate(
        &target.join("strata-bench-fixture-60"),
        &strata_testdistro::Options::default().scale(60),
    )?;
    eprintln!("bench: derive on a small and a 5x larger base");
    let small_base = compose_base(&small, &dir.join("derive-small"))?;
    let large_base = compose_base(large, &dir.join("derive-large"))?;
    let (t_small, _) = timed(|| derive(&small, &small_base, &[]))?;
    let (t_large, first) = timed(|| derive(large, &large_base, &[]))?;
    ensure!(first.changed, "the first derive did nothing");

    // Both sides take well under ten seconds and vary by 10-20 % from run
    // to run on a shared machine: each is run ROUNDS times, interleaved
    // (one CI merge after another: a new kubelet build each time; a fresh
    // workdir for each compose), and the medians are compared.
    eprintln!("bench: kubelet override rebuild against a full compose, {ROUNDS} rounds");
    let full = full_manifest(large, dir)?;
    let (mut t_overrides, mut t_fulls) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let kubelet = rebuilt_kubelet(dir, round)?;
        let (t, rebuilt) = timed(|| derive(large, &large_base, std::slice::from_ref(&kubelet)))?;
        ensure!(
            rebuilt.changed && rebuilt.overrides.len() == 1,
            "the override derive did not rebuild"
        );
        t_overrides.push(t);
        let workdir = dir.join(format!("derive-full-{round}"));
        let (t, _) = timed(|| {
            strata_compose::compose(
                &strata_compose::ComposeOptions::new(&full, &workdir, crate::installer()?)
                    .vars(vars(large)?),
            )
        })?;
        t_fulls.push(t);
        std::fs::remove_dir_all(&workdir)?;
    }
    let (t_override, t_full) = (median(t_overrides), median(t_fulls));

    eprintln!("bench: umoci unpack + dnf --installroot + umoci repack");
    let (t_umoci, ()) = timed(|| umoci_baseline(large, &large_base, dir, &first.packages))?;

    println!();
    println!(
        "derive of OpenShift 4.13 ({} packages):",
        first.packages.len()
    );
    row(
        &format!("on a --scale 60 base ({:.0} MiB)", mib(small_base.size)),
        secs(t_small),
        "s",
    );
    row(
        &format!("on a --scale 300 base ({:.0} MiB)", mib(large_base.size)),
        secs(t_large),
        "s",
    );
    ratio(
        &format!(
            "larger base / smaller base ({:.1}x the bytes; target: at most 1.3x)",
            large_base.size as f64 / small_base.size.max(1) as f64
        ),
        secs(t_large) / secs(t_small),
    );
    row(
        &format!("kubelet --override-rpm rebuild (median of {ROUNDS})"),
        secs(t_override),
        "s",
    );
    row(
        &format!("full compose of base + release packages (median of {ROUNDS})"),
        secs(t_full),
        "s",
    );
    ratio(
        "override rebuild / full compose (target: under 0.1)",
        secs(t_override) / secs(t_full),
    );
    row(
        "umoci unpack + dnf --installroot + umoci repack",
        secs(t_umoci),
        "s",
    );
    ratio(
        "baseline / strata derive (above 1: strata faster)",
        secs(t_umoci) / secs(t_large),
    );
    Ok(())
}

/// Rounds of the override rebuild against the full compose.
const ROUNDS: u32 = 3;

/// openshift-kubelet as a CI job rebuilds it: unsigned, a new release
/// (`n`: which merge).
fn rebuilt_kubelet(dir: &Path, n: u32) -> Result<PathBuf> {
    let release = format!("202612011200.p{n}.ci.el8");
    let mut p = PkgSpec::new("openshift-kubelet", "4.13.0", &release)
        .requires(&["cri-o", "cri-tools", "util-linux"])
        .files([
            FileSpec::file("/usr/bin/kubelet", vec![0x5a; 6_000_000], 0o755),
            FileSpec::dir("/etc/kubernetes", 0o755),
        ]);
    p.build_time = 1_764_590_400;
    let path = dir.join(p.file_name());
    p.build(None, &path)?;
    Ok(path)
}

/// The scale base manifest plus the 4.13 repo and node packages: what a
/// monolithic build composes for the same content.
fn full_manifest(fixture: &Fixture, dir: &Path) -> Result<PathBuf> {
    let base = dir.join("derive-large/scale.yaml");
    let text = format!(
        "edition: 1\ninclude: {base}\nrepos:\n  - id: rhocp-4.13-for-rhel-8\n    baseurl: file://{root}/rhocp-4.13-for-rhel-8\n    gpgkey: file://{root}/{key}\ninputs:\n  repos: [rhocp-4.13-for-rhel-8]\npackages:\n  - cri-o cri-tools openshift-kubelet openvswitch conmon-rs NetworkManager-ovs\n",
        base = base.display(),
        root = fixture.root.display(),
        key = fixture.info.release_key.path,
    );
    let path = dir.join("full.yaml");
    std::fs::write(&path, text)?;
    Ok(path)
}

/// What one would script without strata: unpack the base image, install the
/// release packages into it with dnf, repack the result as a new layer.
fn umoci_baseline(fixture: &Fixture, base: &Base, dir: &Path, packages: &[String]) -> Result<()> {
    strata_process::require("umoci")?;
    let layout = dir.join("umoci-oci");
    strata_oscontainer::pull(
        &strata_oscontainer::ImageRef::oci(&base.workdir.join("oci"), &base.tag),
        &layout,
        "base",
        &Default::default(),
    )?;
    let bundle = dir.join("umoci-bundle");
    let image = |tag: &str| format!("{}:{tag}", layout.display());
    strata_process::run(
        Command::new("umoci")
            .args(["unpack", "--image"])
            .arg(image("base"))
            .arg(&bundle),
    )?;
    let root = bundle.join("rootfs");
    // The base keeps its rpmdb in /usr and /etc in /usr/etc: point the
    // usual paths there so that dnf sees the installed set (Debian's rpm
    // looks in ~/.rpmdb; /root is var/roothome in the image).
    std::fs::create_dir_all(root.join("var/lib"))?;
    std::os::unix::fs::symlink("../../usr/share/rpm", root.join("var/lib/rpm"))?;
    let (home, rpmdb) = if root.join("root").is_symlink() {
        (root.join("var/roothome"), "../../usr/share/rpm")
    } else {
        (root.join("root"), "../usr/share/rpm")
    };
    std::fs::create_dir_all(&home)?;
    std::os::unix::fs::symlink(rpmdb, home.join(".rpmdb"))?;
    if !root.join("etc").exists() {
        std::os::unix::fs::symlink("usr/etc", root.join("etc"))?;
    }
    // A RHEL 8 base keeps a Berkeley DB rpmdb, which the host's rpm only
    // reads: rebuild it as sqlite first, as one would by hand.
    strata_process::run(
        Command::new("rpmdb")
            .arg(format!("--dbpath={}", root.join("usr/share/rpm").display()))
            .args(["--define", "_db_backend sqlite", "--rebuilddb"]),
    )?;
    let reposdir = dir.join("umoci-repos.d");
    std::fs::create_dir_all(&reposdir)?;
    for file in ["rhel-8.6-20261101.repo", "rhocp-4.13.repo"] {
        std::fs::copy(fixture.path(&format!("repos/{file}")), reposdir.join(file))?;
    }
    let names: Vec<String> = packages
        .iter()
        .map(|nevra| nevra_name(nevra).to_string())
        .collect();
    strata_process::run(
        Command::new("dnf")
            .args(["-y", "-q"])
            .arg(format!("--installroot={}", root.display()))
            .arg(format!("--setopt=reposdir={}", reposdir.display()))
            .arg(format!(
                "--setopt=cachedir={}",
                dir.join("umoci-cache").display()
            ))
            .args([
                "--releasever=8",
                "--setopt=install_weak_deps=False",
                "install",
            ])
            .args(&names),
    )?;
    strata_process::run(
        Command::new("umoci")
            .args(["repack", "--image"])
            .arg(image("node"))
            .arg(&bundle),
    )?;
    Ok(())
}
