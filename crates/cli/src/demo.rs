//! `strata demo` and `strata fixture`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct DemoArgs {
    /// Working directory: fixture, repositories, images, builds.
    #[arg(long, default_value = "strata-work")]
    pub workdir: PathBuf,
    /// Print one JSON object (the build's, plus the fixture and layer bytes).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args, PartialEq, Eq)]
pub struct FixtureArgs {
    /// Directory to generate into (reused when already current).
    #[arg(long)]
    pub out: PathBuf,
    /// Add N synthetic packages with a realistic size spread (benchmarks),
    /// or `rhcos`: as many, as large and with as many files as make the
    /// composed base the size of a real RHCOS base (docs/fixture.md).
    #[arg(long, default_value = "0", value_parser = parse_scale)]
    pub scale: Scale,
    /// Which distribution to imitate: rhel-8.6 (OpenShift 4.12), rhel-9.6
    /// (OpenShift 4.19 and 4.20) or c9s (CentOS Stream 9, OKD).
    #[arg(long, default_value = "rhel-8.6", value_parser = parse_flavour)]
    pub flavour: strata_testdistro::Flavour,
    /// Print one JSON object describing the fixture on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How many synthetic packages `strata fixture` adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Packages(usize),
    Rhcos,
}

fn parse_scale(value: &str) -> Result<Scale, String> {
    match value {
        "rhcos" => Ok(Scale::Rhcos),
        n => n
            .parse()
            .map(Scale::Packages)
            .map_err(|_| "expected a number of packages or `rhcos`".to_string()),
    }
}

fn parse_flavour(name: &str) -> Result<strata_testdistro::Flavour, String> {
    strata_testdistro::Flavour::parse(name).ok_or_else(|| {
        let known: Vec<&str> = strata_testdistro::Flavour::ALL
            .iter()
            .map(|f| f.name())
            .collect();
        format!("unknown flavour (known: {})", known.join(", "))
    })
}

