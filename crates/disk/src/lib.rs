//! The disk stage: an image's ostree commit becomes bootable disk images
//! (qcow2, raw, 4K raw) with the OpenShift version injected, plus meta.json
//! and CoreOS stream metadata — without root, loop devices, mounts or VMs.
//!
//! [`build`] resolves the image (a workdir tag, `oci:DIR:TAG` or
//! `docker://…`) to a commit in `W/repo`, deploys it once into a sysroot
//! (in memory when nothing needs it after the first root filesystem: see
//! [`deploy::InMemory`]), writes the aleph file, BLS title and GRUB files,
//! then per platform partitions a plain file and writes the filesystems
//! into it at their offsets (the root filesystem, the same on every
//! platform, is made once and its bytes copied into the other disks, or
//! read from one by the qcow2 conversion). The image's OCI archive, which
//! is also its check, is written meanwhile.
//! Everything that touches the sysroot runs in a
//! child process in a user namespace ([`userns`]). Results are renamed into
//! the build's directory only when everything worked.
//!
//! Modules:
//! - [`platform`]: the platform table (kargs, format, sector size, size).
//! - `resolve` (private): the image to its identity and commit; the
//!   reference a node's origin names.
//! - `preflight` (private): the commit checked before anything is deployed
//!   (kernel, boot chain, owners the id map covers).
//! - [`layout`]: the GPT layout as data and its sfdisk script.
//! - [`userns`]: the namespaced worker and how its ids map onto the host's.
//! - [`deploy`]: the sysroot deployment through libostree (a worker job).
//! - `bootfiles` (private): the ESP payload, BIOS GRUB and each platform's
//!   boot filesystem, read from the deployment.
//! - [`bootloader`]: grub.cfg from BLS entries, the BIOS boot code patch.
//! - [`grub_pc`]: BIOS GRUB's core.img assembled from the image's modules.
//! - `disks` (private): every platform's disk written, converted, hashed
//!   and compressed, from the deployment's root filesystem and boot files.
//! - `raw` (private): one raw disk partitioned and its filesystems written.
//! - [`live`]: the live ISO and PXE files, from the same deployment.
//! - [`fs`]: mkfs.vfat/mtools at offsets; tree walks.
//! - `ext4` (private): an ext4 filesystem at an offset, made empty by
//!   mkfs.ext4 and filled from a tree through libext2fs.
//! - `hash` (private): a disk's sha256, in steps, holes unread.
//! - `dio` (private): disk files written and read around the page cache.
//! - [`meta`]: aleph, platforms.json, meta.json images, stream metadata.
//! - [`node`]: `strata node update|rollback` on a built raw disk.
//!
//! What it must not do: depend on compose or derive (only on an image or a
//! commit), or touch the host's filesystems beyond the workdir.

mod bootfiles;
pub mod bootloader;
pub mod deploy;
mod dio;
mod disks;
mod ext4;
pub mod fs;
pub mod grub_pc;
mod hash;
pub mod layout;
pub mod live;
pub mod meta;
pub mod node;
pub mod platform;
mod preflight;
mod raw;
mod resolve;
pub mod userns;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use strata_oscontainer::{ImageRef, TransportOptions};
use strata_workdir::record::Disks;
use strata_workdir::{BuildMeta, Workdir};
use userns::{Job, Namespace};

pub use deploy::{DeployJob, Deployed, InMemory};
pub use layout::Uuids;
pub use meta::{Artifact, Identity, Uncompressed};
pub use platform::{Format, Platform, PLATFORMS};
pub use userns::{worker_main, IdMap};

/// The staging directory's sysroot: the root filesystem's content.
const SYSROOT: &str = "sysroot";

