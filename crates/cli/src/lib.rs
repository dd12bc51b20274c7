//! strata's command line: clap types, validation and dispatch.
//!
//! Parsing produces plain values ([`Cli`]) that tests compare with `==`;
//! each command converts them into its library's options before any work
//! starts. Results go to stdout (one JSON object with `--json`), logs and
//! progress to stderr. This crate holds no build logic of its own.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
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

fn demo(args: DemoArgs) -> Result<ExitCode> {
    let out = args.workdir.join("fixture");
    let fixture =
        strata_testdistro::Fixture::generate(&out, &strata_testdistro::Options::default())?;
    let count: usize = fixture.info.repos.iter().map(|r| r.packages.len()).sum();
    println!("strata demo");
    println!(
        "  fixture distribution: {} ({} repos, {count} packages, release key {})",
        fixture.root.display(),
        fixture.info.repos.len(),
        fixture.info.release_key.fingerprint
    );
    for file in ["rhel-8.6-20261101", "rhocp-4.12", "rhocp-4.13", "epel-8"] {
        println!(
            "  repo file: {}",
            fixture.path(&format!("repos/{file}.repo")).display()
        );
    }
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
