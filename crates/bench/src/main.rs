//! `make bench`: strata measured against the baselines users would
//! otherwise run, side by side in one run, printing ratios.
//!
//! On the fixture at `--scale 300` (300 synthetic packages, most small, a
//! few tens of MB, on top of the demo base), snapshot 20261101:
//!
//! - compose (issue 3): strata's compose up to the ostree commit (depsolve,
//!   install, initramfs, conventions, commit) against Debian's
//!   `dnf --installroot` followed by `ostree commit` of the same package
//!   set; then strata's no-op rebuild.
//! - encapsulation (issue 4): the same commit written as a chunked OCI image
//!   by strata and by ostree-ext 0.15.3's `encapsulate` (the library
//!   rpm-ostree's `compose container-encapsulate` uses), both given the same
//!   package -> content mapping and change frequencies.
//! - update (issue 4): compose of snapshot 20261115 (the z-stream) with the
//!   previous build's layer map; ostree-ext encapsulates the new commit with
//!   the previous manifest as its prior build. For each tool: the bytes a
//!   client holding the first image downloads, against the compressed size
//!   of the changed packages.
//! - derive (issue 5): the kubelet override rebuild against a full compose,
//!   derive on a small and a 5x larger base, and derive against umoci
//!   unpack + dnf --installroot + umoci repack (see `derive.rs`).
//! - disk (issue 6): `strata disk` (metal) of the first commit against a
//!   script doing `ostree admin deploy` (user namespace, tmpfs /boot) +
//!   sfdisk + mkfs on the same commit (see `disk.rs`), and again on the
//!   demo base (no scale packages); time per GB of content on both.
//!
//! `strata-bench derive` and `strata-bench disk` run only that part.
//!
//! compose's wall-clock time includes its own encapsulation; the
//! compose-to-commit time is that minus strata's encapsulation of the same
//! commit measured on its own (the same image: the digests are checked to
//! be equal). Times are wall-clock seconds of one run each; the machine is
//! shared, so read ratios, not absolute numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use strata_testdistro::{Fixture, SNAPSHOTS};

mod derive;
mod disk;

const SCALE: usize = 300;
/// The hidden subcommand this binary serves as compose's installer.
const INSTALL_WORKER: &str = "__install-worker";

/// compose's installer: this binary, [`INSTALL_WORKER`].
fn installer() -> Result<strata_process::worker::Worker> {
    let exe = std::env::current_exe().context("finding the bench executable")?;
    Ok(strata_process::worker::Worker::new(exe).arg(INSTALL_WORKER))
}
/// The stream the demo manifest composes.
const STREAM: &str = "rhel-8.6";

