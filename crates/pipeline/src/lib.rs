//! `strata build`: runs a pipeline manifest — compose the bases, derive every
//! release, build the disks, push, and record the run in a `run.json`.
//!
//! The flow of [`build`]: load the pipeline (its variables go to every stage
//! manifest) and check its platforms against the disk stage's table before
//! any work. Compose each base (a no-op when its inputs are unchanged: one
//! per RHEL line, e.g. 8.6 for OpenShift 4.12 and 9.6 for 4.19); derive each
//! base's releases from its image in one call (each release is a no-op when
//! unchanged; the changed ones install concurrently); build the
//! disks of each image whose build directory does not already hold them for
//! that commit; with `push`, copy each image to its target unless the
//! registry already has that digest; finally write the run's run.json
//! ([`record`]), a new one only when no earlier run still in the workdir
//! recorded the same (that one is handed back, the newest again).
//!
//! Modules:
//! - [`disks`]: whether an image's disks exist; building them.
//! - [`record`]: run.json, the record that ties a run together.
//!
//! What it must not do: build anything itself. Every stage is the stage
//! crate's own entry point with the same options the single commands use,
//! so `strata build` and `compose` + `derive` + `disk` by hand give the same
//! images, commits and disks. The stages hand off only image references.
//!
//! So each stage opens the workdir from its path and takes its lock for its
//! own transaction, as when run alone, and a run opens it once per stage
//! (and once for the record): opening costs a few `mkdir -p` and a
//! `realpath`. The run itself holds the workdir's lock from its first stage
//! to its record, and the stages' locks nest inside it (a lock is
//! re-entrant on its thread, see `strata_workdir::Lock`). Between stages
//! the workdir is consistent, but the run is not done with it: the image a
//! compose made is the derive's input, and a `strata prune` or a second
//! build in the gap removed objects and cache entries the next stage was
//! about to read. A second writer waits for the whole run and says whose
//! run it waits for.

pub mod disks;
pub mod housekeeping;
pub mod record;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use strata_manifest::{PipelineManifest, Vars};
use strata_oscontainer::{ImageRef, TransportOptions};

pub use disks::DisksResult;
pub use record::RunRecord;

/// How to start a worker process: a program and its leading arguments; the
/// stage appends its own (job and outcome files). Derive's and disk's
/// workers are started the same way.
pub use strata_derive::Worker;

/// Something that happened, for a progress display. The library only
/// reports; the CLI decides how to draw it (bars on a terminal, log lines
/// otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// `compose`, `derive`, `disk`, `push` or `record`.
    pub stage: &'static str,
    /// What the stage works on: a manifest (`ocp-4.13.yaml`), a stream
    /// (`ocp-4.13`) or a destination; a stage's `Done` names what its
    /// `Started` named.
    pub subject: String,
    pub state: State,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Started,
    /// Finished; `changed` false when nothing had to be done.
    Done {
        changed: bool,
    },
}

/// Receives [`Event`]s.
pub type Progress = Arc<dyn Fn(&Event) + Send + Sync>;

/// What to build.
#[non_exhaustive]
pub struct BuildOptions {
    pub pipeline: PathBuf,
    pub workdir: PathBuf,
    /// The caller's variables: over the pipeline's defaults.
    pub vars: Vars,
    /// Push each image that has a `push:` target.
    pub push: bool,
    /// For pushing (and for nothing else: a pipeline builds locally).
    pub transport: TransportOptions,
    pub workers: Workers,
    pub progress: Option<Progress>,
}

/// The programs a build starts for the work that needs a process of its
/// own.
#[derive(Debug, Clone)]
pub struct Workers {
    /// compose's package install (`strata __install-worker`).
    pub install: Worker,
    /// derive's release install (`strata __derive-worker`).
    pub derive: Worker,
    /// disk's namespaced deployment (`strata __disk-worker`).
    pub disk: Worker,
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("pipeline", &self.pipeline)
            .field("workdir", &self.workdir)
            .field("vars", &self.vars)
            .field("push", &self.push)
            .field("transport", &self.transport)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl BuildOptions {
    pub fn new(
        pipeline: impl Into<PathBuf>,
        workdir: impl Into<PathBuf>,
        workers: Workers,
    ) -> Self {
        Self {
            pipeline: pipeline.into(),
            workdir: workdir.into(),
            vars: Vars::new(),
            push: false,
            transport: TransportOptions::default(),
            workers,
            progress: None,
        }
    }
    pub fn vars(mut self, vars: Vars) -> Self {
        self.vars = vars;
        self
    }
    pub fn push(mut self, push: bool) -> Self {
        self.push = push;
        self
    }
    pub fn transport(mut self, t: TransportOptions) -> Self {
        self.transport = t;
        self
    }
    pub fn progress(mut self, p: Progress) -> Self {
        self.progress = Some(p);
        self
    }

    fn event(&self, stage: &'static str, subject: &str, state: State) {
        match &state {
            State::Started => tracing::info!("{stage} {subject}"),
            State::Done { changed: true } => tracing::info!("{stage} {subject}: done"),
            State::Done { changed: false } => {
                tracing::info!("{stage} {subject}: unchanged, skipped")
            }
        }
        if let Some(p) = &self.progress {
            p(&Event {
                stage,
                subject: subject.to_string(),
                state,
            });
        }
    }
}

/// One image of a run: built or found current.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageResult {
    /// False when the stage found its inputs unchanged and built nothing.
    pub changed: bool,
    pub stream: String,
    pub version: String,
    /// `oci:W/oci:TAG`.
    pub image: String,
    pub digest: String,
    pub ostree_commit: String,
    /// `W/builds/<stream>/<version>`.
    pub build_dir: PathBuf,
    /// None when the pipeline asks for no disks of this image.
    pub disks: Option<DisksResult>,
    /// None without `--push` or without a `push:` target.
    pub pushed: Option<Pushed>,
}

