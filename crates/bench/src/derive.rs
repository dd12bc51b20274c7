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
use std::process::Command;
use std::time::Instant;

use anyhow::{ensure, Result};
use strata_testdistro::spec::{FileSpec, PkgSpec};
use strata_testdistro::Fixture;
use strata_workdir::record::nevra_name;

use crate::bench::Bench;
use crate::fixture::scale_manifest;
use crate::measure::{self, Composed, Run};
use crate::table::{first_line, Goal, Line};

fn demo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../manifests/demo")
        .join(name)
}

fn vars(fixture: &Fixture) -> Vec<String> {
    vec![format!("fixture={}", fixture.root.display())]
}

/// A composed base in its workdir.
pub struct Base<'a> {
    pub workdir: &'a Path,
    pub tag: String,
    /// The image's compressed size.
    pub size: u64,
    /// Its scale manifest.
    pub manifest: &'a Path,
}

impl Base<'_> {
    pub fn new<'a>(workdir: &'a Path, image: &str, manifest: &'a Path) -> Result<Base<'a>> {
        let tag = image.rsplit(':').next().unwrap_or_default().to_string();
        let info = strata_oscontainer::inspect(
            &strata_oscontainer::ImageRef::parse(image, None)?,
            &Default::default(),
        )?;
        Ok(Base {
            workdir,
            tag,
            size: info.total_size,
            manifest,
        })
    }
}

fn derive(
    fixture: &Fixture,
    base: &Base,
    overrides: &[PathBuf],
) -> Result<(Run, measure::Derived)> {
    measure::derive(
        base.workdir,
        &base.tag,
        &demo("ocp-4.13.yaml"),
        &vars(fixture),
        overrides,
    )
}

/// Runs the derive benchmarks on `large` (the fixture the other
/// benchmarks use, composed as `large_base`) and on a `--scale 60`
/// fixture generated next to it; `rounds` of the override rebuild against
/// the full compose. Returns the table's lines.
pub fn bench(
    large: &Fixture,
    large_base: &Base,
    target: &Path,
    dir: &Path,
    rounds: u32,
) -> Result<Vec<Line>> {
    let small = Fixture::generate(
        &target.join("strata-bench-fixture-60"),
        &strata_testdistro::Options::default().scale(60),
    )?;
    eprintln!("bench: derive on a small and a larger base");
    let small_dir = dir.join("derive-small");
    std::fs::create_dir_all(&small_dir)?;
    let small_manifest = scale_manifest(&small, &small_dir, false)?;
    let small_workdir = small_dir.join("work");
    let (_, composed) = measure::compose(&small_workdir, &small_manifest, &vars(&small))?;
    let small_base = Base::new(&small_workdir, &composed.image, &small_manifest)?;
    let (t_small, _) = derive(&small, &small_base, &[])?;
    let (t_large, first) = derive(large, large_base, &[])?;
    ensure!(first.changed, "the first derive did nothing");
    crate::scratch::set_aside(&small_dir)?;

    let mut lines = Vec::new();
    lines.push(
        override_against_full(large, large_base, dir, rounds).unwrap_or_else(|e| {
            eprintln!("bench: the override rebuild against a full compose failed: {e:#}");
            Line::failed(
                "kubelet override rebuild / full compose",
                format!("failed: {}", first_line(&format!("{e:#}"))),
                Goal::AtMost(0.05),
            )
        }),
    );

    eprintln!("bench: umoci unpack + dnf --installroot + umoci repack");
    lines.push(
        match umoci_baseline(large, large_base, dir, &first.packages) {
            Ok(t_umoci) => Line::faster(
                "derive 4.13 vs umoci unpack + dnf + umoci repack",
                &t_large,
                &t_umoci,
                Goal::None,
            ),
            Err(e) => {
                eprintln!("bench: the umoci baseline failed: {e:#}");
                Line::failed(
                    "derive 4.13 vs umoci unpack + dnf + umoci repack",
                    format!("failed: {}", first_line(&format!("{e:#}"))),
                    Goal::None,
                )
            }
        },
    );
    let mut size_line = Line::share(
        format!(
            "derive 4.13: larger base / smaller base ({:.0} / {:.0} MiB)",
            large_base.size as f64 / 1_048_576.0,
            small_base.size as f64 / 1_048_576.0
        ),
        &t_large,
        &t_small,
        Goal::None,
    );
    size_line.ratio_of = "large/small";
    lines.push(size_line);
    Ok(lines)
}

