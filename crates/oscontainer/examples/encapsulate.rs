//! Encapsulates a commit and prints what was written and how long it took;
//! used to measure strata-oscontainer on real trees.
//!
//! `cargo run -p strata-oscontainer --example encapsulate -- REPO REV OCI TAG
//!  [--map TSV] [--freq TSV] [--prior LAYERMAP.json] [--save-map OUT.json]
//!  [--zstd|--none]`
//!
//! `--map` lines are `PATH<TAB>COMPONENT`, `--freq` lines
//! `COMPONENT<TAB>CHANGE_FREQUENCY` (after `--map`).

use std::time::Instant;

use strata_oscontainer::{encapsulate, Compression, ContentMap, EncapsulateOptions, LayerMap};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [repo, rev, oci, tag, rest @ ..] = args.as_slice() else {
        return Err("usage: encapsulate REPO REV OCI TAG [--map TSV] [--prior JSON] [--save-map JSON] [--zstd]".into());
    };
    let mut opts = EncapsulateOptions::default();
    opts.source_date_epoch = Some(1_796_212_800);
    let mut save = None;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--map" => {
                let mut map = ContentMap::new();
                for line in std::fs::read_to_string(it.next().ok_or("--map FILE")?)?.lines() {
                    if let Some((p, c)) = line.split_once('\t') {
                        map.assign(p, c);
                    }
                }
                opts.content = Some(map);
            }
            "--freq" => {
                let map = opts.content.get_or_insert_with(ContentMap::new);
                for line in std::fs::read_to_string(it.next().ok_or("--freq FILE")?)?.lines() {
                    if let Some((c, f)) = line.split_once('\t') {
                        map.add_component(c, f.trim().parse()?);
                    }
                }
            }
            "--prior" => {
                opts.prior = Some(LayerMap::from_json(&std::fs::read_to_string(
                    it.next().ok_or("--prior FILE")?,
                )?)?)
            }
            "--save-map" => save = Some(it.next().ok_or("--save-map FILE")?.clone()),
            "--zstd" => opts.compression = Compression::Zstd,
            "--none" => opts.compression = Compression::None,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    let start = Instant::now();
    let out = encapsulate(repo.as_ref(), rev, oci.as_ref(), tag, &opts)?;
    let secs = start.elapsed().as_secs_f64();
    let total: u64 = out.layers.iter().map(|l| l.size).sum();
    eprintln!(
        "{} layers, {:.1} MiB compressed, {secs:.1} s",
        out.layers.len(),
        total as f64 / 1048576.0
    );
    if let Some(p) = save {
        std::fs::write(p, out.layer_map.to_json())?;
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
