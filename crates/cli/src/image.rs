//! `strata inspect`, `strata diff`, `strata push`: images as they are.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use strata_oscontainer::{ImageRef, TransportOptions};
use strata_process::text::escaped as one_line;

/// Where bare tags are looked up, and how registries are reached.
#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct ImageOptions {
    /// Working directory whose OCI store holds images named by a bare tag.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    #[command(flatten)]
    pub registry: crate::transport::RegistryArgs,
}

impl ImageOptions {
    pub(crate) fn transport(&self) -> TransportOptions {
        self.registry.transport()
    }

    pub(crate) fn parse(&self, reference: &str) -> Result<ImageRef> {
        Ok(ImageRef::parse(reference, Some(&self.workdir.join("oci")))?)
    }
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct InspectArgs {
    /// oci:DIR:TAG, docker://HOST/NAME:TAG, or a tag in the workdir.
    pub image: String,
    #[command(flatten)]
    pub options: ImageOptions,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct DiffArgs {
    /// The image a client has.
    pub from: String,
    /// The image it updates to.
    pub to: String,
    #[command(flatten)]
    pub options: ImageOptions,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct PushArgs {
    /// The image to push: a tag in the workdir or oci:DIR:TAG.
    pub image: String,
    /// docker://HOST/NAME:TAG
    pub destination: String,
    #[command(flatten)]
    pub options: ImageOptions,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn inspect(args: InspectArgs) -> Result<ExitCode> {
    let image = args.options.parse(&args.image)?;
    let info = strata_oscontainer::inspect_verified(&image, &args.options.transport())
        .with_context(|| format!("inspecting {image}"))?;
    // A derived image's `ostree.commit` label names its base's commit; the
    // commit a client builds from it is known from the build records of
    // the workdir that derived it.
    let derived = info
        .layers
        .iter()
        .any(|l| l.kind == strata_oscontainer::LayerKind::Derived);
    let derived_commit = if derived {
        strata_workdir::history_of(&args.options.workdir)
            .unwrap_or_default()
            .into_iter()
            .rev()
            .find(|b| b.image_digest.as_deref() == Some(info.manifest_digest.as_str()))
            .map(|b| b.ostree_commit)
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::to_value(&info)?;
        v["digest"] = serde_json::Value::String(info.manifest_digest.clone());
        v["base_commit"] = serde_json::to_value(&info.ostree_commit)?;
        v["derived_commit"] = serde_json::to_value(&derived_commit)?;
        println!("{}", serde_json::to_string(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    // Everything below comes from the image: shown on one line each, with
    // control characters escaped, so that an image cannot write to the
    // terminal.
    println!("{}", one_line(&info.image));
    println!("  digest         {}", one_line(&info.manifest_digest));
    println!(
        "  version        {}",
        one_line(info.version.as_deref().unwrap_or("-"))
    );
    let label_commit = one_line(info.ostree_commit.as_deref().unwrap_or("-"));
    if derived {
        println!("  base commit    {label_commit} (its ostree.commit label)");
        match &derived_commit {
            Some(c) => println!("  derived commit {c} (the commit a client builds from it)"),
            None => println!(
                "  derived commit - (not derived in {})",
                one_line(&args.options.workdir.display().to_string())
            ),
        }
    } else {
        println!("  ostree commit  {label_commit}");
    }
    println!("  labels");
    for (k, v) in &info.labels {
        println!("    {}={}", one_line(k), one_line(v));
    }
    println!(
        "  layers ({}, {} total)",
        info.layers.len(),
        size(info.total_size)
    );
    for l in &info.layers {
        let what = if l.components.is_empty() {
            l.description.clone().unwrap_or_default()
        } else {
            l.components.join(",")
        };
        println!(
            "    {} {:>10} {:<7} {}",
            one_line(short(&l.digest)),
            size(l.size),
            format!("{:?}", l.kind).to_lowercase(),
            one_line(&what)
        );
    }
    println!("  packages ({})", info.packages.len());
    for p in &info.packages {
        println!("    {}", package(p));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn diff(args: DiffArgs) -> Result<ExitCode> {
    let t = args.options.transport();
    let d = strata_oscontainer::diff(
        &args.options.parse(&args.from)?,
        &args.options.parse(&args.to)?,
        &t,
    )?;
    if args.json {
        println!("{}", serde_json::to_string(&d)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} -> {}", one_line(&d.from), one_line(&d.to));
    for p in &d.packages_added {
        println!("  + {}", package(p));
    }
    for p in &d.packages_removed {
        println!("  - {}", package(p));
    }
    for c in &d.packages_changed {
        let line = format!("{}.{} {} -> {}", c.name, c.arch, c.from, c.to);
        println!("  ~ {}", one_line(&line));
    }
    println!(
        "  layers: {} shared, {} new, {} gone; a client downloads {}",
        d.layers_shared.len(),
        d.layers_added.len(),
        d.layers_removed.len(),
        size(d.download_bytes)
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn push(args: PushArgs) -> Result<ExitCode> {
    let src = args.options.parse(&args.image)?;
    let dest = ImageRef::parse(&args.destination, None)?;
    let t = args.options.transport();
    strata_oscontainer::push(&src, &dest, &t)
        .with_context(|| format!("pushing {src} to {dest}"))?;
    let info = strata_oscontainer::inspect(&src, &t)?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "image": dest.to_string(),
                "source": src.to_string(),
                "digest": info.manifest_digest,
                "version": info.version,
                "ostree_commit": info.ostree_commit,
            })
        );
    } else {
        println!("pushed {src} to {dest} ({})", info.manifest_digest);
    }
    Ok(ExitCode::SUCCESS)
}

/// A package of an image as `name-evr.arch`, on one line.
fn package(p: &strata_oscontainer::Package) -> String {
    one_line(&format!("{}-{}.{}", p.name, p.evr, p.arch))
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let end = hex.char_indices().nth(12).map_or(hex.len(), |(i, _)| i);
    &hex[..end]
}

/// Bytes in human units (MiB with one decimal).
pub(crate) fn size(bytes: u64) -> String {
    if bytes < 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}
