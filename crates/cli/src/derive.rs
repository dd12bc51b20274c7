//! `strata derive` and its hidden worker subcommand.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

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
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = crate::parse_var)]
    pub vars: Vec<String>,
    /// Push each derived image to docker://HOST/NAME:TAG; `{release}` in
    /// DEST becomes the OpenShift release (required with several manifests).
    #[arg(long, value_name = "DEST")]
    pub push: Option<String>,
    /// For a docker:// base and for --push.
    #[command(flatten)]
    pub registry: crate::transport::RegistryArgs,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How derive starts its workers: this very binary, hidden subcommand.
pub(crate) fn worker() -> Result<strata_derive::Worker> {
    crate::worker("__derive-worker")
}

pub(crate) fn run(args: DeriveArgs) -> Result<ExitCode> {
    if let Some(dest) = &args.push {
        if args.manifests.len() > 1 && !dest.contains("{release}") {
            anyhow::bail!(
                "--push {dest}: with {} release manifests, DEST needs `{{release}}` (e.g. docker://HOST/rhcos:{{release}})",
                args.manifests.len()
            );
        }
    }
    let vars = strata_manifest::Vars::from_assignments(args.vars.iter().map(String::as_str))?;
    let opts = strata_derive::DeriveOptions::new(
        &args.workdir,
        &args.base,
        args.manifests.clone(),
        worker()?,
    )
    .vars(vars)
    .overrides(args.override_rpms.clone())
    .transport(args.registry.transport());
    // Byte bars (layers) on a terminal.
    let live = crate::progress::Live::on_terminal();
    let results = strata_derive::derive(&opts)?;
    drop(live);
    let mut pushed = Vec::new();
    for r in &results {
        pushed.push(match &args.push {
            Some(dest) => Some(args.registry.push(
                &r.image,
                &r.digest,
                &dest.replace("{release}", &r.release),
            )?),
            None => None,
        });
    }
    if args.json {
        let mut releases: Vec<serde_json::Value> = results.iter().map(derive_json).collect();
        for (v, p) in releases.iter_mut().zip(&pushed) {
            v["pushed"] = serde_json::to_value(p)?;
        }
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
        for p in pushed.iter().flatten() {
            println!("  pushed {} ({})", p.pullspec, p.destination);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn derive_json(r: &strata_derive::DeriveResult) -> serde_json::Value {
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
