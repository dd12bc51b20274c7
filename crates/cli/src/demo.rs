//! `strata demo` and `strata fixture`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct DemoArgs {
    /// Working directory: fixture, repositories, images, builds.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct FixtureArgs {
    /// Directory to generate into (reused when already current).
    #[arg(long)]
    pub out: PathBuf,
    /// Add N synthetic packages with a realistic size spread (benchmarks).
    #[arg(long, default_value_t = 0)]
    pub scale: usize,
    /// Print one JSON object describing the fixture on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn fixture(args: FixtureArgs) -> Result<ExitCode> {
    let opts = strata_testdistro::Options::default().scale(args.scale);
    let fixture = strata_testdistro::Fixture::generate(&args.out, &opts)?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "root": fixture.root,
                "release_key": fixture.info.release_key.fingerprint,
                "epel_key": fixture.info.epel_key.fingerprint,
                "repos": fixture.info.repos.iter().map(|r| serde_json::json!({
                    "id": r.id, "dir": r.dir, "snapshot": r.snapshot, "packages": r.packages.len(),
                })).collect::<Vec<_>>(),
            })
        );
    } else {
        println!("fixture distribution at {}", fixture.root.display());
        for r in &fixture.info.repos {
            println!("  {:<28} {:>3} packages  {}", r.id, r.packages.len(), r.dir);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The demo manifests, embedded so that `strata demo` runs from anywhere.
const DEMO_MANIFESTS: &[(&str, &str)] = &[
    (
        "rhel-8.6.yaml",
        include_str!("../../../manifests/demo/rhel-8.6.yaml"),
    ),
    (
        "rhel-8.6-repos.yaml",
        include_str!("../../../manifests/demo/rhel-8.6-repos.yaml"),
    ),
    (
        "ocp-4.12.yaml",
        include_str!("../../../manifests/demo/ocp-4.12.yaml"),
    ),
    (
        "ocp-4.13.yaml",
        include_str!("../../../manifests/demo/ocp-4.13.yaml"),
    ),
];

pub(crate) fn run(args: DemoArgs) -> Result<ExitCode> {
    let fixture = strata_testdistro::Fixture::generate(
        &args.workdir.join("fixture"),
        &strata_testdistro::Options::default(),
    )?;
    let manifests = args.workdir.join("manifests/demo");
    std::fs::create_dir_all(&manifests)
        .with_context(|| format!("creating {}", manifests.display()))?;
    for (name, text) in DEMO_MANIFESTS {
        std::fs::write(manifests.join(name), text)
            .with_context(|| format!("writing {}", manifests.join(name).display()))?;
    }
    let vars =
        strata_manifest::Vars::from_assignments([format!("fixture={}", fixture.root.display())])?;
    let base = strata_compose::compose(
        &strata_compose::ComposeOptions::new(manifests.join("rhel-8.6.yaml"), &args.workdir)
            .vars(vars.clone()),
    )?;
    let releases = strata_derive::derive(
        &strata_derive::DeriveOptions::new(
            &args.workdir,
            &base.image,
            vec![
                manifests.join("ocp-4.12.yaml"),
                manifests.join("ocp-4.13.yaml"),
            ],
            crate::derive::worker()?,
        )
        .vars(vars),
    )?;

    let count: usize = fixture.info.repos.iter().map(|r| r.packages.len()).sum();
    println!("strata demo: {}", args.workdir.display());
    println!(
        "  fixture distribution  {} ({} repos, {count} packages)",
        fixture.root.display(),
        fixture.info.repos.len()
    );
    println!(
        "  base image            {} {}{}",
        base.stream,
        base.version,
        if base.changed {
            ""
        } else {
            " (unchanged, not rebuilt)"
        }
    );
    println!("    image               {}", base.image);
    println!("    digest              {}", base.digest);
    println!("    ostree commit       {}", base.ostree_commit);
    println!(
        "    packages            {} (lockfile {})",
        base.packages,
        base.lockfile.display()
    );
    for r in &releases {
        println!(
            "  OpenShift {:<13} {}{}",
            r.release,
            r.version,
            if r.changed {
                ""
            } else {
                " (unchanged, not rebuilt)"
            }
        );
        println!("    image               {}", r.image);
        println!("    digest              {}", r.digest);
        println!(
            "    ostree commit       {} (parent: the base commit)",
            r.ostree_commit
        );
        println!("    release packages    {}", r.packages.len());
    }
    println!("  disk images land with their issue");
    Ok(ExitCode::SUCCESS)
}
