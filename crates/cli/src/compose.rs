//! `strata compose`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct ComposeArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// The base manifest (YAML).
    pub manifest: PathBuf,
    /// Compose exactly the packages of this lockfile (strata's or
    /// rpm-ostree's).
    #[arg(long)]
    pub lockfile: Option<PathBuf>,
    /// An overrides file (a lockfile, JSON or YAML, such as
    /// manifest-lock.overrides.yaml): its packages win over the lockfile's
    /// by name; without --lockfile, they pin the versions of the packages
    /// the manifest installs. Repeatable, later files win.
    #[arg(long, value_name = "FILE")]
    pub overrides: Vec<PathBuf>,
    /// Set a manifest variable: `${KEY}` in the manifest becomes VALUE.
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = crate::parse_var)]
    pub vars: Vec<String>,
    /// Push the base image to docker://HOST/NAME:TAG (skipped when the
    /// registry already has its digest there).
    #[arg(long, value_name = "DEST")]
    pub push: Option<String>,
    #[command(flatten)]
    pub registry: crate::transport::RegistryArgs,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(args: ComposeArgs) -> Result<ExitCode> {
    let vars = strata_manifest::Vars::from_assignments(args.vars.iter().map(String::as_str))?;
    let opts = strata_compose::ComposeOptions::new(
        &args.manifest,
        &args.workdir,
        crate::worker("__install-worker")?,
    )
    .vars(vars)
    .lockfile(args.lockfile.clone())
    .overrides(args.overrides.clone());
    // Byte bars (downloads, layers) on a terminal.
    let live = crate::progress::Live::on_terminal();
    let result = strata_compose::compose(&opts)?;
    drop(live);
    let pushed = match &args.push {
        Some(dest) => Some(args.registry.push(&result.image, &result.digest, dest)?),
        None => None,
    };
    if args.json {
        let mut v = compose_json(&result);
        v["pushed"] = serde_json::to_value(&pushed)?;
        println!("{}", serde_json::to_string(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    if result.changed {
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
    if let Some(p) = &pushed {
        println!("  pushed {} ({})", p.pullspec, p.destination);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn compose_json(r: &strata_compose::ComposeResult) -> serde_json::Value {
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