pub(crate) fn fixture(args: FixtureArgs) -> Result<ExitCode> {
    let opts = strata_testdistro::Options::default().flavour(args.flavour);
    let opts = match args.scale {
        Scale::Packages(n) => opts.scale(n),
        Scale::Rhcos => opts.scale_rhcos(),
    };
    let fixture = strata_testdistro::Fixture::generate(&args.out, &opts)?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "root": fixture.root,
                "flavour": fixture.info.flavour,
                "release_key": fixture.info.release_key.fingerprint,
                "keys": fixture.info.keys.iter()
                    .map(|(role, k)| (role.clone(), serde_json::json!(k.fingerprint)))
                    .collect::<serde_json::Map<_, _>>(),
                "epel_key": fixture.info.epel_key.fingerprint,
                "repos": fixture.info.repos.iter().map(|r| serde_json::json!({
                    "id": r.id, "dir": r.dir, "snapshot": r.snapshot, "packages": r.packages.len(),
                })).collect::<Vec<_>>(),
            })
        );
    } else {
        println!(
            "fixture distribution ({}) at {}",
            fixture.info.flavour,
            fixture.root.display()
        );
        for r in &fixture.info.repos {
            println!("  {:<28} {:>3} packages  {}", r.id, r.packages.len(), r.dir);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The demo manifests, embedded so that `strata demo` runs from anywhere.
const DEMO_MANIFESTS: &[(&str, &str)] = &[
    (
        "pipeline.yaml",
        include_str!("../../../manifests/demo/pipeline.yaml"),
    ),
    (
        "pipeline-rhel-8.6.yaml",
        include_str!("../../../manifests/demo/pipeline-rhel-8.6.yaml"),
    ),
    (
        "rhel-9.6.yaml",
        include_str!("../../../manifests/demo/rhel-9.6.yaml"),
    ),
    (
        "rhel-9.6-repos.yaml",
        include_str!("../../../manifests/demo/rhel-9.6-repos.yaml"),
    ),
    (
        "ocp-4.19.yaml",
        include_str!("../../../manifests/demo/ocp-4.19.yaml"),
    ),
    (
        "ocp-4.20.yaml",
        include_str!("../../../manifests/demo/ocp-4.20.yaml"),
    ),
    ("c9s.yaml", include_str!("../../../manifests/demo/c9s.yaml")),
    (
        "c9s-repos.yaml",
        include_str!("../../../manifests/demo/c9s-repos.yaml"),
    ),
    (
        "okd-4.19.yaml",
        include_str!("../../../manifests/demo/okd-4.19.yaml"),
    ),
    (
        "okd-4.20.yaml",
        include_str!("../../../manifests/demo/okd-4.20.yaml"),
    ),
    (
        "rhel-8.6.yaml",
        include_str!("../../../manifests/demo/rhel-8.6.yaml"),
    ),
    (
        "rhel-8.6-repos.yaml",
        include_str!("../../../manifests/demo/rhel-8.6-repos.yaml"),
    ),
    (
        "ocp-4.12.yaml",
        include_str!("../../../manifests/demo/ocp-4.12.yaml"),
    ),
    (
        "ocp-4.13.yaml",
        include_str!("../../../manifests/demo/ocp-4.13.yaml"),
    ),
    (
        "node-layer.yaml",
        include_str!("../../../manifests/demo/node-layer.yaml"),
    ),
    (
        "node-layer/openshift-node.conf",
        include_str!("../../../manifests/demo/node-layer/openshift-node.conf"),
    ),
    (
        "node-layer/coreos-ignition-firstboot-complete.service",
        include_str!(
            "../../../manifests/demo/node-layer/coreos-ignition-firstboot-complete.service"
        ),
    ),
    (
        "node-layer/coreos-ignition-firstboot-complete",
        include_str!("../../../manifests/demo/node-layer/coreos-ignition-firstboot-complete"),
    ),
];

pub(crate) fn run(args: DemoArgs) -> Result<ExitCode> {
    use strata_testdistro::{Fixture, Flavour, Options};
    // The pipeline's two RHEL lines, each from its own fixture flavour.
    let fixture = Fixture::generate(&args.workdir.join("fixture"), &Options::default())?;
    let fixture_9 = Fixture::generate(
        &args.workdir.join("fixture-rhel-9.6"),
        &Options::default().flavour(Flavour::Rhel96),
    )?;
    let manifests = args.workdir.join("manifests/demo");
    std::fs::create_dir_all(&manifests)
        .with_context(|| format!("creating {}", manifests.display()))?;
    for (name, text) in DEMO_MANIFESTS {
        let path = manifests.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let pipeline = manifests.join("pipeline.yaml");
    let mut opts = crate::build::options(
        &pipeline,
        &args.workdir,
        &[
            format!("fixture={}", fixture.root.display()),
            format!("fixture_rhel_9_6={}", fixture_9.root.display()),
        ],
    )?;
    let live = crate::progress::Live::on_terminal();
    if let Some(s) = &live {
        opts = opts.progress(s.progress());
    }
    let result = strata_pipeline::build(&opts)?;
    drop(live);
    let bytes = layer_bytes(&result)?;

    if args.json {
        let mut v = crate::build::build_json(&result);
        v["fixture"] = serde_json::json!(fixture.root);
        v["fixtures"] = serde_json::json!([fixture.root, fixture_9.root]);
        v["pipeline"] = serde_json::json!(pipeline);
        v["shared_bytes"] = serde_json::json!(bytes
            .shared
            .iter()
            .cloned()
            .collect::<std::collections::BTreeMap<_, _>>());
        v["release_bytes"] = serde_json::json!(bytes
            .per_release
            .iter()
            .map(|(r, _, b)| (r.clone(), *b))
            .collect::<Vec<_>>());
        println!("{}", serde_json::to_string(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let size = crate::image::size;
    println!("strata demo: {}", args.workdir.display());
    for f in [&fixture, &fixture_9] {
        let count: usize = f.info.repos.iter().map(|r| r.packages.len()).sum();
        println!(
            "  fixture ({:<8})     {} ({} repos, {count} packages)",
            f.info.flavour,
            f.root.display(),
            f.info.repos.len()
        );
    }
    println!("  pipeline               {}", pipeline.display());
    print!("{}", crate::build::summary(&result));
    println!("  image bytes (compressed layers, one blob store)");
    for (stream, b) in &bytes.shared {
        println!(
            "    base {stream:<15} {} (shared by its releases)",
            size(*b)
        );
    }
    for (release, base, b) in &bytes.per_release {
        println!(
            "    OpenShift {release:<10} {} of its own, on top of {base}",
            size(*b)
        );
    }
    let w = &args.workdir;
    println!("  where everything is");
    println!("    images (OCI layout)  {}", w.join("oci").display());
    println!("    ostree repository    {}", w.join("repo").display());
    println!(
        "    build history        {}",
        w.join("history.json").display()
    );
    println!("    run record           {}", result.run.path.display());
    if let Some(last) = result.releases.last() {
        let tag = last
            .image
            .image
            .rsplit(':')
            .next()
            .unwrap_or(&last.image.image);
        println!("  try");
        println!("    strata inspect --workdir {} {tag}", w.display());
        if let Some(qcow2) = last
            .image
            .disks
            .iter()
            .flat_map(|d| &d.artifacts)
            .find(|a| a.platform == "qemu")
        {
            // A published disk is gzipped: qemu reads it once unpacked.
            let path = qcow2.path.display().to_string();
            let disk = match path.strip_suffix(".gz") {
                Some(unpacked) => {
                    println!("    gunzip --keep {path}");
                    unpacked.to_string()
                }
                None => path,
            };
            println!("    qemu-system-x86_64 -m 1024 -nographic -snapshot -drive file={disk}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

struct LayerBytes {
    /// Base stream -> its layers' bytes.
    shared: Vec<(String, u64)>,
    /// (release, base stream, bytes of the layers its base does not have).
    per_release: Vec<(String, String, u64)>,
}

/// Each base image's layer bytes, and per release the bytes of the layers
/// that are not its base's: what each release adds to the blob store.
fn layer_bytes(r: &strata_pipeline::BuildResult) -> Result<LayerBytes> {
    let t = strata_oscontainer::TransportOptions::default();
    let info = |image: &str| -> Result<strata_oscontainer::ImageInfo> {
        let re = strata_oscontainer::ImageRef::parse(image, None)?;
        strata_oscontainer::inspect(&re, &t).with_context(|| format!("inspecting {image}"))
    };
    let mut shared = Vec::new();
    let mut layers: std::collections::BTreeMap<&str, std::collections::BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for base in &r.bases {
        let i = info(&base.image)?;
        shared.push((base.stream.clone(), i.total_size));
        layers.insert(
            &base.stream,
            i.layers.into_iter().map(|l| l.digest).collect(),
        );
    }
    let mut per_release = Vec::new();
    for rel in &r.releases {
        let ours = &layers[rel.base_stream.as_str()];
        let i = info(&rel.image.image)?;
        let own = i
            .layers
            .iter()
            .filter(|l| !ours.contains(&l.digest))
            .map(|l| l.size)
            .sum();
        per_release.push((rel.release.clone(), rel.base_stream.clone(), own));
    }
    Ok(LayerBytes {
        shared,
        per_release,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of manifests/demo is embedded: a manifest the demo
    /// includes but does not write fails only when the demo runs.
    #[test]
    fn every_demo_file_is_embedded() {
        fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, base, out);
                } else {
                    out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo");
        let mut files = Vec::new();
        walk(&demo, &demo, &mut files);
        files.sort();
        let mut embedded: Vec<String> = DEMO_MANIFESTS.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, files);
    }
}
