//! `strata build`: a pipeline manifest, run by `strata-pipeline`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use strata_pipeline::{BuildOptions, BuildResult, ImageResult, Workers};

use crate::transport::RegistryArgs;

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct BuildArgs {
    /// Working directory: cache, ostree repo, OCI images, build history.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// The pipeline manifest (YAML): base, releases, platforms, push targets.
    pub pipeline: PathBuf,
    /// Set a variable: over the pipeline's defaults, passed to every manifest.
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = crate::parse_var)]
    pub vars: Vec<String>,
    /// Push every image that has a `push:` target in the pipeline.
    #[arg(long)]
    pub push: bool,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The workers of compose, derive and disk: this very binary, hidden
/// subcommands.
pub(crate) fn workers() -> Result<Workers> {
    Ok(Workers {
        install: crate::worker("__install-worker")?,
        derive: crate::worker("__derive-worker")?,
        disk: crate::worker("__disk-worker")?,
    })
}

pub(crate) fn options(pipeline: &Path, workdir: &Path, vars: &[String]) -> Result<BuildOptions> {
    let vars = strata_manifest::Vars::from_assignments(vars.iter().map(String::as_str))?;
    Ok(BuildOptions::new(pipeline, workdir, workers()?).vars(vars))
}

pub(crate) fn run(args: BuildArgs) -> Result<ExitCode> {
    let mut opts = options(&args.pipeline, &args.workdir, &args.vars)?
        .push(args.push)
        .transport(args.registry.transport());
    let live = crate::progress::Live::on_terminal();
    if let Some(s) = &live {
        opts = opts.progress(s.progress());
    }
    let result = strata_pipeline::build(&opts)?;
    drop(live);
    if args.json {
        println!("{}", serde_json::to_string(&build_json(&result))?);
    } else {
        print!("{}", summary(&result));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `--json` object: the first base's identity at the top (every
/// command's `image`, `digest`, `version`, `ostree_commit`), then every
/// stage: `bases` in the pipeline's order, `base` the first of them.
pub(crate) fn build_json(r: &BuildResult) -> serde_json::Value {
    let first = r.bases.first();
    serde_json::json!({
        "changed": r.changed,
        "name": r.name,
        "image": first.map(|b| &b.image),
        "digest": first.map(|b| &b.digest),
        "version": first.map(|b| &b.version),
        "ostree_commit": first.map(|b| &b.ostree_commit),
        "base": first,
        "bases": r.bases,
        "releases": r.releases,
        "run_id": r.run.id,
        "run_json": r.run.path,
        "run_changed": r.run.changed,
    })
}

fn state(changed: bool) -> &'static str {
    if changed {
        "built"
    } else {
        "unchanged, not rebuilt"
    }
}

fn image_lines(out: &mut String, title: &str, i: &ImageResult) {
    use std::fmt::Write;
    let _ = writeln!(out, "  {title:<22} {} ({})", i.version, state(i.changed));
    let _ = writeln!(out, "    image                {}", i.image);
    let _ = writeln!(out, "    digest               {}", i.digest);
    let _ = writeln!(out, "    ostree commit        {}", i.ostree_commit);
    if let Some(d) = &i.disks {
        let _ = writeln!(out, "    disks                {}", state(d.changed));
        for a in &d.artifacts {
            let _ = writeln!(
                out,
                "      {:<8} {:>10}  {}",
                a.platform,
                crate::image::size(a.size),
                a.path.display()
            );
        }
    }
    if let Some(p) = &i.pushed {
        let _ = writeln!(
            out,
            "    pushed               {} ({})",
            p.pullspec,
            if p.changed { "pushed" } else { "already there" }
        );
    }
}

/// What a person reads after a build.
pub(crate) fn summary(r: &BuildResult) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "pipeline {}: {}\n",
        r.name,
        if r.changed {
            "built"
        } else {
            "everything current, nothing rebuilt"
        }
    );
    for base in &r.bases {
        image_lines(&mut out, &format!("base {}", base.stream), base);
    }
    for rel in &r.releases {
        image_lines(&mut out, &format!("OpenShift {}", rel.release), &rel.image);
        let _ = writeln!(out, "    base                 {}", rel.base_stream);
    }
    out.push_str(&format!(
        "  release record         {} ({})\n",
        r.run.path.display(),
        if r.run.changed {
            "new"
        } else {
            "same as before"
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::{Cli, Command};

    #[test]
    fn build_args_parse() {
        let cli = Cli::try_parse_from([
            "strata",
            "build",
            "p.yaml",
            "--var",
            "fixture=/f",
            "--push",
            "--tls-verify=false",
            "--json",
        ])
        .unwrap();
        assert_eq!(
            cli.command,
            Command::Build(super::BuildArgs {
                workdir: "strata-work".into(),
                pipeline: "p.yaml".into(),
                vars: vec!["fixture=/f".into()],
                push: true,
                registry: crate::transport::RegistryArgs {
                    tls_verify: false,
                    authfile: None
                },
                json: true,
            })
        );
    }
}