/// What to build.
#[derive(Debug)]
#[non_exhaustive]
pub struct DiskOptions {
    pub workdir: PathBuf,
    /// A tag in `W/oci`, `oci:DIR:TAG` or `docker://HOST/NAME:TAG`.
    pub image: String,
    /// Platform names of [`PLATFORMS`].
    pub platforms: Vec<String>,
    /// How to start the deploy worker: a program that calls
    /// [`worker_main`] with the two arguments appended to this command.
    pub worker: Command,
    /// Disk size in bytes instead of content + headroom (or the platform's).
    pub size: Option<u64>,
    pub uuids: Uuids,
    /// Times are clamped to this; default: the commit's timestamp.
    pub source_date_epoch: Option<i64>,
    pub transport: TransportOptions,
    /// The reference nodes follow for upgrades, recorded in the deployment's
    /// origin and the aleph file instead of `image` (ostree-ext's
    /// `--target-imgref`): where the image is published. A local layout's
    /// reference names a path on this machine, so only with a target do two
    /// machines (or workdirs) write the same bytes.
    pub target_image: Option<String>,
    /// How the disks are stored: gzip, as published images are (their
    /// records then name the `.gz` file, with the content's size and
    /// hash), or as they are.
    pub compress: Compress,
    /// Where the build directory will be published: stream.json locations
    /// become `<url>/<stream>/<version>/x86_64/<file>` (the builds
    /// directory's layout) instead of bare file names.
    pub artifact_url: Option<String>,
}

/// How disk artifacts are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compress {
    /// As written (the default for `strata disk`: a disk to boot).
    #[default]
    None,
    /// gzip, deterministic (what RHCOS publishes: `qcow2.gz`, `raw.gz`).
    Gzip,
}

impl std::str::FromStr for Compress {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Compress::None),
            "gzip" => Ok(Compress::Gzip),
            other => bail!("compression {other:?}: expected gzip or none"),
        }
    }
}

impl DiskOptions {
    pub fn new(
        workdir: impl Into<PathBuf>,
        image: impl Into<String>,
        platforms: Vec<String>,
        worker: Command,
    ) -> Self {
        Self {
            workdir: workdir.into(),
            image: image.into(),
            platforms,
            worker,
            size: None,
            uuids: Uuids::default(),
            source_date_epoch: None,
            transport: TransportOptions::default(),
            target_image: None,
            compress: Compress::None,
            artifact_url: None,
        }
    }
    pub fn size(mut self, size: Option<u64>) -> Self {
        self.size = size;
        self
    }
    pub fn uuids(mut self, uuids: Uuids) -> Self {
        self.uuids = uuids;
        self
    }
    pub fn source_date_epoch(mut self, epoch: Option<i64>) -> Self {
        self.source_date_epoch = epoch;
        self
    }
    pub fn transport(mut self, transport: TransportOptions) -> Self {
        self.transport = transport;
        self
    }
    pub fn target_image(mut self, target: Option<String>) -> Self {
        self.target_image = target;
        self
    }
    pub fn compress(mut self, compress: Compress) -> Self {
        self.compress = compress;
        self
    }
    pub fn artifact_url(mut self, url: Option<String>) -> Self {
        self.artifact_url = url;
        self
    }
}

/// What [`build`] produced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DiskResult {
    /// The image, as a full reference.
    pub image: String,
    pub digest: String,
    pub version: String,
    pub openshift_version: Option<String>,
    /// The commit deployed (the derived commit for a derived image).
    pub ostree_commit: String,
    pub stream: String,
    /// `W/builds/<stream>/<version>`: artifacts, meta.json, stream.json.
    pub build_dir: PathBuf,
    pub artifacts: Vec<Artifact>,
    /// The image as an OCI archive (meta.json's `images.ostree`).
    pub oci_archive: Artifact,
    pub stream_json: PathBuf,
}

/// Whether `build` accepts the platform `name`: a row of [`PLATFORMS`], or
/// [`live::LIVE`] (the live ISO and PXE files).
pub fn check_platform(name: &str) -> Result<()> {
    if name == live::LIVE {
        return Ok(());
    }
    Platform::get(name).map(|_| ())
}

/// The names `platforms`' artifacts have in a build's record (meta.json
/// `images`), in the order [`build`] lists them (disks, then the live
/// media's files), each with whether `compress` applies to it (live media
/// are stored as they are).
pub fn recorded_artifacts(platforms: &[String], compress: Compress) -> Vec<(&str, bool)> {
    let gzip = compress == Compress::Gzip;
    let live = platforms.iter().any(|p| p == live::LIVE);
    platforms
        .iter()
        .map(String::as_str)
        .filter(|p| *p != live::LIVE)
        .map(|p| (p, gzip))
        .chain(
            live.then_some(live::IMAGES)
                .into_iter()
                .flatten()
                .map(|name| (name, false)),
        )
        .collect()
}