fn main() -> Result<()> {
    if let Some(code) = derive::serve_worker() {
        return if code == std::process::ExitCode::SUCCESS {
            Ok(())
        } else {
            anyhow::bail!("the derive worker failed")
        };
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == INSTALL_WORKER)
    {
        let code = strata_dnf::job::serve_child(std::env::args_os().skip(2));
        return if code == std::process::ExitCode::SUCCESS {
            Ok(())
        } else {
            anyhow::bail!("the install worker failed")
        };
    }
    if let Some(code) = disk::serve_worker() {
        return if code == std::process::ExitCode::SUCCESS {
            Ok(())
        } else {
            anyhow::bail!("the disk deploy worker failed")
        };
    }
    // The stages' own log lines, for finding where a side spends its time.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let fixture = Fixture::generate(
        &target.join("strata-bench-fixture"),
        &strata_testdistro::Options::default().scale(SCALE),
    )?;
    if std::env::args().nth(1).as_deref() == Some("derive") {
        // `strata-bench derive`: only the derive benchmarks.
        let scratch = tempfile::tempdir_in(&target).context("scratch directory")?;
        return derive::bench(&fixture, &target, scratch.path());
    }
    let ostree_ext = strata_testdistro::peers::ostree_ext_client()?;
    let scratch = tempfile::tempdir_in(&target).context("scratch directory")?;
    let dir = scratch.path();
    let manifest = scale_manifest(&fixture, dir)?;
    let workdir = dir.join("strata-work");
    let compose_in = |workdir: &Path, snapshot: &str| {
        eprintln!("bench: strata compose of snapshot {snapshot}");
        let vars = strata_manifest::Vars::from_assignments([
            format!("fixture={}", fixture.root.display()),
            format!("snapshot={snapshot}"),
        ])?;
        strata_compose::compose(
            &strata_compose::ComposeOptions::new(&manifest, workdir, installer()?).vars(vars),
        )
    };
    let compose = |snapshot: &str| compose_in(&workdir, snapshot);
    if std::env::args().nth(1).as_deref() == Some("disk") {
        // `strata-bench disk`: only the disk benchmark, on the first snapshot.
        let v1 = compose(SNAPSHOTS[0])?;
        return disk_bench(&fixture, &workdir, &v1, dir);
    }
    if std::env::args().nth(1).as_deref() == Some("rpmdb") {
        // `strata-bench rpmdb`: only the rpmdb format benchmark.
        let v1 = compose(SNAPSHOTS[0])?;
        return rpmdb_bench(&workdir.join("repo"), &v1, dir);
    }

    // Compose and encapsulation of the first snapshot.
    let (strata_total, v1) = timed(|| compose(SNAPSHOTS[0]))?;
    let repo = workdir.join("repo");
    let content = content_map(&fixture, &repo, &v1.ostree_commit, &workdir, 0, dir)?;
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
    eprintln!("bench: ostree-ext encapsulate");
    let ext_oci = dir.join("ostree-ext-oci");
    let ext_input = OstreeExtInput::write(&repo, &v1.ostree_commit, &content, dir, "v1")?;
    let (ext_enc, ()) = timed(|| {
        ostree_ext_encapsulate(
            ostree_ext,
            &repo,
            &v1.ostree_commit,
            &ext_oci,
            "v1",
            &ext_input,
            None,
        )
    })?;
    eprintln!("bench: baseline dnf --installroot + ostree commit");
    let (baseline, ()) = timed(|| dnf_and_ostree_commit(&fixture, dir, &manifest_packages(&v1)?))?;
    let (noop, again) = timed(|| compose(SNAPSHOTS[0]))?;
    ensure!(!again.changed, "the second compose was not a no-op");

    // The z-stream update.
    let (v2, repo2, image2) = match compose(SNAPSHOTS[1]) {
        Ok(v2) => {
            let image = strata_oscontainer::ImageRef::parse(&v2.image, None)?;
            (v2, repo.clone(), image)
        }
        Err(e) => {
            // A second build in the same workdir seeds the previous
            // build's accounts; the fixture's systemd %pre then fails
            // (`getent ... >/dev/null` without a /dev in the install root).
            // Compose the z-stream in a fresh workdir and give its commit
            // the first build's layer map, as compose would have.
            eprintln!("bench: the z-stream compose failed ({e:#}); composing it in a fresh workdir and encapsulating it with the first build's layer map");
            let v2 = compose_in(&dir.join("strata-work-z"), SNAPSHOTS[1])?;
            let repo2 = dir.join("strata-work-z/repo");
            let prior = strata_oscontainer::LayerMap::from_json(&std::fs::read_to_string(
                v1.build_dir.join("layer-map.json"),
            )?)?;
            let mut o = strata_oscontainer::EncapsulateOptions::default();
            o.content = Some(content_map(
                &fixture,
                &repo2,
                &v2.ostree_commit,
                &workdir,
                1,
                dir,
            )?);
            o.labels = image_labels(&v2.image, &v2.inputhash)?;
            o.source_date_epoch = Some(source_date_epoch(&v2)?);
            o.prior = Some(prior);
            strata_oscontainer::encapsulate(
                &repo2,
                &v2.ostree_commit,
                &workdir.join("oci"),
                "z",
                &o,
            )?;
            (
                v2,
                repo2,
                strata_oscontainer::ImageRef::oci(&workdir.join("oci"), "z"),
            )
        }
    };
    ensure!(v2.changed, "the z-stream compose changed nothing");
    let strata_diff = strata_oscontainer::diff(
        &strata_oscontainer::ImageRef::parse(&v1.image, None)?,
        &image2,
        &strata_oscontainer::TransportOptions::default(),
    )?;
    let content2 = content_map(&fixture, &repo2, &v2.ostree_commit, &workdir, 1, dir)?;
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
        ostree_ext,
        &repo2,
        &v2.ostree_commit,
        &ext_oci,
        "v2",
        &ext_input2,
        Some(&prior),
    )?;
    let ext_diff = strata_oscontainer::diff(
        &strata_oscontainer::ImageRef::oci(&ext_oci, "v1"),
        &strata_oscontainer::ImageRef::oci(&ext_oci, "v2"),
        &strata_oscontainer::TransportOptions::default(),
    )?;
    let (changed_names, changed_bytes) = changed_packages(&fixture, &v1, &v2)?;

    let compose_to_commit = strata_total.saturating_sub(strata_enc);
    println!(
        "compose, fixture at --scale {SCALE} ({} packages)",
        v1.packages
    );
    row(
        "strata compose to the ostree commit",
        secs(compose_to_commit),
        "s",
    );
    row(
        "baseline: dnf --installroot + ostree commit",
        secs(baseline),
        "s",
    );
    ratio(
        "ratio baseline/strata (above 1: strata is faster)",
        secs(baseline) / secs(compose_to_commit),
    );
    row(
        "strata compose to the chunked image, in all",
        secs(strata_total),
        "s",
    );
    row(
        "baseline + ostree-ext encapsulate, in all",
        secs(baseline + ext_enc),
        "s",
    );
    ratio(
        "ratio (baseline + ostree-ext)/strata",
        secs(baseline + ext_enc) / secs(strata_total),
    );
    row("strata no-op rebuild (target: under 2 s)", secs(noop), "s");
    println!();
    println!("encapsulation of that commit, gzip, package chunking");
    row(
        &format!("strata ({} layers)", enc.layers.len()),
        secs(strata_enc),
        "s",
    );
    row(
        "baseline: ostree-ext 0.15.3 encapsulate",
        secs(ext_enc),
        "s",
    );
    ratio(
        "ratio ostree-ext/strata (above 1: strata is faster)",
        secs(ext_enc) / secs(strata_enc),
    );
    println!();
    println!(
        "z-stream update {} -> {}: {} changed packages ({}), {:.2} MiB as RPMs",
        SNAPSHOTS[0],
        SNAPSHOTS[1],
        changed_names.len(),
        changed_names.join(" "),
        mib(changed_bytes)
    );
    for (name, d) in [("strata", &strata_diff), ("ostree-ext 0.15.3", &ext_diff)] {
        println!(
            "  {name:<18} downloads {:>8.2} MiB in {:>2} of {:>2} layers = {:.2}x the changed packages (target: at most 1.5x)",
            mib(d.download_bytes),
            d.layers_added.len(),
            d.layers_added.len() + d.layers_shared.len(),
            d.download_bytes as f64 / changed_bytes as f64
        );
    }
    println!("  strata's changed layers:");
    for l in &strata_diff.layers_added {
        println!("    {:>8.2} MiB  {}", mib(l.size), describe(&l.components));
    }
    rpmdb_bench(&repo, &v1, dir)?;
    disk_bench(&fixture, &workdir, &v1, dir)?;
    derive::bench(&fixture, &target, dir)?;
    Ok(())
}

