//! `strata list` and `strata prune`: what a workdir holds, and making room.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::image::size;

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct ListArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct PruneArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// How many builds of each stream (and runs of each pipeline) to keep,
    /// newest first; builds a kept run names are kept too.
    #[arg(long, value_name = "N")]
    pub keep: usize,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn list(args: ListArgs) -> Result<ExitCode> {
    let l = strata_pipeline::housekeeping::list(&args.workdir)?;
    if args.json {
        println!("{}", serde_json::to_string(&l)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (stream, builds) in &l.streams {
        println!("{stream}");
        for b in builds {
            let image = b.image_size.map(size).unwrap_or_else(|| "-".into());
            println!(
                "  {:<28} image {:>10}  files {:>10}  {}",
                b.version,
                image,
                size(b.files_size),
                b.image_digest.as_deref().unwrap_or("(no image)")
            );
        }
    }
    for (pipeline, runs) in &l.runs {
        println!("runs of {pipeline}");
        for r in runs {
            println!("  {:<28} {}", r.id, r.run_json.display());
        }
    }
    println!("disk use");
    for (dir, bytes) in &l.disk_usage {
        println!("  {dir:<8} {:>10}", size(*bytes));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn prune(args: PruneArgs) -> Result<ExitCode> {
    let r = strata_pipeline::housekeeping::prune(&args.workdir, args.keep, args.dry_run)?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if r.dry_run { "would remove" } else { "removed" };
    for b in &r.builds {
        println!("{verb} build {b}");
    }
    for run in &r.runs {
        println!("{verb} run {run}");
    }
    println!(
        "{verb} {} builds, {} runs, {} tags; files {}",
        r.builds.len(),
        r.runs.len(),
        r.tags.len(),
        size(r.files_bytes)
    );
    if !r.dry_run {
        println!(
            "  blobs {} ({}), ostree objects {} ({})",
            r.blobs,
            size(r.blob_bytes),
            r.ostree_objects,
            size(r.ostree_bytes)
        );
    }
    Ok(ExitCode::SUCCESS)
}