/// A derived image, with its release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseResult {
    /// `4.13`.
    pub release: String,
    /// The stream of the base it was derived from (`rhel-9.6`).
    pub base_stream: String,
    pub base_digest: String,
    #[serde(flatten)]
    pub image: ImageResult,
}

pub use strata_oscontainer::Pushed;

/// What [`build`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildResult {
    /// True when any stage built, pushed or recorded something.
    pub changed: bool,
    /// The pipeline's name.
    pub name: String,
    /// One per base manifest, in the pipeline's order.
    pub bases: Vec<ImageResult>,
    pub releases: Vec<ReleaseResult>,
    /// This run's record.
    pub run: RunRecord,
}

/// Runs the pipeline.
pub fn build(opts: &BuildOptions) -> Result<BuildResult> {
    let pipeline = PipelineManifest::load(&opts.pipeline, &opts.vars)?.manifest;
    for stage in pipeline.bases.iter().chain(&pipeline.releases) {
        for p in &stage.platforms {
            strata_disk::check_platform(p)
                .with_context(|| format!("{}: {}", opts.pipeline.display(), stage_name(stage)))?;
        }
    }

    // The caller's SOURCE_DATE_EPOCH, read once: compose sets the variable
    // in this process for librpm, and derive must not take the base's time
    // for its own (each stage defaults to its inputs' newest time, as when
    // run by hand).
    let sde: Option<u64> = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse().ok());

    check_names(&pipeline)?;
    // One writer for the whole run: no prune or other build in the gaps.
    let wd = strata_workdir::Workdir::open(&opts.workdir)?;
    let _lock = wd.lock()?;

    // Every base first (a no-op for an unchanged one), so that a broken
    // base stops the run before any release is derived.
    let mut bases: Vec<ImageResult> = Vec::new();
    for stage in &pipeline.bases {
        let subject = stage_name(stage);
        opts.event("compose", &subject, State::Started);
        let composed = strata_compose::compose(
            &strata_compose::ComposeOptions::new(
                &stage.manifest,
                &opts.workdir,
                opts.workers.install.clone(),
            )
            .vars(pipeline.line_vars(stage)?)
            .source_date_epoch(sde),
        )
        .with_context(|| format!("composing {}", stage.manifest.display()))?;
        opts.event(
            "compose",
            &subject,
            State::Done {
                changed: composed.changed,
            },
        );
        bases.push(ImageResult {
            changed: composed.changed,
            stream: composed.stream.clone(),
            version: composed.version.clone(),
            image: composed.image.clone(),
            digest: composed.digest.clone(),
            ostree_commit: composed.ostree_commit.clone(),
            build_dir: composed.build_dir.clone(),
            disks: None,
            pushed: None,
        });
    }

    // Each base's releases in one derive call (they share its tree).
    let mut derived_at: Vec<Option<ReleaseResult>> = vec![None; pipeline.releases.len()];
    for (stage, base) in pipeline.bases.iter().zip(&bases) {
        let mine: Vec<usize> = (0..pipeline.releases.len())
            .filter(|&i| pipeline.releases[i].base.as_ref() == Some(&stage.manifest))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let manifests: Vec<PathBuf> = mine
            .iter()
            .map(|&i| pipeline.releases[i].manifest.clone())
            .collect();
        // One line per release: they install side by side.
        for &i in &mine {
            opts.event("derive", &stage_name(&pipeline.releases[i]), State::Started);
        }
        let derived = strata_derive::derive(
            &strata_derive::DeriveOptions::new(
                &opts.workdir,
                &base.image,
                manifests,
                opts.workers.derive.clone(),
            )
            .vars(pipeline.line_vars(stage)?)
            .source_date_epoch(sde),
        )
        .with_context(|| format!("deriving the releases of {}", base.stream))?;
        if derived.len() != mine.len() {
            bail!(
                "derive returned {} images for {} release manifests",
                derived.len(),
                mine.len()
            );
        }
        for (d, &i) in derived.iter().zip(&mine) {
            opts.event(
                "derive",
                &stage_name(&pipeline.releases[i]),
                State::Done { changed: d.changed },
            );
            derived_at[i] = Some(ReleaseResult {
                release: d.release.clone(),
                base_stream: base.stream.clone(),
                base_digest: d.base_digest.clone(),
                image: ImageResult {
                    changed: d.changed,
                    stream: d.stream.clone(),
                    version: d.version.clone(),
                    image: d.image.clone(),
                    digest: d.digest.clone(),
                    ostree_commit: d.ostree_commit.clone(),
                    build_dir: d.build_dir.clone(),
                    disks: None,
                    pushed: None,
                },
            });
        }
    }
    let mut releases: Vec<ReleaseResult> = derived_at
        .into_iter()
        .map(|r| r.expect("every release names one of the bases (checked by the manifest)"))
        .collect();

    // Disks, then pushes: an image is pushed once everything built from it
    // locally worked.
    let mut todo: Vec<(&strata_manifest::Stage, &mut ImageResult)> =
        pipeline.bases.iter().zip(bases.iter_mut()).collect();
    todo.extend(
        pipeline
            .releases
            .iter()
            .zip(releases.iter_mut().map(|r| &mut r.image)),
    );
    let store = disks::Store {
        compress: pipeline.compress.parse()?,
        artifact_url: pipeline.artifact_url.clone(),
    };
    for (stage, image) in &mut todo {
        if stage.platforms.is_empty() {
            continue;
        }
        opts.event("disk", &image.stream, State::Started);
        let d = disks::ensure(opts, image, &stage.platforms, stage.push.as_deref(), &store)
            .with_context(|| format!("building the disks of {} {}", image.stream, image.version))?;
        opts.event("disk", &image.stream, State::Done { changed: d.changed });
        image.disks = Some(d);
    }
    if opts.push {
        for (stage, image) in &mut todo {
            let Some(dest) = &stage.push else { continue };
            opts.event("push", dest, State::Started);
            let p = push(&image.image, &image.digest, dest, &opts.transport)?;
            opts.event("push", dest, State::Done { changed: p.changed });
            image.pushed = Some(p);
        }
    }

    opts.event("record", &pipeline.name, State::Started);
    let run = record::write(&opts.workdir, &pipeline.name, &bases, &releases)?;
    opts.event(
        "record",
        &pipeline.name,
        State::Done {
            changed: run.changed,
        },
    );
    let image_changed = |i: &ImageResult| {
        i.changed
            || i.disks.as_ref().is_some_and(|d| d.changed)
            || i.pushed.as_ref().is_some_and(|p| p.changed)
    };
    let changed = run.changed
        || bases.iter().any(image_changed)
        || releases.iter().any(|r| image_changed(&r.image));
    Ok(BuildResult {
        changed,
        name: pipeline.name,
        bases,
        releases,
        run,
    })
}