/// Builds the disk images of `opts.image` for `opts.platforms`.
pub fn build(opts: &DiskOptions) -> Result<DiskResult> {
    let live = opts.platforms.iter().any(|p| p == live::LIVE);
    let platforms = opts
        .platforms
        .iter()
        .filter(|p| *p != live::LIVE)
        .map(|p| Platform::get(p))
        .collect::<Result<Vec<_>>>()?;
    if platforms.is_empty() && !live {
        bail!("no platform given");
    }
    if opts.platforms.iter().filter(|p| *p == live::LIVE).count() > 1 {
        bail!("platform {:?} is given twice", live::LIVE);
    }
    if let Some(url) = &opts.artifact_url {
        strata_manifest::check_artifact_url(url)
            .map_err(|reason| anyhow::anyhow!("--artifact-url: {reason}"))?;
    }
    for (i, p) in platforms.iter().enumerate() {
        if platforms[..i].iter().any(|q| q.name == p.name) {
            bail!("platform {:?} is given twice", p.name);
        }
    }
    let w = Workdir::open(&opts.workdir)?;
    let _lock = w.lock()?;
    strata_oscontainer::prune_abandoned(&w.oci())?;
    let (mut id, imgref) = resolve::resolve(&w, opts)?;
    if let Some(target) = &opts.target_image {
        id.image = target.clone();
    }
    let repo = resolve::open_repo(&w.repo())?;
    let epoch = match opts.source_date_epoch {
        Some(e) => e,
        None => resolve::commit_timestamp(&repo, &id.ostree_commit)?,
    };
    let kver = preflight::kernel_of(&repo, &id.ostree_commit)
        .with_context(|| format!("image {}", id.image))?;
    // BIOS boots only 512-byte-sector disks, and live media.
    let bios = live || platforms.iter().any(|p| p.sector_size == 512);
    preflight::check_boot_chain(&repo, &id.ostree_commit, bios)
        .with_context(|| format!("image {}", id.image))?;
    tracing::info!(commit = %id.ostree_commit, kernel = %kver, "deploying");

    let map = IdMap::for_this_process()?;
    if !(matches!(map, IdMap::Identity { .. }) && map.covers_trees()) {
        // Named before the deployment, which would only say `fchown`.
        if let Some((path, uid, gid)) = preflight::owner_beyond(&repo, &id.ostree_commit, &map)? {
            bail!(
                "image {}: {path} belongs to {uid}:{gid}, which this build cannot map ({})",
                id.image,
                map.advice()
            );
        }
    }
    let staging = w.staging("disk")?;
    let ns = Namespace {
        map,
        worker: &opts.worker,
        scratch: staging.path(),
    };
    tracing::debug!(map = ?ns.map, "user namespace");
    let build = Build {
        w: &w,
        opts,
        id: &id,
        platforms: &platforms,
        // Read from the commit before anything is deployed, like the rest
        // of the preflight.
        live: if live {
            Some(LivePlan {
                kver: kver.to_string(),
                initramfs_args: live::recorded_initramfs_args(&repo, &id.ostree_commit)
                    .with_context(|| format!("image {}", id.image))?,
            })
        } else {
            None
        },
        epoch,
        ns: &ns,
        stage: Stage::new(staging.path()),
    };
    let result = build.run(&imgref);
    // What is left of the sysroot after a failure may belong to ids only
    // the namespace has.
    let sysroot = &build.stage.sysroot;
    if sysroot.exists() {
        if let Err(e) = ns.run::<()>(&Job::Remove {
            path: sysroot.clone(),
        }) {
            tracing::warn!("removing the sysroot: {e:#}");
        }
    }
    // The rest is the user's own; copies of /boot have read-only
    // directories.
    let _ = fs::make_removable(staging.path());
    result
}

/// Where a build's parts are staged, in its staging directory.
struct Stage {
    /// The staging directory itself (each platform's boot tree and raw
    /// disk).
    dir: PathBuf,
    /// The deployment's physical root: the root filesystem's content.
    sysroot: PathBuf,
    /// The sysroot's /boot (a tmpfs in the worker), copied out: what every
    /// platform's boot filesystem starts from.
    boot: PathBuf,
    /// The ESP's content.
    esp: PathBuf,
    /// The artifacts, until they go into the build's directory.
    out: PathBuf,
}

impl Stage {
    fn new(dir: &Path) -> Self {
        Stage {
            dir: dir.to_path_buf(),
            sysroot: dir.join(SYSROOT),
            boot: dir.join("boot"),
            esp: dir.join("esp"),
            out: dir.join("out"),
        }
    }
}