/// What RHEL 8's rpmdb format costs: the composed commit's Berkeley DB
/// database written again by strata (export with the host's rpm, write
/// with libdb), against the host's rpm importing the same headers into
/// sqlite (`rpmdb --importdb`), the format it writes natively.
fn rpmdb_bench(repo: &Path, v1: &strata_compose::ComposeResult, dir: &Path) -> Result<()> {
    let db = dir.join("rpmdb-bench");
    strata_process::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
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
    let (to_sqlite, ()) = timed(|| Ok(strata_rpmdb::convert(&db, strata_rpmdb::Backend::Sqlite)?))?;
    let (to_bdb, ()) = timed(|| Ok(strata_rpmdb::convert(&db, strata_rpmdb::Backend::Bdb)?))?;
    println!();
    println!("the RHEL 8 rpmdb of that commit ({} packages)", v1.packages);
    row(
        "host rpm: export + import into sqlite",
        secs(to_sqlite),
        "s",
    );
    row(
        "strata: export + Berkeley DB write (19 files)",
        secs(to_bdb),
        "s",
    );
    ratio(
        "ratio bdb/sqlite (what RHEL 8's format costs over rpm's own)",
        secs(to_bdb) / secs(to_sqlite),
    );
    Ok(())
}

/// The disk part: the composed scale commit, and the demo base (the same
/// without the scale packages) as the smaller commit.
fn disk_bench(
    fixture: &Fixture,
    workdir: &Path,
    large: &strata_compose::ComposeResult,
    dir: &Path,
) -> Result<()> {
    eprintln!("bench: strata compose of the demo base (the smaller disk)");
    let small_workdir = dir.join("strata-work-small");
    let vars = strata_manifest::Vars::from_assignments([
        format!("fixture={}", fixture.root.display()),
        format!("snapshot={}", SNAPSHOTS[0]),
    ])?;
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo/rhel-8.6.yaml");
    let small = strata_compose::compose(
        &strata_compose::ComposeOptions::new(demo, &small_workdir, installer()?).vars(vars),
    )?;
    disk::bench(
        &disk::Subject {
            workdir,
            image: &large.image,
            commit: &large.ostree_commit,
        },
        &disk::Subject {
            workdir: &small_workdir,
            image: &small.image,
            commit: &small.ostree_commit,
        },
        dir,
    )
}

fn describe(components: &[String]) -> String {
    match components {
        [] => "(commit layer)".into(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

fn row(what: &str, value: f64, unit: &str) {
    println!("  {what:<52} {value:>8.2} {unit}");
}

fn ratio(what: &str, value: f64) {
    println!("  {what:<52} {value:>8.2}x");
}

/// The middle one of `times` (sides that vary run to run are compared by
/// medians of several rounds).
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let start = Instant::now();
    let v = f()?;
    Ok((start.elapsed(), v))
}

/// The demo base plus every synthetic package.
fn scale_manifest(fixture: &Fixture, dir: &Path) -> Result<PathBuf> {
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

fn source_date_epoch(r: &strata_compose::ComposeResult) -> Result<u64> {
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
) -> Result<()> {
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
    strata_process::run(&mut cmd)?;
    Ok(())
}

/// Packages whose version differs between two builds, and the size of their
/// RPMs in the second build's snapshot.
fn changed_packages(
    fixture: &Fixture,
    a: &strata_compose::ComposeResult,
    b: &strata_compose::ComposeResult,
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

/// What a release engineer would script without strata.
fn dnf_and_ostree_commit(fixture: &Fixture, dir: &Path, packages: &[String]) -> Result<()> {
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
