//! Plain container images: layers from directories, no base, no ostree.
//!
//! strata's own image (`make image`: a Debian userland and the strata
//! binary) is an ordinary container image, not an OS image; it is written
//! here so that it gets the same deterministic layers as every image strata
//! builds. Each layer is a directory written by the derived layers' walker
//! ([`crate::derived`]): sorted names, numeric owners, xattrs as PAX
//! records, hard links kept, mtimes clamped to SOURCE_DATE_EPOCH, a 0:0
//! character device written as a whiteout of the layers below it. Unlike a
//! derived layer, paths are written as they are (`usr/etc` stays
//! `usr/etc`), and device nodes, sockets and FIFOs are refused: a runtime
//! provides `/dev`. The config carries what a runtime starts the image
//! with (entrypoint, command, environment, working directory), its labels
//! (also the manifest's annotations), and SOURCE_DATE_EPOCH as the only
//! time, so the image depends only on the directories and the options.
//!
//! This module must not know what is in the directories.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use oci_spec::image::ConfigBuilder;
use rayon::prelude::*;
use serde::Serialize;

use crate::compress::Compression;
use crate::derived::{history, layer_entry, write_dir_layer, DerivedLayer, LayerWriting};
use crate::encapsulate::{oci_err, LayerInfo};
use crate::error::{Error, Result};
use crate::labels::rfc3339;
use crate::layout::{write_config_and_manifest, ImageDocs, Layout};

/// What a plain image runs and how it is written.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ImageOptions {
    /// The config's `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// The config's `Cmd`: the entrypoint's default arguments.
    pub cmd: Vec<String>,
    /// The config's `Env` (`NAME=value`).
    pub env: Vec<String>,
    /// The config's `WorkingDir`.
    pub working_dir: Option<String>,
    /// Labels, also written as the manifest's annotations.
    pub labels: BTreeMap<String, String>,
    /// Layer compression.
    pub compression: Compression,
    /// SOURCE_DATE_EPOCH: the config's `created`, history times, and the
    /// upper bound of tar mtimes.
    pub source_date_epoch: u64,
}

/// What [`write_image`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct PlainImage {
    /// `oci:DIR:TAG` of the image.
    pub image: String,
    /// Manifest digest.
    pub manifest_digest: String,
    /// Config digest.
    pub config_digest: String,
    /// The layers, bottom first.
    pub layers: Vec<LayerInfo>,
}

/// Writes image `tag` of the layout `oci` (created if needed) from
/// `layers`, bottom first, configured by `opts`; see the module
/// documentation. Layers are written in parallel.
pub fn write_image(
    oci: &Path,
    tag: &str,
    layers: &[DerivedLayer],
    opts: &ImageOptions,
) -> Result<PlainImage> {
    if tag.is_empty() || tag.contains('/') || tag.contains(':') {
        return Err(Error::InvalidOption(format!(
            "tag {tag:?} must be non-empty and contain no '/' or ':'"
        )));
    }
    if layers.is_empty() {
        return Err(Error::InvalidOption("an image needs a layer".into()));
    }
    for l in layers {
        if !l.dir.is_dir() {
            return Err(Error::InvalidOption(format!(
                "layer {:?}: {} is not a directory",
                l.description,
                l.dir.display()
            )));
        }
    }
    let ocidir = Layout::ocidir(oci)?;
    let how = LayerWriting {
        compression: opts.compression,
        clamp: Some(opts.source_date_epoch),
        container_view: false,
    };
    let written: Vec<Result<ocidir::Layer>> = layers
        .par_iter()
        .map(|l| write_dir_layer(&ocidir, l, how, None, None))
        .collect();
    let created = rfc3339(opts.source_date_epoch);
    let mut descriptors = Vec::new();
    let mut infos = Vec::new();
    let mut diff_ids = Vec::new();
    let mut histories = Vec::new();
    for (l, w) in layers.iter().zip(written) {
        let (desc, info) = layer_entry(l, w?)?;
        diff_ids.push(info.diff_id.clone());
        histories.push(history(l, Some(&created))?);
        descriptors.push(desc);
        infos.push(info);
    }

    let labels: HashMap<String, String> = opts.labels.clone().into_iter().collect();
    let mut run = ConfigBuilder::default().labels(labels.clone());
    if !opts.entrypoint.is_empty() {
        run = run.entrypoint(opts.entrypoint.clone());
    }
    if !opts.cmd.is_empty() {
        run = run.cmd(opts.cmd.clone());
    }
    if !opts.env.is_empty() {
        run = run.env(opts.env.clone());
    }
    if let Some(dir) = &opts.working_dir {
        run = run.working_dir(dir.clone());
    }
    let docs = ImageDocs {
        created,
        run: run.build().map_err(oci_err)?,
        diff_ids,
        history: histories,
        layers: descriptors,
        annotations: labels,
    };
    let (desc, config_desc, _) = write_config_and_manifest(&ocidir, oci, tag, docs, false)?;
    Ok(PlainImage {
        image: format!("oci:{}:{tag}", oci.display()),
        manifest_digest: desc.digest().to_string(),
        config_digest: config_desc.digest().to_string(),
        layers: infos,
    })
}
