//! strata's command line: clap types, validation and dispatch.
//!
//! Parsing produces plain values ([`Cli`]) that tests compare with `==`;
//! each command converts them into its library's options before any work
//! starts. Results go to stdout (one JSON object with `--json`), logs and
//! progress to stderr. This crate holds no build logic of its own.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

mod build;
mod compose;
mod demo;
mod derive;
mod disk;
mod housekeeping;
mod image;
mod progress;
mod transport;

pub mod docs;

pub use build::BuildArgs;
pub use compose::ComposeArgs;
pub use demo::{DemoArgs, FixtureArgs};
pub use derive::DeriveArgs;
pub use disk::{DiskArgs, NodeArgs, NodeCommand, NodeRollbackArgs, NodeUpdateArgs};
pub use housekeeping::{ListArgs, PruneArgs};
pub use image::{DiffArgs, ImageOptions, InspectArgs, PushArgs};
pub use transport::RegistryArgs;

/// Builds Red Hat CoreOS-style operating systems in layers.
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(name = "strata", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// How much the logs on stderr say, and in which form: options of every
/// command.
#[derive(Debug, Clone, Default, clap::Args, PartialEq, Eq)]
pub struct LogArgs {
    /// More detail in the logs: -v strata's debug lines (every external
    /// command line, each stage's time), -vv everything at trace, the
    /// libraries' too. Overrides RUST_LOG.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub quiet: u8,
    /// Log lines as text, or as one JSON object per line (for CI log
    /// collectors).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl LogArgs {
    /// The log filter: the flags' level, else `RUST_LOG`, else info.
    fn filter(&self) -> Option<&'static str> {
        match (self.verbose, self.quiet) {
            (0, 0) => None,
            // The libraries' own debug output (the OpenPGP parser's, a
            // line per packet) would bury strata's.
            (1, _) => Some("info,strata=debug"),
            (_, 0) => Some("trace"),
            (_, 1) => Some("warn"),
            _ => Some("error"),
        }
    }
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
    /// Run a pipeline: compose, derive every release, disks, push, run.json.
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
    /// List a workdir's builds per stream (newest first), runs and disk use.
    List(ListArgs),
    /// Remove all but the newest N builds of each stream: records, tags, disks, blobs, ostree objects.
    Prune(PruneArgs),
    /// Internal: the worker process of `compose` (the package install).
    #[command(name = "__install-worker", hide = true)]
    InstallWorker(WorkerArgs),
    /// Internal: the worker process of `derive` (one release's install).
    #[command(name = "__derive-worker", hide = true)]
    DeriveWorker(WorkerArgs),
    /// Internal: the worker process of `disk` (the namespaced deployment).
    #[command(name = "__disk-worker", hide = true)]
    DiskWorker(WorkerArgs),
}

/// A worker's command line: the job to read, the outcome to write (see
/// `strata_process::worker`).
#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct WorkerArgs {
    pub job: std::path::PathBuf,
    pub outcome: std::path::PathBuf,
}

impl WorkerArgs {
    fn into_os_strings(self) -> [OsString; 2] {
        [self.job.into_os_string(), self.outcome.into_os_string()]
    }
}

/// The log filter a flag set (`-v`, `-q`), for the workers strata starts.
static WORKER_LOG: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Logs to stderr, filtered by the flags or `RUST_LOG` (default: info).
/// Called once, right after the command line is parsed. A flag's level is
/// also given to the workers strata runs (derive's, disk's) through their
/// own environment ([`worker`]); this process's environment is not changed.
fn init_logging(log: &LogArgs) {
    let filter = match log.filter() {
        Some(level) => {
            let _ = WORKER_LOG.set(level.to_string());
            tracing_subscriber::EnvFilter::new(level)
        }
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    };
    // The libraries' byte progress is for the bars, never the log.
    let filter = filter.add_directive(
        format!("{}=off", strata_process::progress::TARGET)
            .parse()
            .expect("a valid directive"),
    );
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(progress::LogWriter)
        .with_target(false);
    let fmt = match log.log_format {
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => fmt.json().with_ansi(false).boxed(),
    };
    let bars = progress::Bars::default().with_filter(tracing_subscriber::filter::filter_fn(|m| {
        m.target() == strata_process::progress::TARGET
    }));
    // A second call (a test driving `run` twice) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(bars)
        .try_init();
}

