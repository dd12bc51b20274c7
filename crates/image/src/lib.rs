//! `strata-image`: writes strata's own container image (`make image`).
//!
//! `ci/build-image` makes the directories (a Debian 12 userland with
//! mmdebstrap, the strata binary staged under `usr/bin`); this program
//! turns them into an OCI image with strata's own OCI code
//! ([`strata_oscontainer::write_image`]: deterministic tar and gzip, the
//! config's entrypoint, environment and labels) and, given `--archive`,
//! writes that image as an OCI archive ([`strata_oscontainer::write_oci_archive`]).
//! It prints what it wrote as one JSON object on stdout.
//!
//! It is a build tool of this repository, not a `strata` command: it knows
//! nothing of what the directories hold, and nothing here reads the clock —
//! every time in the image is SOURCE_DATE_EPOCH.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;
use strata_oscontainer::{DerivedLayer, ImageOptions, ImageRef};

/// The command line, as parsed.
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(
    name = "strata-image",
    about = "Writes directories as a deterministic OCI image (strata's own image)"
)]
pub struct Args {
    /// OCI layout to write the image into (created if needed).
    #[arg(long, value_name = "DIR")]
    pub oci: PathBuf,
    /// The image's tag in the layout.
    #[arg(long, default_value = "strata")]
    pub tag: String,
    /// A layer, bottom first: its history description and its directory.
    #[arg(long = "layer", value_name = "DESCRIPTION=DIR", required = true, value_parser = parse_layer)]
    pub layers: Vec<(String, PathBuf)>,
    /// One argument of the config's Entrypoint (repeat, in order).
    #[arg(long = "entrypoint", value_name = "ARG")]
    pub entrypoint: Vec<String>,
    /// One variable of the config's Env.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_pair)]
    pub env: Vec<(String, String)>,
    /// The config's WorkingDir.
    #[arg(long, value_name = "DIR")]
    pub working_dir: Option<String>,
    /// A label (also a manifest annotation).
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = parse_pair)]
    pub labels: Vec<(String, String)>,
    /// The image's one time: config `created`, history, the bound of file
    /// mtimes, the archive's entries.
    #[arg(long, env = "SOURCE_DATE_EPOCH", value_name = "SECONDS")]
    pub source_date_epoch: u64,
    /// Also write the image as an OCI archive at FILE.
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
}

fn parse_layer(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((d, dir)) if !d.is_empty() && !dir.is_empty() => Ok((d.into(), dir.into())),
        _ => Err("expected DESCRIPTION=DIR".into()),
    }
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.into(), v.into())),
        _ => Err("expected NAME=VALUE with a non-empty NAME".into()),
    }
}

/// What to write, validated.
#[derive(Debug)]
pub struct Plan {
    pub oci: PathBuf,
    pub tag: String,
    pub layers: Vec<DerivedLayer>,
    pub opts: ImageOptions,
    pub archive: Option<PathBuf>,
}

impl Plan {
    /// Validates the parsed arguments: a name given twice (label or
    /// variable) is an error rather than a silent last-one-wins.
    pub fn new(args: Args) -> Result<Plan> {
        let mut opts = ImageOptions::default();
        let mut env = BTreeMap::new();
        for (k, v) in &args.env {
            if env.insert(k.clone(), v.clone()).is_some() {
                bail!("--env {k} is given twice");
            }
            opts.env.push(format!("{k}={v}"));
        }
        for (k, v) in args.labels {
            if opts.labels.contains_key(&k) {
                bail!("--label {k} is given twice");
            }
            opts.labels.insert(k, v);
        }
        opts.entrypoint = args.entrypoint;
        opts.working_dir = args.working_dir;
        opts.source_date_epoch = args.source_date_epoch;
        let layers = args
            .layers
            .iter()
            .map(|(description, dir)| DerivedLayer::new(dir, description))
            .collect();
        Ok(Plan {
            oci: args.oci,
            tag: args.tag,
            layers,
            opts,
            archive: args.archive,
        })
    }
}

/// Parses `argv`, writes the image (and the archive), prints what was
/// written as JSON.
pub fn run(argv: impl IntoIterator<Item = OsString>) -> Result<()> {
    let plan = Plan::new(Args::try_parse_from(argv)?)?;
    let written = strata_oscontainer::write_image(&plan.oci, &plan.tag, &plan.layers, &plan.opts)
        .with_context(|| format!("writing the image into {}", plan.oci.display()))?;
    let mut out = serde_json::to_value(&written)?;
    if let Some(dest) = &plan.archive {
        let archive = strata_oscontainer::write_oci_archive(
            &ImageRef::oci(&plan.oci, &plan.tag),
            dest,
            plan.opts.source_date_epoch,
        )
        .with_context(|| format!("writing the archive {}", dest.display()))?;
        out["archive"] = serde_json::json!({ "path": dest, "archive": archive });
    }
    println!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("strata-image").chain(args.iter().copied()))
    }

    #[test]
    fn parses_layers_config_and_labels() {
        let a = parse(&[
            "--oci",
            "o",
            "--layer",
            "userland=r/rootfs",
            "--layer",
            "strata=r/bin",
            "--entrypoint",
            "/usr/bin/strata",
            "--env",
            "PATH=/usr/bin:/bin",
            "--label",
            "org.opencontainers.image.version=0.1.0",
            "--source-date-epoch",
            "7",
        ])
        .unwrap();
        assert_eq!(
            a,
            Args {
                oci: "o".into(),
                tag: "strata".into(),
                layers: vec![
                    ("userland".into(), "r/rootfs".into()),
                    ("strata".into(), "r/bin".into())
                ],
                entrypoint: vec!["/usr/bin/strata".into()],
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                working_dir: None,
                labels: vec![("org.opencontainers.image.version".into(), "0.1.0".into())],
                source_date_epoch: 7,
                archive: None,
            }
        );
        let plan = Plan::new(a).unwrap();
        assert_eq!(plan.opts.env, ["PATH=/usr/bin:/bin"]);
        assert_eq!(plan.layers.len(), 2);
    }

    #[test]
    fn refuses_malformed_and_repeated_values() {
        let base = ["--oci", "o", "--source-date-epoch", "0"];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v)
        };
        assert!(with(&[]).is_err(), "a layer is required");
        assert!(with(&["--layer", "rootfs"]).is_err());
        assert!(with(&["--layer", "=dir"]).is_err());
        assert!(with(&["--layer", "a=d", "--env", "=x"]).is_err());
        let twice = with(&["--layer", "a=d", "--label", "k=1", "--label", "k=2"]).unwrap();
        let err = Plan::new(twice).unwrap_err().to_string();
        assert!(err.contains("--label k is given twice"), "{err}");
    }
}