/// What the live media are made with, read from the commit.
struct LivePlan {
    /// The kernel version they boot.
    kver: String,
    /// The initramfs generator's arguments the base recorded.
    initramfs_args: Vec<strata_oscontainer::commit_meta::InitramfsArg>,
}

/// One build's inputs, each from a different step of [`build`], and where
/// it stages its parts: what its stages share.
struct Build<'a> {
    w: &'a Workdir,
    opts: &'a DiskOptions,
    id: &'a Identity,
    platforms: &'a [&'static Platform],
    /// Live media too.
    live: Option<LivePlan>,
    epoch: i64,
    ns: &'a Namespace<'a>,
    stage: Stage,
}

impl Build<'_> {
    /// The stages: the image's archive beside everything else; deploy,
    /// the boot files, the disks written and hashed, compression; then
    /// into place.
    fn run(&self, imgref: &ImageRef) -> Result<DiskResult> {
        let started = std::time::Instant::now();
        std::fs::create_dir_all(&self.stage.out)?;
        std::thread::scope(|scope| {
            // The disks name the image: it must be whole. Its archive
            // holds every blob to its digest as it copies it, so writing
            // it is that check too, and both happen beside the
            // deployment, off the critical path (reading and hashing the
            // layers once for the check and again for the archive was
            // ~10 s at the end of an RHCOS-sized build).
            let archive = scope.spawn(|| {
                let a = self.write_archive(imgref);
                tracing::debug!(elapsed = ?started.elapsed(), "image archived and verified");
                a
            });
            let disks = self.write_all(started);
            let oci_archive = match archive.join() {
                Ok(a) => a.with_context(|| format!("image {}", self.id.image)),
                Err(_) => bail!("archiving image {} panicked", self.id.image),
            };
            let (pretty, artifacts, live) = disks?;
            let oci_archive = oci_archive?;
            tracing::debug!(elapsed = ?started.elapsed(), "disks and archive written");
            self.move_into_place(&pretty, artifacts, live, oci_archive)
        })
    }

    /// Deploy, the boot files, the live media, the disks written, hashed
    /// and (when asked) compressed: their artifacts, and os-release's
    /// name for the records.
    fn write_all(
        &self,
        started: std::time::Instant,
    ) -> Result<(String, Vec<Artifact>, Vec<Artifact>)> {
        std::fs::create_dir_all(&self.stage.sysroot)?;
        let (deployed, in_memory) = self.deploy()?;
        // A sysroot in memory is gone: what the boot files are read from
        // was copied out of it.
        let deployment = match &in_memory {
            Some(mem) => mem.boot_sources.clone(),
            None => self.stage.sysroot.join(&deployed.deployment),
        };
        tracing::info!(elapsed = ?started.elapsed(), "deployed {}", deployed.deployment.display());

        // The bootloader files, from the commit's own content.
        let files = bootfiles::prepare(
            &deployment,
            &self.stage,
            self.platforms,
            self.id,
            self.epoch,
        )?;
        let root_min = layout::root_size_for(deployed.content_size);
        tracing::debug!(elapsed = ?started.elapsed(), "sysroot prepared");

        // Before the disks, which remove the sysroot once written.
        let live = match &self.live {
            Some(plan) => self.write_live(&deployment, plan, &files.pretty)?,
            None => Vec::new(),
        };
        let mut artifacts = self.write_disks(&files, root_min, in_memory.is_some(), started)?;
        // Live media are published as they are (CoreOS's skip-compression).
        if self.opts.compress == Compress::Gzip {
            disks::compress(&mut artifacts)?;
        }
        Ok((files.pretty, artifacts, live))
    }

    /// The live ISO and PXE files, from the deployment and the sysroot.
    fn write_live(
        &self,
        deployment: &Path,
        plan: &LivePlan,
        pretty: &str,
    ) -> Result<Vec<Artifact>> {
        let metal = Platform::get("metal")?;
        live::build(&live::Inputs {
            ns: self.ns,
            id: self.id,
            deployment,
            sysroot: &self.stage.sysroot,
            boot: &self.stage.boot,
            esp: &self.stage.esp,
            work: &self.stage.dir.join("live"),
            out: &self.stage.out,
            kver: &plan.kver,
            initramfs_args: plan.initramfs_args.clone(),
            title: meta::live_title(pretty, self.id),
            console_kargs: metal.console_kargs,
            grub_commands: metal.grub_commands,
            epoch: self.epoch,
        })
    }

    /// Deploys the commit into the staged sysroot, once, with the first
    /// platform's arguments; each disk's BLS entries get their own
    /// platform's (as coreos-assembler does).
    /// The sysroot is in memory when the answer carries [`InMemory`]
    /// (see [`Build::in_memory`]).
    fn deploy(&self) -> Result<(Deployed, Option<InMemory>)> {
        let (opts, id) = (self.opts, self.id);
        let mut kargs = vec![
            format!("root=UUID={}", opts.uuids.root_fs),
            "rw".to_string(),
            "$ignition_firstboot".to_string(),
        ];
        // Live media replace these with their own.
        let first = match self.platforms.first() {
            Some(p) => p,
            None => Platform::get("metal")?,
        };
        kargs.extend(first.kargs());
        let job = DeployJob {
            sysroot: self.stage.sysroot.clone(),
            boot_out: self.stage.boot.clone(),
            repo: self.w.repo(),
            commit: id.ostree_commit.clone(),
            stateroot: id.osname.clone(),
            kargs,
            origin_image: resolve::origin_reference(&id.image),
            aleph: serde_json::to_string_pretty(&meta::aleph(id))?,
            in_memory: self.in_memory(),
        };
        let deploying = || format!("deploying {}", id.ostree_commit);
        match self.ns.run(&Job::Deploy(job.clone())) {
            Ok(deployed) => Ok((deployed, job.in_memory)),
            // The content did not fit the memory it was given: on disk.
            Err(e) if job.in_memory.is_some() && format!("{e:#}").contains("No space left") => {
                tracing::warn!("the sysroot did not fit in memory, deploying it on disk: {e:#}");
                for leftover in [&self.stage.sysroot, &self.stage.boot] {
                    self.ns.run::<()>(&Job::Remove {
                        path: leftover.clone(),
                    })?;
                }
                std::fs::create_dir_all(&self.stage.sysroot)?;
                let job = DeployJob {
                    in_memory: None,
                    ..job
                };
                let deployed = self.ns.run(&Job::Deploy(job)).with_context(deploying)?;
                Ok((deployed, None))
            }
            Err(e) => Err(e).with_context(deploying),
        }
    }

    /// Whether the sysroot is deployed in memory ([`InMemory`]), and
    /// where: when nothing needs it after its first disk's root
    /// filesystem (no live media, every disk's root partition the same)
    /// and half the memory available can hold it.
    fn in_memory(&self) -> Option<InMemory> {
        let size_of = |p: &Platform| self.opts.size.or(p.fixed_size);
        let first = *self.write_order().first()?;
        if self.live.is_some() || self.platforms.iter().any(|p| size_of(p) != size_of(first)) {
            return None;
        }
        let available = memory_available()?;
        Some(InMemory {
            limit: available / 2,
            disk: self.stage.dir.join(format!("{}.raw", first.name)),
            sector_size: first.sector_size,
            size: size_of(first),
            root_uuid: self.opts.uuids.root_fs.clone(),
            epoch: self.epoch,
            boot_sources: self.stage.dir.join("boot-sources"),
        })
    }

    /// The image itself beside its disks, as coreos-assembler ships a
    /// build's: an OCI archive (meta.json's `images.ostree`).
    fn write_archive(&self, imgref: &ImageRef) -> Result<Artifact> {
        let id = self.id;
        let archive_name = format!("{}-{}-ostree.x86_64.ociarchive", id.osname, id.version);
        let archive_path = self.stage.out.join(&archive_name);
        let archive = strata_oscontainer::write_oci_archive(
            imgref,
            &archive_path,
            u64::try_from(self.epoch).unwrap_or(0),
        )
        .with_context(|| format!("writing {archive_name}"))?;
        Ok(Artifact {
            platform: meta::ARCHIVE_IMAGE.into(),
            format: "ociarchive".into(),
            path: archive_path,
            size: archive.size,
            sha256: archive.sha256,
            uncompressed: None,
        })
    }

    /// Into place: artifacts, then the records' images, then stream.json.
    fn move_into_place(
        &self,
        pretty: &str,
        mut artifacts: Vec<Artifact>,
        mut live: Vec<Artifact>,
        mut oci_archive: Artifact,
    ) -> Result<DiskResult> {
        let (w, opts, id, epoch) = (self.w, self.opts, self.id, self.epoch);
        let build_dir = w.build_dir(&id.stream, id.version.as_str());
        std::fs::create_dir_all(&build_dir)
            .with_context(|| format!("creating {}", build_dir.display()))?;
        for a in artifacts
            .iter_mut()
            .chain(live.iter_mut())
            .chain(std::iter::once(&mut oci_archive))
        {
            let dest = build_dir.join(a.path.file_name().expect("named"));
            std::fs::rename(&a.path, &dest)
                .with_context(|| format!("renaming into {}", dest.display()))?;
            a.path = dest;
        }
        // What every listed disk holds: the commit, and the image it names
        // for upgrades. Disks of other platforms stay listed only when
        // theirs is the same; the files of the others go once the record
        // no longer lists them.
        let mut meta = match w.read_meta(&id.stream, id.version.as_str())? {
            Some(m) => m,
            None => foreign_record(id, pretty, epoch),
        };
        let mut images = BTreeMap::new();
        let mut stale: Vec<PathBuf> = Vec::new();
        if let Some(old) = meta.disks.take() {
            // Every file the record listed; those the new record lists too
            // are kept below (a platform rebuilt compressed leaves no
            // uncompressed file behind, and the other way round).
            stale = old
                .images
                .values()
                .filter(|a| !a.path.contains('/'))
                .map(|a| build_dir.join(&a.path))
                .collect();
            if old.ostree_commit == id.ostree_commit && old.image_reference == id.image {
                images = old.images;
            }
        }
        for a in artifacts
            .iter()
            .chain(&live)
            .chain(std::iter::once(&oci_archive))
        {
            images.insert(a.platform.clone(), a.record());
        }
        stale.retain(|f| !images.values().any(|a| build_dir.join(&a.path) == *f));
        let disks = Disks {
            ostree_commit: id.ostree_commit.clone(),
            image_reference: id.image.clone(),
            images,
            artifact_url: opts.artifact_url.clone(),
        };
        // stream.json lists what the record lists, not only this run's
        // artifacts: both come from one record, so they cannot disagree.
        let location = |file: &str| match &opts.artifact_url {
            Some(url) => format!(
                "{}/{}/{}/{}/{file}",
                url.trim_end_matches('/'),
                id.stream,
                id.version,
                strata_workdir::record::ARCH
            ),
            None => file.to_string(),
        };
        let stream = meta::stream_json(
            id,
            &disks,
            &strata_workdir::record::rfc3339(epoch),
            &location,
        )?;
        meta.disks = Some(disks);
        w.write_meta(&meta)?;
        for file in stale {
            if let Err(e) = std::fs::remove_file(&file) {
                tracing::warn!("removing {}: {e}", file.display());
            }
        }
        let stream_path = build_dir.join("stream.json");
        strata_workdir::write_atomic(&stream_path, &strata_workdir::pretty(&stream)?)?;

        Ok(DiskResult {
            image: id.image.clone(),
            digest: id.digest.clone(),
            version: id.version.to_string(),
            openshift_version: id.openshift_version.as_ref().map(|v| v.to_string()),
            ostree_commit: id.ostree_commit.clone(),
            stream: id.stream.clone(),
            build_dir,
            artifacts: artifacts.into_iter().chain(live).collect(),
            oci_archive,
            stream_json: stream_path,
        })
    }
}

/// The record of an image built elsewhere (no compose or derive of this
/// workdir recorded it): what its labels say.
fn foreign_record(id: &Identity, pretty_name: &str, epoch: i64) -> BuildMeta {
    BuildMeta {
        stream: id.stream.clone(),
        version: id.version.to_string(),
        name: id.osname.as_str().to_string(),
        summary: match &id.openshift_version {
            Some(v) => format!("{pretty_name} {v}"),
            None => pretty_name.to_string(),
        },
        ostree_commit: id.ostree_commit.clone(),
        source_date_epoch: u64::try_from(epoch).unwrap_or(0),
        image_digest: Some(id.digest.clone()),
        ..BuildMeta::default()
    }
}

/// MemAvailable of /proc/meminfo, in bytes.
fn memory_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

fn write(path: &Path, content: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))
}