/// Before any work: two bases of one stream would build into each other's
/// history, and two releases of one number on one base would derive into
/// one stream. (OpenShift and OKD of one number stand on different bases
/// and are streams of their own.) Reads only the manifests' names.
fn check_names(pipeline: &PipelineManifest) -> Result<()> {
    let line_of = |r: &strata_manifest::Stage| {
        pipeline
            .bases
            .iter()
            .find(|b| Some(&b.manifest) == r.base.as_ref())
            .expect("every release names one of the bases (checked by the manifest)")
    };
    let mut streams: BTreeMap<String, &Path> = BTreeMap::new();
    for b in &pipeline.bases {
        let name = strata_manifest::BaseManifest::load(&b.manifest, &pipeline.line_vars(b)?)?
            .manifest
            .name;
        if let Some(other) = streams.insert(name.clone(), &b.manifest) {
            bail!(
                "bases {} and {} are both named {name}: one pipeline composes each base stream once",
                other.display(),
                b.manifest.display()
            );
        }
    }
    let mut releases: BTreeMap<(PathBuf, String), &Path> = BTreeMap::new();
    for r in &pipeline.releases {
        let line = line_of(r);
        let release =
            strata_manifest::ReleaseManifest::load(&r.manifest, &pipeline.line_vars(line)?)?
                .manifest
                .release
                .to_string();
        if let Some(other) = releases.insert((line.manifest.clone(), release.clone()), &r.manifest)
        {
            bail!(
                "releases {} and {} are both {release} on base {}: they would derive into one stream",
                other.display(),
                r.manifest.display(),
                line.manifest.display()
            );
        }
    }
    Ok(())
}

fn stage_name(s: &strata_manifest::Stage) -> String {
    s.manifest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Copies `image` (whose manifest digest is `digest`) to `dest` unless the
/// registry already has that digest there.
fn push(image: &str, digest: &str, dest: &str, t: &TransportOptions) -> Result<Pushed> {
    let src = ImageRef::parse(image, None)?;
    let to = ImageRef::parse(dest, None)?;
    strata_oscontainer::push_unless_present(&src, digest, &to, t)
        .with_context(|| format!("pushing {image} to {dest}"))
}

/// `W/builds/…` relative to the builds directory, for records that must
/// not depend on where the workdir is.
pub(crate) fn relative_to_builds(workdir: &Path, path: &Path) -> String {
    let builds = std::fs::canonicalize(workdir.join("builds")).unwrap_or(workdir.join("builds"));
    path.strip_prefix(&builds)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}
