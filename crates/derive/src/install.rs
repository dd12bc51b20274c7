//! The install stage: a [`Plan`] becomes a worker job (see [`crate::worker`])
//! that installs the release into an overlay whose lower dir is the base
//! checkout, so that the upper dir holds exactly the release's changes.
//!
//! Only the worker writes, and only into the staging directory it is
//! given; the base checkout is never written.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::os::os_release_values;
use crate::plan::Plan;
use crate::{worker, DeriveOptions};

/// A release installed over the base: its overlay's upper dir, and the
/// scriptlet failures `ignore-scripts` let through.
pub(crate) struct Built {
    pub(crate) upper: PathBuf,
    pub(crate) ignored_scriptlet_failures: Vec<String>,
    pub(crate) initramfs: worker::InitramfsRecord,
}

/// Installs the release into an overlay of the base in a worker.
/// `base_rpmdb_sqlite` is the base's rpm database in sqlite, for the install.
pub(crate) fn build_tree(
    opts: &DeriveOptions,
    p: &Plan,
    lower: &Path,
    base_rpmdb_sqlite: &Path,
    staging: &Path,
    initramfs_cache: &Path,
) -> Result<Built> {
    let upper = staging.join("upper");
    let work = staging.join("work");
    let merged = staging.join("merged");
    let scratch = staging.join("scratch");
    for d in [&upper, &work, &merged, &scratch] {
        fs::create_dir_all(d)?;
    }
    let mut install = p
        .install
        .clone()
        .expecting(p.packages.iter().map(|p| p.nevra.clone()))
        .source_date_epoch(p.sde);
    install.options.install_root = merged.clone();
    let release = p.manifest.release.to_string();
    let version = p.version.clone();
    let job = worker::Job {
        lower: lower.to_path_buf(),
        upper: upper.clone(),
        work,
        merged,
        install,
        add_files: p
            .manifest
            .add_files
            .iter()
            .map(|f| worker::FileToAdd {
                src: f.src.clone(),
                dest: f.dest.clone(),
                mode: f.mode,
            })
            .collect(),
        remove_files: p.manifest.remove_files.clone(),
        postprocess: p.manifest.postprocess.clone(),
        units: p.manifest.units.clone(),
        os_release: os_release_values(&p.manifest, &version, &release, &p.os),
        source_date_epoch: p.sde,
        initramfs_epoch: p.initramfs_epoch,
        base_rpmdb_sqlite: base_rpmdb_sqlite.to_path_buf(),
        initramfs_generator: p.initramfs_generator.clone(),
        regenerate_initramfs: p.manifest.regenerate_initramfs,
        initramfs_cache: Some(initramfs_cache.to_path_buf()),
        scratch,
    };
    tracing::info!(
        "{}: installing {} packages over the base",
        p.stream,
        p.packages.len()
    );
    let started = std::time::Instant::now();
    let done = worker::run(&opts.worker, &job, staging)?;
    tracing::debug!(elapsed = ?started.elapsed(), "{}: installed", p.stream);
    // The worker's own warnings are not shown: say it here.
    for f in &done.ignored_scriptlet_failures {
        tracing::warn!("{}: ignored (ignore-scripts): {f}", p.stream);
    }
    Ok(Built {
        upper,
        ignored_scriptlet_failures: done.ignored_scriptlet_failures,
        initramfs: done.initramfs,
    })
}
