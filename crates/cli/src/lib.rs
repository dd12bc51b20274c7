//! strata's command line: clap types, validation and dispatch.
//!
//! Parsing produces plain values ([`Cli`]) that tests compare with `==`;
//! each command converts them into its library's options before any work
//! starts. Results go to stdout (one JSON object with `--json`), logs and
//! progress to stderr. This crate holds no build logic of its own.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// Builds Red Hat CoreOS-style operating systems in layers.
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(name = "strata", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand, PartialEq, Eq)]
pub enum Command {
    /// Generate the fixture RPM distribution (offline, signed, bootable).
    Fixture(FixtureArgs),
    /// Run the whole pipeline on the fixture distribution (the embedded default).
    Demo(DemoArgs),
    /// Compose the base image of a base manifest from RHEL-only inputs.
    Compose(ComposeArgs),
    /// Derive one image per OpenShift release manifest from a base image.
    Derive(DeriveArgs),
    /// Internal: the worker process of `derive` (one release's install).
    #[command(name = "__derive-worker", hide = true)]
    DeriveWorker(DeriveWorkerArgs),
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct DeriveArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// The base image: a tag in the workdir, oci:DIR:TAG or docker://HOST/NAME:TAG.
    #[arg(long)]
    pub base: String,
    /// Release manifests (YAML); one derived image each.
    #[arg(required = true)]
    pub manifests: Vec<PathBuf>,
    /// Use this locally built RPM instead of the repos' package of the same
    /// name (repeatable; bypasses the signature rule, recorded in the image).
    #[arg(long = "override-rpm", value_name = "RPM")]
    pub override_rpms: Vec<PathBuf>,
    /// Set a manifest variable: `${KEY}` in the manifest becomes VALUE.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct DeriveWorkerArgs {
    pub job: PathBuf,
    pub outcome: PathBuf,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct ComposeArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// The base manifest (YAML).
    pub manifest: PathBuf,
    /// Compose exactly the packages of this lockfile.
    #[arg(long)]
    pub lockfile: Option<PathBuf>,
    /// Set a manifest variable: `${KEY}` in the manifest becomes VALUE.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

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

/// Logs to stderr, filtered by `RUST_LOG` (default: info).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

/// Parses `args` and runs the command. Usage errors exit 2 (clap's own).
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<ExitCode> {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return Ok(ExitCode::from(if e.use_stderr() { 2 } else { 0 }));
        }
    };
    match cli.command {
        Command::Fixture(args) => fixture(args),
        Command::Demo(args) => demo(args),
        Command::Compose(args) => compose(args),
        Command::Derive(args) => derive(args),
        Command::DeriveWorker(args) => Ok(strata_derive::worker::main(
            [args.job, args.outcome].into_iter().map(OsString::from),
        )),
    }
}

fn fixture(args: FixtureArgs) -> Result<ExitCode> {
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

fn compose(args: ComposeArgs) -> Result<ExitCode> {
    let vars = strata_manifest::Vars::from_assignments(args.vars.iter().map(String::as_str))?;
    let opts = strata_compose::ComposeOptions::new(&args.manifest, &args.workdir)
        .vars(vars)
        .lockfile(args.lockfile.clone());
    let result = strata_compose::compose(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string(&compose_json(&result))?);
    } else if result.changed {
        println!(
            "composed {} {} ({} packages)",
            result.stream, result.version, result.packages
        );
        println!(
            "  ostree commit {} ({})",
            result.ostree_commit, result.ostree_ref
        );
        println!("  lockfile {}", result.lockfile.display());
    } else {
        println!(
            "{} {} is current: inputs unchanged, nothing rebuilt",
            result.stream, result.version
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn compose_json(r: &strata_compose::ComposeResult) -> serde_json::Value {
    serde_json::json!({
        "image": r.image,
        "digest": r.digest,
        "changed": r.changed,
        "stream": r.stream,
        "version": r.version,
        "ostree_commit": r.ostree_commit,
        "ostree_ref": r.ostree_ref,
        "inputhash": r.inputhash,
        "lockfile": r.lockfile,
        "build_dir": r.build_dir,
        "packages": r.packages,
    })
}

/// How derive starts its workers: this very binary, hidden subcommand.
fn derive_worker() -> Result<strata_derive::WorkerCommand> {
    let exe = std::env::current_exe().context("finding the strata executable")?;
    Ok(strata_derive::WorkerCommand::new(exe).arg("__derive-worker"))
}

fn derive(args: DeriveArgs) -> Result<ExitCode> {
    let vars = strata_manifest::Vars::from_assignments(args.vars.iter().map(String::as_str))?;
    let opts = strata_derive::DeriveOptions::new(
        &args.workdir,
        &args.base,
        args.manifests.clone(),
        derive_worker()?,
    )
    .vars(vars)
    .overrides(args.override_rpms.clone());
    let results = strata_derive::derive(&opts)?;
    if args.json {
        let releases: Vec<serde_json::Value> = results.iter().map(derive_json).collect();
        let mut out = match releases.as_slice() {
            [one] => one.clone(),
            _ => serde_json::json!({}),
        };
        out["releases"] = serde_json::Value::Array(releases);
        out["changed"] = serde_json::Value::Bool(results.iter().any(|r| r.changed));
        println!("{}", serde_json::to_string(&out)?);
    } else {
        for r in &results {
            if r.changed {
                println!(
                    "derived OpenShift {} {} ({} packages on base {})",
                    r.release,
                    r.version,
                    r.packages.len(),
                    r.base_digest
                );
                println!("  image {} ({})", r.image, r.digest);
                println!("  ostree commit {} ({})", r.ostree_commit, r.ostree_ref);
            } else {
                println!(
                    "OpenShift {} {} is current: inputs unchanged, nothing rebuilt",
                    r.release, r.version
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn derive_json(r: &strata_derive::DeriveResult) -> serde_json::Value {
    serde_json::json!({
        "image": r.image,
        "digest": r.digest,
        "changed": r.changed,
        "release": r.release,
        "stream": r.stream,
        "version": r.version,
        "ostree_commit": r.ostree_commit,
        "ostree_ref": r.ostree_ref,
        "inputhash": r.inputhash,
        "base_image": r.base_image,
        "base_digest": r.base_digest,
        "base_commit": r.base_commit,
        "packages": r.packages,
        "overrides": r.overrides,
        "build_dir": r.build_dir,
    })
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

fn demo(args: DemoArgs) -> Result<ExitCode> {
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
            derive_worker()?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_args_parse() {
        let cli =
            Cli::try_parse_from(["strata", "fixture", "--out", "/tmp/f", "--scale", "3"]).unwrap();
        assert_eq!(
            cli,
            Cli {
                command: Command::Fixture(FixtureArgs {
                    out: "/tmp/f".into(),
                    scale: 3,
                    json: false
                })
            }
        );
    }
}
