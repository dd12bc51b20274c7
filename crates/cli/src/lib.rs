//! strata's command line: clap types, validation and dispatch.
//!
//! Parsing produces plain values ([`Cli`]) that tests compare with `==`;
//! each command converts them into its library's options before any work
//! starts. Results go to stdout (one JSON object with `--json`), logs and
//! progress to stderr. This crate holds no build logic of its own.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

mod build;
mod compose;
mod demo;
mod derive;
mod disk;
mod image;
mod progress;
mod transport;

pub mod docs;

pub use build::BuildArgs;
pub use compose::ComposeArgs;
pub use demo::{DemoArgs, FixtureArgs};
pub use derive::{DeriveArgs, DeriveWorkerArgs};
pub use disk::{DiskArgs, DiskWorkerArgs, NodeArgs, NodeCommand, NodeRollbackArgs, NodeUpdateArgs};
pub use image::{DiffArgs, ImageOptions, InspectArgs, PushArgs};
pub use transport::RegistryArgs;

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
    /// Run a pipeline: compose, derive every release, disks, push, release.json.
    Build(BuildArgs),
    /// Build bootable disk images (qcow2, raw, 4K raw) of an image.
    Disk(DiskArgs),
    /// Update or roll back a node's disk image offline, as the node would.
    Node(NodeArgs),
    /// Show an image: labels, version, layers with sizes and components, packages.
    Inspect(InspectArgs),
    /// Compare two images: packages added, removed, changed; layers shared; download size.
    Diff(DiffArgs),
    /// Push an image to a registry (docker://HOST/NAME:TAG) with skopeo.
    Push(PushArgs),
    /// Internal: the worker process of `derive` (one release's install).
    #[command(name = "__derive-worker", hide = true)]
    DeriveWorker(DeriveWorkerArgs),
    /// Internal: the worker process of `disk` (the namespaced deployment).
    #[command(name = "__disk-worker", hide = true)]
    DiskWorker(DiskWorkerArgs),
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
/// A command line that parses but asks for something that cannot be:
/// reported like clap's own usage errors, with exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `--var KEY=VALUE`, checked as the manifest's variables are.
pub(crate) fn parse_var(arg: &str) -> Result<String, String> {
    strata_manifest::Vars::from_assignments([arg])
        .map(|_| arg.to_string())
        .map_err(|e| e.to_string())
}

/// The whole of `strata`: runs the command line and reports a failure as
/// one `error:` line on stderr, and, when `--json` was asked for, as one
/// JSON object `{"error", "kind"}` on stdout too. Exit status 0, 1
/// (failure) or 2 (usage).
pub fn main(args: Vec<OsString>) -> ExitCode {
    let json = args.iter().skip(1).any(|a| a == "--json");
    let (message, kind, code) = match run(args) {
        Ok(code) => return code,
        Err(err) => match err.downcast_ref::<clap::Error>() {
            Some(e) if json => {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                (first.trim_start_matches("error: ").to_string(), "usage", 2)
            }
            Some(e) => {
                let _ = e.print();
                return ExitCode::from(2);
            }
            None if err.is::<UsageError>() => (format!("{err:#}"), "usage", 2),
            None => (format!("{err:#}"), "failure", 1),
        },
    };
    eprintln!("error: {message}");
    if json {
        println!("{}", serde_json::json!({"error": message, "kind": kind}));
    }
    ExitCode::from(code)
}

pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<ExitCode> {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => return Err(e.into()),
        Err(e) => {
            let _ = e.print();
            return Ok(ExitCode::SUCCESS);
        }
    };
    match cli.command {
        Command::Fixture(args) => demo::fixture(args),
        Command::Demo(args) => demo::run(args),
        Command::Compose(args) => compose::run(args),
        Command::Derive(args) => derive::run(args),
        Command::Build(args) => build::run(args),
        Command::Disk(args) => disk::run(args),
        Command::DiskWorker(args) => Ok(disk::worker_main(args)),
        Command::Node(args) => disk::node(args),
        Command::Inspect(args) => image::inspect(args),
        Command::Diff(args) => image::diff(args),
        Command::Push(args) => image::push(args),
        Command::DeriveWorker(args) => Ok(strata_derive::worker::main(
            [args.job, args.outcome].into_iter().map(OsString::from),
        )),
    }
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
                    flavour: strata_testdistro::Flavour::Rhel86,
                    json: false
                })
            }
        );
        let cli =
            Cli::try_parse_from(["strata", "fixture", "--out", "f", "--flavour", "c9s"]).unwrap();
        let Command::Fixture(args) = cli.command else {
            panic!("not the fixture command")
        };
        assert_eq!(args.flavour, strata_testdistro::Flavour::C9s);
        let e = Cli::try_parse_from(["strata", "fixture", "--out", "f", "--flavour", "rhel-9"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown flavour (known: rhel-8.6, rhel-9.6, c9s)"),
            "{e}"
        );
    }
}
