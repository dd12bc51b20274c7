//! `strata disk` and its hidden deploy-worker subcommand.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct DiskArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// The image: a tag in the workdir, oci:DIR:TAG or docker://HOST/NAME:TAG.
    #[arg(long)]
    pub image: String,
    /// Platforms, comma-separated: qemu, metal, metal4k, live (the live
    /// ISO and PXE files).
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_platform)]
    pub platform: Vec<String>,
    /// The reference nodes upgrade from (where the image is published),
    /// recorded in the deployment's origin and the aleph file instead of
    /// --image: with it, the same image gives the same disk bytes on any
    /// machine.
    #[arg(long, value_name = "REF")]
    pub target_image: Option<String>,
    /// Disk size in MiB instead of the content plus headroom.
    #[arg(long, value_name = "MIB")]
    pub size_mib: Option<u64>,
    /// Store the disks gzip-compressed, as published images are (gzip), or
    /// as written, ready to boot (none).
    #[arg(long, value_name = "gzip|none", default_value = "none")]
    pub compress: strata_disk::Compress,
    /// Where the build directory will be published: stream.json locations
    /// become URL/STREAM/VERSION/x86_64/FILE. At most 2048 characters, no
    /// user or password, no `.` or `..` segment.
    #[arg(long, value_name = "URL")]
    pub artifact_url: Option<String>,
    /// For a docker:// image.
    #[command(flatten)]
    pub registry: crate::transport::RegistryArgs,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A platform strata knows, for clap: an unknown one is a usage error.
fn parse_platform(name: &str) -> Result<String, String> {
    strata_disk::check_platform(name)
        .map(|()| name.to_string())
        .map_err(|e| e.to_string())
}

/// How disk starts its deploy worker: this very binary, hidden subcommand.
fn worker() -> Result<std::process::Command> {
    Ok(crate::worker("__disk-worker")?.command())
}

pub(crate) fn run(args: DiskArgs) -> Result<ExitCode> {
    for (i, p) in args.platform.iter().enumerate() {
        if args.platform[..i].contains(p) {
            return Err(crate::UsageError(format!("--platform: {p} is given twice")).into());
        }
    }
    // Published in stream.json: refused as a usage error, its value
    // escaped and cut, before any work.
    if let Some(url) = &args.artifact_url {
        strata_manifest::check_artifact_url(url)
            .map_err(|reason| crate::UsageError(format!("--artifact-url: {reason}")))?;
    }
    let opts =
        strata_disk::DiskOptions::new(&args.workdir, &args.image, args.platform.clone(), worker()?)
            .size(args.size_mib.map(|m| m << 20))
            .transport(args.registry.transport())
            .target_image(args.target_image.clone())
            .compress(args.compress)
            .artifact_url(args.artifact_url.clone());
    // Byte bars (hashing, compression) on a terminal.
    let live = crate::progress::Live::on_terminal();
    let r = strata_disk::build(&opts)?;
    drop(live);
    if args.json {
        println!("{}", serde_json::to_string(&disk_json(&r))?);
    } else {
        println!(
            "disk images of {} {}{}",
            r.image,
            r.version,
            r.openshift_version
                .as_ref()
                .map(|v| format!(" (OpenShift {v})"))
                .unwrap_or_default()
        );
        for a in &r.artifacts {
            println!(
                "  {:<8} {:<6} {} ({} bytes)",
                a.platform,
                a.format,
                a.path.display(),
                a.size
            );
        }
        println!("  stream metadata {}", r.stream_json.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn disk_json(r: &strata_disk::DiskResult) -> serde_json::Value {
    serde_json::json!({
        "image": r.image,
        "digest": r.digest,
        "version": r.version,
        "openshift_version": r.openshift_version,
        "ostree_commit": r.ostree_commit,
        "build_dir": r.build_dir,
        "stream_json": r.stream_json,
        "artifacts": r.artifacts.iter().map(|a| serde_json::json!({
            "platform": a.platform,
            "format": a.format,
            "path": a.path,
            "size": a.size,
            "sha256": a.sha256,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::{Cli, Command};

    #[test]
    fn disk_args_parse() {
        let cli = Cli::try_parse_from([
            "strata",
            "disk",
            "--workdir",
            "/w",
            "--image",
            "ocp-4.13",
            "--platform",
            "qemu,metal",
            "--target-image",
            "docker://quay.io/o/rhcos:4.13",
            "--json",
        ])
        .unwrap();
        assert_eq!(
            cli.command,
            Command::Disk(super::DiskArgs {
                workdir: "/w".into(),
                image: "ocp-4.13".into(),
                platform: vec!["qemu".into(), "metal".into()],
                target_image: Some("docker://quay.io/o/rhcos:4.13".into()),
                size_mib: None,
                compress: strata_disk::Compress::None,
                artifact_url: None,
                registry: crate::transport::RegistryArgs {
                    tls_verify: true,
                    authfile: None,
                },
                json: true,
            })
        );
    }
}

/// What to do to a node's disk.
#[derive(Debug, clap::Subcommand, PartialEq, Eq)]
pub enum NodeCommand {
    /// Deploy an image into a raw disk image as the node would on update
    /// (the image becomes the default, the current deployment the rollback).
    Update(NodeUpdateArgs),
    /// Make the rollback deployment of a raw disk image the default.
    Rollback(NodeRollbackArgs),
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct NodeArgs {
    #[command(subcommand)]
    pub command: NodeCommand,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct NodeUpdateArgs {
    /// Working directory holding (or receiving) the image.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// The image: a tag in the workdir, oci:DIR:TAG or docker://HOST/NAME:TAG.
    #[arg(long)]
    pub image: String,
    /// A raw disk image made by `strata disk` (metal), changed in place:
    /// the guest must not be running.
    pub disk: PathBuf,
    /// For a docker:// image.
    #[command(flatten)]
    pub registry: crate::transport::RegistryArgs,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct NodeRollbackArgs {
    /// A raw disk image made by `strata disk`, changed in place.
    pub disk: PathBuf,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn node(args: NodeArgs) -> Result<ExitCode> {
    let (state, json) = match args.command {
        NodeCommand::Update(a) => (
            strata_disk::node::update(
                &a.workdir,
                &a.image,
                &a.disk,
                &a.registry.transport(),
                worker()?,
            )?,
            a.json,
        ),
        NodeCommand::Rollback(a) => (strata_disk::node::rollback(&a.disk, worker()?)?, a.json),
    };
    if json {
        println!("{}", serde_json::to_string(&state)?);
    } else {
        for (i, d) in state.deployments.iter().enumerate() {
            let role = match i {
                0 => "default ",
                1 => "rollback",
                _ => "        ",
            };
            println!(
                "{role} {} {} ({})",
                d.version.as_deref().unwrap_or("-"),
                d.title,
                d.commit
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