/// How a stage starts its worker: this very binary with the hidden
/// subcommand `sub`, logging at this process's level.
pub(crate) fn worker(sub: &str) -> Result<strata_derive::Worker> {
    let exe = std::env::current_exe().context("finding the strata executable")?;
    let mut w = strata_derive::Worker::new(exe).arg(sub);
    if let Some(level) = WORKER_LOG.get() {
        w = w.env("RUST_LOG", level);
    }
    Ok(w)
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
    init_logging(&cli.log);
    // Stages that install packages write files for the image's many users:
    // an ordinary user's strata re-executes itself as root of a user
    // namespace holding them, before anything is read or written.
    let installs = match &cli.command {
        Command::Compose(_) => Some("strata compose"),
        Command::Derive(_) => Some("strata derive"),
        Command::Build(_) => Some("strata build"),
        Command::Demo(_) => Some("strata demo"),
        _ => None,
    };
    if let Some(what) = installs {
        strata_process::userns::become_root(what)?;
    }
    match cli.command {
        Command::Fixture(args) => demo::fixture(args),
        Command::Demo(args) => demo::run(args),
        Command::Compose(args) => compose::run(args),
        Command::Derive(args) => derive::run(args),
        Command::Build(args) => build::run(args),
        Command::Disk(args) => disk::run(args),
        Command::DiskWorker(args) => Ok(strata_disk::worker_main(args.into_os_strings())),
        Command::Node(args) => disk::node(args),
        Command::Inspect(args) => image::inspect(args),
        Command::Diff(args) => image::diff(args),
        Command::Push(args) => image::push(args),
        Command::List(args) => housekeeping::list(args),
        Command::Prune(args) => housekeeping::prune(args),
        Command::InstallWorker(args) => Ok(strata_dnf::job::serve_child(args.into_os_strings())),
        Command::DeriveWorker(args) => Ok(strata_derive::worker::main(
            args.into_os_strings().into_iter(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flag's level reaches the workers through their command's
    /// environment, not through this process's.
    #[test]
    fn workers_log_at_the_flags_level() {
        init_logging(&LogArgs {
            verbose: 2,
            ..LogArgs::default()
        });
        let cmd = worker("__disk-worker").unwrap().command();
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            env,
            [(
                std::ffi::OsStr::new("RUST_LOG"),
                Some(std::ffi::OsStr::new("trace"))
            )]
        );
        assert_ne!(
            std::env::var("RUST_LOG").ok().as_deref(),
            Some("trace"),
            "this process's environment is left alone"
        );
    }

    #[test]
    fn fixture_args_parse() {
        let cli =
            Cli::try_parse_from(["strata", "fixture", "--out", "/tmp/f", "--scale", "3"]).unwrap();
        assert_eq!(
            cli,
            Cli {
                log: LogArgs::default(),
                command: Command::Fixture(FixtureArgs {
                    out: "/tmp/f".into(),
                    scale: demo::Scale::Packages(3),
                    flavour: strata_testdistro::Flavour::Rhel86,
                    json: false
                })
            }
        );
        let cli =
            Cli::try_parse_from(["strata", "fixture", "--out", "f", "--scale", "rhcos"]).unwrap();
        let Command::Fixture(args) = cli.command else {
            panic!("not the fixture command")
        };
        assert_eq!(args.scale, demo::Scale::Rhcos);
        assert!(
            Cli::try_parse_from(["strata", "fixture", "--out", "f", "--scale", "huge"]).is_err()
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