/// The CI kubelet rebuild against a full compose of the same content.
/// Both sides vary by 10-20 % from run to run on a shared machine: each is
/// run `rounds` times, interleaved (one CI merge after another: a new
/// kubelet build each time; a fresh workdir for each compose), and the
/// medians are compared.
fn override_against_full(
    large: &Fixture,
    large_base: &Base,
    dir: &Path,
    rounds: u32,
) -> Result<Line> {
    eprintln!("bench: kubelet override rebuild against a full compose, {rounds} rounds");
    let full = full_manifest(large, large_base.manifest, dir)?;
    let (mut t_overrides, mut t_fulls) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let kubelet = rebuilt_kubelet(dir, round)?;
        let (t, rebuilt) = derive(large, large_base, std::slice::from_ref(&kubelet))?;
        ensure!(
            rebuilt.changed && rebuilt.overrides.len() == 1,
            "the override derive did not rebuild"
        );
        t_overrides.push(t);
        let workdir = dir.join(format!("derive-full-{round}"));
        let full_compose = measure::compose(&workdir, &full, &vars(large));
        if workdir.exists() {
            crate::scratch::set_aside(&workdir)?;
        }
        t_fulls.push(full_compose?.0);
    }
    Ok(Line::share(
        format!("kubelet override rebuild / full compose (median of {rounds})"),
        &measure::median(t_overrides),
        &measure::median(t_fulls),
        Goal::AtMost(0.05),
    ))
}

/// openshift-kubelet as a CI job rebuilds it: unsigned, a new release
/// (`n`: which merge), a new binary, and the files of the same spec as the
/// repository's build (a CI build does not change the package's file
/// list; one that did would rightly make the initramfs again, whose cache
/// checks every path name of the tree).
fn rebuilt_kubelet(dir: &Path, n: u32) -> Result<PathBuf> {
    let release = format!("202612011200.p{n}.ci.el8");
    let unit = "[Unit]\nDescription=Kubernetes Kubelet\n\n[Service]\nExecStart=/usr/bin/kubelet\n\n[Install]\nWantedBy=multi-user.target\n";
    let mut p = PkgSpec::new("openshift-kubelet", "4.13.0", &release)
        .requires(&["cri-o", "cri-tools", "util-linux"])
        .files([
            FileSpec::file(
                "/usr/bin/kubelet",
                vec![0x5a ^ (n % 256) as u8; 6_000_000],
                0o755,
            ),
            FileSpec::file(
                "/usr/lib/systemd/system/kubelet.service",
                unit.as_bytes().to_vec(),
                0o644,
            ),
            FileSpec::dir("/etc/kubernetes", 0o755),
            FileSpec::dir("/etc/kubernetes/manifests", 0o755),
        ]);
    p.build_time = 1_764_590_400;
    let path = dir.join(p.file_name());
    p.build(None, &path)?;
    Ok(path)
}

/// The scale base manifest plus the 4.13 repo and node packages: what a
/// monolithic build composes for the same content.
fn full_manifest(fixture: &Fixture, base: &Path, dir: &Path) -> Result<PathBuf> {
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
fn umoci_baseline(fixture: &Fixture, base: &Base, dir: &Path, packages: &[String]) -> Result<Run> {
    strata_process::require("umoci")?;
    let layout = dir.join("umoci-oci");
    let start = Instant::now();
    strata_oscontainer::pull(
        &strata_oscontainer::ImageRef::oci(&base.workdir.join("oci"), &base.tag),
        &layout,
        "base",
        &Default::default(),
    )?;
    let mut total = Run {
        wall: start.elapsed(),
        rss: 0,
    };
    let bundle = dir.join("umoci-bundle");
    let image = |tag: &str| format!("{}:{tag}", layout.display());
    total = total.then(
        measure::run(
            Command::new("umoci")
                .args(["unpack", "--image"])
                .arg(image("base"))
                .arg(&bundle),
        )?
        .0,
    );
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
    total = total.then(
        measure::run(
            Command::new("rpmdb")
                .arg(format!("--dbpath={}", root.join("usr/share/rpm").display()))
                .args(["--define", "_db_backend sqlite", "--rebuilddb"]),
        )?
        .0,
    );
    let reposdir = dir.join("umoci-repos.d");
    std::fs::create_dir_all(&reposdir)?;
    for file in ["rhel-8.6-20261101.repo", "rhocp-4.13.repo"] {
        std::fs::copy(fixture.path(&format!("repos/{file}")), reposdir.join(file))?;
    }
    let names: Vec<String> = packages
        .iter()
        .map(|nevra| nevra_name(nevra).to_string())
        .collect();
    total = total.then(
        measure::run(
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
        )?
        .0,
    );
    total = total.then(
        measure::run(
            Command::new("umoci")
                .args(["repack", "--image"])
                .arg(image("node"))
                .arg(&bundle),
        )?
        .0,
    );
    crate::scratch::set_aside(&bundle)?;
    crate::scratch::set_aside(&layout)?;
    Ok(total)
}

impl Bench<'_> {
    /// The derive lines on the first build's image (see [`bench`]).
    pub fn derive(&mut self, target: &Path, v1: &Composed) -> Result<()> {
        let base = Base::new(&self.workdir, &v1.image, &self.manifest)?;
        let lines = bench(self.fixture, &base, target, self.dir, self.scale.rounds())?;
        self.lines.extend(lines);
        Ok(())
    }
}
