//! The disk stage: an image's ostree commit becomes bootable disk images
//! (qcow2, raw, 4K raw) with the OpenShift version injected, plus meta.json
//! and CoreOS stream metadata — without root, loop devices, mounts or VMs.
//!
//! [`build`] resolves the image (a workdir tag, `oci:DIR:TAG` or
//! `docker://…`) to a commit in `W/repo`, deploys it once into a sysroot in
//! a staging directory, writes the aleph file, BLS title and GRUB files,
//! then per platform partitions a plain file and writes the filesystems
//! into it at their offsets. Everything that touches the sysroot runs in a
//! child process in a user namespace ([`userns`]). Results are renamed into
//! the build's directory only when everything worked.
//!
//! Modules:
//! - [`platform`]: the platform table (kargs, format, sector size, size).
//! - [`layout`]: the GPT layout as data and its sfdisk script.
//! - [`userns`]: the namespaced worker and how its ids map onto the host's.
//! - [`deploy`]: the sysroot deployment through libostree (a worker job).
//! - [`bootloader`]: grub.cfg from BLS entries, the BIOS boot code patch.
//! - [`fs`]: mkfs.ext4/mkfs.vfat/mtools at offsets; tree walks.
//! - [`meta`]: aleph, platforms.json, meta.json images, stream metadata.
//!
//! What it must not do: depend on compose or derive (only on an image or a
//! commit), or touch the host's filesystems beyond the workdir.

pub mod bootloader;
pub mod deploy;
pub mod fs;
pub mod grub_pc;
pub mod layout;
pub mod meta;
pub mod node;
pub mod platform;
pub mod userns;

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use ostree::gio;
use ostree::prelude::*;
use sha2::{Digest, Sha256};
use strata_oscontainer::labels::{
    self, checked, label, LABEL_OPENSHIFT_VERSION, LABEL_OSNAME, LABEL_VERSION,
};
use strata_oscontainer::{ImageRef, KernelVersion, OcpVersion, OsName, TransportOptions, Version};
use strata_workdir::record::Disks;
use strata_workdir::{BuildMeta, Workdir};
use userns::{Job, Namespace};

pub use deploy::{DeployJob, Deployed};
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

/// Builds the disk images of `opts.image` for `opts.platforms`.
pub fn build(opts: &DiskOptions) -> Result<DiskResult> {
    let platforms = opts
        .platforms
        .iter()
        .map(|p| Platform::get(p))
        .collect::<Result<Vec<_>>>()?;
    if platforms.is_empty() {
        bail!("no platform given");
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
    let (mut id, imgref) = resolve(&w, opts)?;
    // The disks name the image: it must be whole. Its layers are hashed
    // beside the deployment, off the critical path.
    let verified = std::thread::spawn({
        let imgref = imgref.clone();
        move || strata_oscontainer::verify(&imgref)
    });
    if let Some(target) = &opts.target_image {
        id.image = target.clone();
    }
    let repo = open_repo(&w.repo())?;
    let epoch = match opts.source_date_epoch {
        Some(e) => e,
        None => commit_timestamp(&repo, &id.ostree_commit)?,
    };
    let kver =
        kernel_of(&repo, &id.ostree_commit).with_context(|| format!("image {}", id.image))?;
    let bios = platforms.iter().any(|p| p.sector_size == 512);
    check_boot_chain(&repo, &id.ostree_commit, bios)
        .with_context(|| format!("image {}", id.image))?;
    tracing::info!(commit = %id.ostree_commit, kernel = %kver, "deploying");

    let map = IdMap::for_this_process()?;
    if map != IdMap::Identity {
        // Named before the deployment, which would only say `fchown`.
        if let Some((path, uid, gid)) = owner_beyond(&repo, &id.ostree_commit, &map)? {
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
    let result = build_in(
        &w,
        opts,
        &id,
        &platforms,
        epoch,
        &ns,
        staging.path(),
        verified,
        &imgref,
    );
    // What is left of the sysroot after a failure may belong to ids only
    // the namespace has.
    let sysroot = staging.path().join(SYSROOT);
    if sysroot.exists() {
        if let Err(e) = ns.run::<()>(&Job::Remove { path: sysroot }) {
            tracing::warn!("removing the sysroot: {e:#}");
        }
    }
    // The rest is the user's own; copies of /boot have read-only
    // directories.
    let _ = fs::make_removable(staging.path());
    result
}

// The stage's inputs, each from a different step of `build`; a struct
// holding them would only be unpacked again here.
#[allow(clippy::too_many_arguments)]
fn build_in(
    w: &Workdir,
    opts: &DiskOptions,
    id: &Identity,
    platforms: &[&'static Platform],
    epoch: i64,
    ns: &Namespace,
    stage: &Path,
    verified: std::thread::JoinHandle<strata_oscontainer::Result<String>>,
    imgref: &ImageRef,
) -> Result<DiskResult> {
    let started = std::time::Instant::now();
    let sysroot = stage.join(SYSROOT);
    let boot = stage.join("boot");
    std::fs::create_dir_all(&sysroot)?;
    // Deployed once with the first platform's arguments; each disk's BLS
    // entries get their own platform's (as coreos-assembler does).
    let mut kargs = vec![
        format!("root=UUID={}", opts.uuids.root_fs),
        "rw".to_string(),
        "$ignition_firstboot".to_string(),
    ];
    kargs.extend(platforms[0].kargs());
    let job = DeployJob {
        sysroot: sysroot.clone(),
        boot_out: boot.clone(),
        repo: w.repo(),
        commit: id.ostree_commit.clone(),
        stateroot: id.osname.clone(),
        kargs,
        origin_image: origin_reference(&id.image),
        aleph: serde_json::to_string_pretty(&meta::aleph(id))?,
    };
    let deployed: Deployed = ns
        .run(&Job::Deploy(job))
        .with_context(|| format!("deploying {}", id.ostree_commit))?;
    let deployment = sysroot.join(&deployed.deployment);
    tracing::info!(elapsed = ?started.elapsed(), "deployed {}", deployed.deployment.display());

    // The bootloader files, from the commit's own content.
    let esp = stage.join("esp");
    fs::copy_tree_in_root(&deployment, bootloader::EFI_DIR, &esp.join("EFI"))
        .with_context(|| format!("the image has no EFI bootloader (/{})", bootloader::EFI_DIR))?;
    let names: Vec<String> = std::fs::read_dir(esp.join("EFI"))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if let Some(vendor) = bootloader::vendor_dir(&names) {
        write(
            &esp.join("EFI").join(vendor).join("grub.cfg"),
            bootloader::esp_stub().as_bytes(),
        )?;
    }
    // BIOS boots only 512-byte-sector disks.
    let bios = platforms.iter().any(|p| p.sector_size == 512);
    let (boot_img, core_img) = if bios {
        bios_grub(&deployment, &boot)?
    } else {
        (Vec::new(), Vec::new())
    };
    let reads_bls = grub_reads_bls(&deployment, &esp.join("EFI"), bios)?;
    if !reads_bls {
        tracing::warn!(
            "the image's GRUB has no blscfg: the boot menu lists this disk's deployment only, and updates a node deploys will not appear in it"
        );
    }
    let pretty = pretty_name(&deployment);

    write(
        &boot.join("coreos/platforms.json"),
        &serde_json::to_vec_pretty(&meta::platforms_json(PLATFORMS, id))?,
    )?;
    write(&boot.join("ignition.firstboot"), b"")?;
    fs::clamp_times(&esp, epoch)?;
    let root_min = layout::root_size_for(deployed.content_size);
    tracing::debug!(elapsed = ?started.elapsed(), "sysroot prepared");

    let out = stage.join("out");
    std::fs::create_dir_all(&out)?;
    // Hashing a disk costs about as much as writing it, so each disk is
    // hashed in a thread of its own while the next is written and the
    // sysroot removed; a raw disk's part before its root filesystem was
    // already hashed while the root was written (see `write_disk`).
    let mut artifacts = std::thread::scope(|scope| -> Result<Vec<Artifact>> {
        let mut hashing = Vec::new();
        for p in platforms {
            let t = std::time::Instant::now();
            let boot_p = stage.join(format!("boot-{}", p.name));
            fs::copy_tree(&boot, &boot_p)?;
            platform_boot(&boot_p, p, id, &pretty, reads_bls)?;
            let raw = stage.join(format!("{}.raw", p.name));
            let lay = layout::plan(
                p.sector_size,
                root_min,
                opts.size.or(p.fixed_size),
                &opts.uuids,
            )?;
            let converted = p.format.qemu_img_args();
            let prefix_hashed = write_disk(
                ns,
                &raw,
                &lay,
                &Sources {
                    esp: &esp,
                    boot: &boot_p,
                    root: &sysroot,
                    boot_img: &boot_img,
                    core_img: &core_img,
                    uuids: &opts.uuids,
                    epoch,
                },
                converted.is_none(),
            )?;
            let name = format!(
                "{}-{}-{}.x86_64.{}",
                id.osname,
                id.version,
                p.name,
                p.extension()
            );
            let dest = out.join(&name);
            match converted {
                None => std::fs::rename(&raw, &dest)?,
                Some(args) => {
                    strata_process::require("qemu-img")?;
                    strata_process::run(
                        Command::new("qemu-img")
                            .args(["convert", "-f", "raw"])
                            .args(args)
                            .arg(&raw)
                            .arg(&dest),
                    )?;
                    std::fs::remove_file(&raw)?;
                }
            }
            tracing::info!(platform = p.name, elapsed = ?t.elapsed(), "wrote {name}");
            let hash = scope.spawn({
                let dest = dest.clone();
                move || match prefix_hashed {
                    Some(hasher) => hasher.finish(),
                    None => hash_file(&dest),
                }
            });
            hashing.push((p, dest, hash));
        }
        // The sysroot is no longer needed: removing thousands of files
        // waits on the filesystem's journal, so it overlaps the hashing.
        let cleanup = scope.spawn(|| {
            ns.run::<()>(&Job::Remove {
                path: sysroot.clone(),
            })
        });
        let artifacts = hashing
            .into_iter()
            .map(|(p, path, hash)| {
                let (size, sha256) = hash.join().expect("the hashing thread panicked")?;
                Ok(Artifact {
                    platform: p.name.to_string(),
                    format: p.format.name().to_string(),
                    path,
                    size,
                    sha256,
                    uncompressed: None,
                })
            })
            .collect::<Result<Vec<_>>>();
        if let Ok(Err(e)) = cleanup.join() {
            tracing::warn!("removing the sysroot: {e:#}");
        }
        artifacts
    })?;

    match verified.join() {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e).with_context(|| format!("image {}", id.image)),
        Err(_) => bail!("verifying image {} panicked", id.image),
    }
    if opts.compress == Compress::Gzip {
        for a in &mut artifacts {
            let t = std::time::Instant::now();
            let mut gz = a.path.clone().into_os_string();
            gz.push(".gz");
            let gz = PathBuf::from(gz);
            let c = strata_oscontainer::gzip_file(&a.path, &gz)
                .with_context(|| format!("compressing {}", a.path.display()))?;
            if c.uncompressed_sha256 != a.sha256 {
                bail!(
                    "{} changed while it was compressed (sha256 {} then {})",
                    a.path.display(),
                    a.sha256,
                    c.uncompressed_sha256
                );
            }
            std::fs::remove_file(&a.path)?;
            tracing::info!(platform = %a.platform, elapsed = ?t.elapsed(), "compressed {}", gz.display());
            a.path = gz;
            a.uncompressed = Some(Uncompressed {
                size: c.uncompressed_size,
                sha256: c.uncompressed_sha256,
            });
            a.size = c.size;
            a.sha256 = c.sha256;
        }
    }
    // The image itself beside its disks, as coreos-assembler ships a
    // build's: an OCI archive (meta.json's `images.ostree`).
    let archive_name = format!("{}-{}-ostree.x86_64.ociarchive", id.osname, id.version);
    let archive_path = stage.join("out").join(&archive_name);
    let archive = strata_oscontainer::write_oci_archive(
        imgref,
        &archive_path,
        u64::try_from(epoch).unwrap_or(0),
    )
    .with_context(|| format!("writing {archive_name}"))?;
    let mut oci_archive = Artifact {
        platform: "ostree".into(),
        format: "ociarchive".into(),
        path: archive_path,
        size: archive.size,
        sha256: archive.sha256,
        uncompressed: None,
    };
    // Into place: artifacts, then the records' images, then stream.json.
    let build_dir = w.build_dir(&id.stream, id.version.as_str());
    std::fs::create_dir_all(&build_dir)
        .with_context(|| format!("creating {}", build_dir.display()))?;
    for a in artifacts
        .iter_mut()
        .chain(std::iter::once(&mut oci_archive))
    {
        let dest = build_dir.join(a.path.file_name().expect("named"));
        std::fs::rename(&a.path, &dest)
            .with_context(|| format!("renaming into {}", dest.display()))?;
        a.path = dest;
    }
    // What every listed disk holds: the commit, and the image it names for
    // upgrades. Disks of other platforms stay listed only when theirs is
    // the same; the files of the others go once the record no longer
    // lists them.
    let mut meta = match w.read_meta(&id.stream, id.version.as_str())? {
        Some(m) => m,
        None => foreign_record(id, &pretty, epoch),
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
    for a in artifacts.iter().chain(std::iter::once(&oci_archive)) {
        images.insert(a.platform.clone(), a.record());
    }
    stale.retain(|f| !images.values().any(|a| build_dir.join(&a.path) == *f));
    meta.disks = Some(Disks {
        ostree_commit: id.ostree_commit.clone(),
        image_reference: id.image.clone(),
        images,
        artifact_url: opts.artifact_url.clone(),
    });
    w.write_meta(&meta)?;
    for file in stale {
        if let Err(e) = std::fs::remove_file(&file) {
            tracing::warn!("removing {}: {e}", file.display());
        }
    }
    let table: Vec<(&Platform, &Artifact)> = platforms.iter().copied().zip(&artifacts).collect();
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
        &table,
        &strata_workdir::record::rfc3339(epoch),
        &location,
    );
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
        artifacts,
        oci_archive,
        stream_json: stream_path,
    })
}

/// BIOS GRUB from the image's i386-pc files, as grub2-install makes it:
/// `boot.img`, a core.img assembled from the parts whose prefix is the boot
/// partition's `grub2` directory, and the modules copied there (GRUB loads
/// all but the few in core.img from there at boot).
fn bios_grub(deployment: &Path, boot: &Path) -> Result<(Vec<u8>, Vec<u8>)> {
    let dir = grub_pc::MODULE_DIR;
    let read = |name: &str| fs::read_in_root(deployment, &format!("{dir}/{name}"));
    let boot_img = read("boot.img").with_context(|| {
        format!(
            "the image has no BIOS GRUB (/{dir}): its packages must include {}",
            grub_pc::MODULE_PACKAGE
        )
    })?;
    let prefix = format!("(,gpt{})/grub2", layout::BOOT_PARTITION);
    let core = grub_pc::core_img(read, grub_pc::CORE_MODULES, &prefix)
        .with_context(|| format!("assembling GRUB's core.img from /{dir}"))?;
    fs::copy_tree_in_root(deployment, dir, &boot.join("grub2/i386-pc"))?;
    Ok((boot_img, core))
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

/// Whether every GRUB the disks boot reads the BLS entries itself
/// (`blscfg`): the EFI payload's GRUB image, and BIOS GRUB's modules when
/// a disk boots with BIOS.
fn grub_reads_bls(deployment: &Path, esp_efi: &Path, bios: bool) -> Result<bool> {
    let mut efi = false;
    let mut stack = vec![esp_efi.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let e = e?;
            let path = e.path();
            let kind = e.file_type()?;
            if kind.is_dir() {
                stack.push(path);
            // Regular files only: a link in the image's payload may point
            // anywhere on this machine (a device that never ends, say).
            } else if !efi
                && kind.is_file()
                && path
                    .extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("efi"))
            {
                efi |= bootloader::efi_image_has_blscfg(&std::fs::read(&path)?);
            }
        }
    }
    if !efi || !bios {
        return Ok(efi);
    }
    let commands = fs::read_in_root(deployment, &format!("{}/command.lst", grub_pc::MODULE_DIR))
        .unwrap_or_default();
    Ok(bootloader::command_lst_has_blscfg(
        &String::from_utf8_lossy(&commands),
    ))
}

/// The boot filesystem of one platform: its kernel arguments and the OCP
/// version in the BLS entries, and grub.cfg (reading the entries at boot
/// when `reads_bls`, else listing them).
fn platform_boot(
    boot: &Path,
    p: &Platform,
    id: &Identity,
    pretty: &str,
    reads_bls: bool,
) -> Result<()> {
    let dir = boot.join("loader/entries");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    let mut entries = Vec::new();
    for (i, path) in names.iter().enumerate() {
        let mut e = bootloader::BlsEntry::parse(&std::fs::read_to_string(path)?);
        e.fields
            .insert("title".into(), meta::bls_title(pretty, id, i));
        if let Some(options) = e.fields.get_mut("options") {
            let kept: Vec<&str> = options
                .split_whitespace()
                .filter(|a| !a.starts_with("ignition.platform.id=") && !a.starts_with("console="))
                .collect();
            let mut new: Vec<String> = kept.iter().map(|s| s.to_string()).collect();
            new.extend(p.kargs());
            *options = new.join(" ");
        }
        write(path, e.render().as_bytes())?;
        entries.push(e);
    }
    let menu = if reads_bls {
        bootloader::Menu::Bls
    } else {
        bootloader::Menu::Entries(&entries)
    };
    write(
        &boot.join("grub2/grub.cfg"),
        bootloader::grub_cfg(p.grub_commands, menu)?.as_bytes(),
    )
}

struct Sources<'a> {
    esp: &'a Path,
    boot: &'a Path,
    root: &'a Path,
    boot_img: &'a [u8],
    core_img: &'a [u8],
    uuids: &'a Uuids,
    epoch: i64,
}

/// Partitions `raw`, writes the BIOS boot code and the three filesystems.
/// With `hash`, also returns a hasher of the disk that has read everything
/// before the root filesystem: that part is final once the others are
/// written, so it is hashed while the root filesystem is (hashing a disk
/// costs about as much as writing its root). The caller hashes the rest
/// off the critical path.
fn write_disk(
    ns: &Namespace,
    raw: &Path,
    lay: &layout::Layout,
    src: &Sources,
    hash: bool,
) -> Result<Option<FileHasher>> {
    let file = std::fs::File::create(raw).with_context(|| format!("creating {}", raw.display()))?;
    file.set_len(lay.disk_size)?;
    drop(file);
    let script = lay.sfdisk_script();
    if lay.sector_size == 512 {
        strata_process::require("sfdisk")?;
        strata_process::run_with_input(
            Command::new("sfdisk")
                .args(["--quiet", "--no-reread", "--no-tell-kernel"])
                .arg(raw),
            Some(script.as_bytes()),
        )
        .context("partitioning")?;
    } else {
        // sfdisk takes the sector size from the device (512 for a file);
        // fdisk can be told, and loads the same script with `I`.
        let script_path = raw.with_extension("sfdisk");
        write(&script_path, script.as_bytes())?;
        strata_process::require("fdisk")?;
        strata_process::run_with_input(
            Command::new("fdisk")
                .arg("--sector-size")
                .arg(lay.sector_size.to_string())
                .arg(raw),
            Some(format!("I\n{}\nw\n", script_path.display()).as_bytes()),
        )
        .context("partitioning")?;
    }
    // BIOS boot code: only for 512-byte sectors (BIOSes boot no 4Kn disks).
    if lay.sector_size == 512 {
        let bios = lay.bios_boot();
        let mut core = src.core_img.to_vec();
        core.resize(core.len().div_ceil(512) * 512, 0);
        if core.len() as u64 > bios.size {
            bail!("core.img ({} bytes) does not fit BIOS-BOOT", core.len());
        }
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(raw)?;
        let mut mbr = vec![0u8; 512];
        f.read_exact(&mut mbr)?;
        bootloader::bios_patch(&mut mbr, src.boot_img, &mut core, bios.start / 512)?;
        f.seek(SeekFrom::Start(0))?;
        f.write_all(&mbr)?;
        f.seek(SeekFrom::Start(bios.start))?;
        f.write_all(&core)?;
    }
    fs::mkfs_esp(
        raw,
        lay.esp().start,
        lay.esp().size,
        lay.sector_size,
        &src.uuids.esp_volid,
        src.esp,
        src.epoch,
    )?;
    // Reading a file moves its atime (relatime: when older than a day),
    // and mkfs.ext4 -d copies atimes: each job clamps right before its
    // copy, so an earlier platform's mkfs leaves no trace in the next one.
    let ext4 = |part: &layout::Part, label: &str, uuid: &String, source: &Path| {
        Job::Ext4(fs::Ext4 {
            disk: raw.to_path_buf(),
            offset: part.start,
            size: part.size,
            label: label.to_string(),
            uuid: uuid.clone(),
            source: source.to_path_buf(),
            epoch: src.epoch,
        })
    };
    ns.run::<()>(&ext4(lay.boot(), "boot", &src.uuids.boot_fs, src.boot))?;
    let root = ext4(lay.root(), "root", &src.uuids.root_fs, src.root);
    if !hash {
        ns.run::<()>(&root)?;
        return Ok(None);
    }
    std::thread::scope(|scope| {
        let prefix = scope.spawn(|| -> Result<FileHasher> {
            let mut h = FileHasher::open(raw)?;
            h.advance_to(lay.root().start)?;
            Ok(h)
        });
        let written = ns.run::<()>(&root);
        let hashed = prefix.join().expect("the hashing thread panicked");
        written?;
        Ok(Some(hashed?))
    })
}

/// Image → identity and the commit to deploy, in `W/repo`.
/// What the image is (its labels checked), and where it now is: a
/// registry image is pulled into the workdir's store first.
fn resolve(w: &Workdir, opts: &DiskOptions) -> Result<(Identity, ImageRef)> {
    let mut imgref = ImageRef::parse(&opts.image, Some(&w.oci()))?;
    if let ImageRef::Docker { reference } = &imgref {
        let tag: String = reference
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let tag = format!("pulled-{}", tag.trim_start_matches(['-', '.']));
        imgref = strata_oscontainer::pull(&imgref, &w.oci(), &tag, &opts.transport)
            .with_context(|| format!("pulling {}", opts.image))?;
    }
    let info = strata_oscontainer::inspect(&imgref, &opts.transport)
        .with_context(|| format!("inspecting {}", opts.image))?;
    let labels: BTreeMap<String, String> = info.labels.clone().into_iter().collect();
    // Labels are the image builder's word: each value that reaches a path,
    // a boot entry or the deployment is checked before anything is written.
    let version: Version = label(&labels, LABEL_VERSION)?
        .with_context(|| format!("image {imgref} has no {LABEL_VERSION} label"))?;
    let openshift_version: Option<OcpVersion> = label(&labels, LABEL_OPENSHIFT_VERSION)?;
    let osname: OsName = match label(&labels, LABEL_OSNAME)? {
        Some(o) => o,
        None => "rhcos".parse()?,
    };
    let history = w.history()?;
    let entry = history
        .iter()
        .rev()
        .find(|b| b.image_digest.as_deref() == Some(info.manifest_digest.as_str()));
    let repo_path = w.repo();
    if !repo_path.join("config").exists() {
        let repo = ostree::Repo::new(&gio::File::for_path(&repo_path));
        repo.create(ostree::RepoMode::BareUser, gio::Cancellable::NONE)
            .with_context(|| format!("creating {}", repo_path.display()))?;
    }
    let repo = open_repo(&repo_path)?;
    let known = entry.map(|e| e.ostree_commit.clone()).filter(|c| {
        repo.has_object(ostree::ObjectType::Commit, c, gio::Cancellable::NONE)
            .unwrap_or(false)
    });
    let commit = match known {
        Some(c) => c,
        None => {
            let mut iopts = strata_oscontainer::ImportOptions::default();
            iopts.transport = opts.transport.clone();
            iopts.reuse_base = true;
            strata_oscontainer::import(&imgref, &repo_path, &iopts)
                .with_context(|| format!("importing {imgref} into {}", repo_path.display()))?
                .commit
        }
    };
    let stream = entry
        .map(|e| e.stream.clone())
        .or_else(|| {
            // As derive names the streams: OKD's on SCOS are its own.
            let product = if osname.as_str() == "scos" {
                "okd"
            } else {
                "ocp"
            };
            openshift_version.as_ref().map(|v| format!("{product}-{v}"))
        })
        .unwrap_or_else(|| "disk".to_string());
    let id = Identity {
        version,
        openshift_version,
        image: imgref.to_string(),
        digest: info.manifest_digest.clone(),
        ostree_commit: commit,
        osname,
        labels,
        stream,
    };
    Ok((id, imgref))
}

/// `container-image-reference` for the origin file: what an ostree-ext
/// client would upgrade from. A reference already in ostree-ext's form
/// (`ostree-remote-registry:…`, `ostree-image-signed:…`) is kept.
fn origin_reference(image: &str) -> String {
    if image.starts_with("ostree-") {
        return image.to_string();
    }
    match image.strip_prefix("docker://") {
        Some(r) => format!("ostree-unverified-registry:{r}"),
        None => format!("ostree-unverified-image:{image}"),
    }
}

fn open_repo(path: &Path) -> Result<ostree::Repo> {
    let repo = ostree::Repo::new(&gio::File::for_path(path));
    repo.open(gio::Cancellable::NONE)
        .with_context(|| format!("opening the ostree repository {}", path.display()))?;
    Ok(repo)
}

fn commit_timestamp(repo: &ostree::Repo, commit: &str) -> Result<i64> {
    let v = repo
        .load_variant(ostree::ObjectType::Commit, commit)
        .with_context(|| format!("loading commit {commit}"))?;
    Ok(ostree::commit_get_timestamp(&v) as i64)
}

/// The first path of `commit` (parents before children) whose owner `map`
/// does not cover, with that owner.
fn owner_beyond(
    repo: &ostree::Repo,
    commit: &str,
    map: &IdMap,
) -> Result<Option<(String, u32, u32)>> {
    let cancel = gio::Cancellable::NONE;
    let (root, _) = repo
        .read_commit(commit, cancel)
        .with_context(|| format!("reading commit {commit}"))?;
    let attrs = "standard::name,standard::type,unix::uid,unix::gid";
    let mut stack = vec![(root, String::new())];
    while let Some((dir, path)) = stack.pop() {
        let children = dir
            .enumerate_children(attrs, gio::FileQueryInfoFlags::NOFOLLOW_SYMLINKS, cancel)
            .with_context(|| format!("listing /{path} of {commit}"))?;
        while let Some(info) = children
            .next_file(cancel)
            .with_context(|| format!("listing /{path} of {commit}"))?
        {
            let name = info.name().to_string_lossy().into_owned();
            let child = format!("{path}/{name}");
            let (uid, gid) = (
                info.attribute_uint32("unix::uid"),
                info.attribute_uint32("unix::gid"),
            );
            if !map.covers(uid, gid) {
                return Ok(Some((child, uid, gid)));
            }
            if info.file_type() == gio::FileType::Directory {
                stack.push((dir.child(&name), child));
            }
        }
    }
    Ok(None)
}

/// The boot chain's pieces, looked for in the commit before anything is
/// deployed; a missing piece names the packages that provide it on RHEL.
/// BIOS GRUB only when a disk boots with BIOS (`bios`).
fn check_boot_chain(repo: &ostree::Repo, commit: &str, bios: bool) -> Result<()> {
    let cancel = gio::Cancellable::NONE;
    let (root, _) = repo
        .read_commit(commit, cancel)
        .with_context(|| format!("reading commit {commit}"))?;
    let bios_files = format!("{}/kernel.img", grub_pc::MODULE_DIR);
    let mut pieces = vec![(
        bootloader::EFI_DIR,
        "EFI bootloader",
        bootloader::EFI_PACKAGES,
    )];
    if bios {
        pieces.push((&bios_files, "BIOS GRUB", grub_pc::MODULE_PACKAGE));
    }
    for (path, what, packages) in pieces {
        if !root.resolve_relative_path(path).query_exists(cancel) {
            bail!("commit {commit} has no {what} (/{path}): its packages must include {packages}");
        }
    }
    Ok(())
}

/// The kernel version of the commit: `/usr/lib/modules/<kver>/vmlinuz`.
fn kernel_of(repo: &ostree::Repo, commit: &str) -> Result<KernelVersion> {
    let cancel = gio::Cancellable::NONE;
    let (root, _) = repo
        .read_commit(commit, cancel)
        .with_context(|| format!("reading commit {commit}"))?;
    let modules = root.resolve_relative_path("usr/lib/modules");
    if modules.query_exists(cancel) {
        let children = modules
            .enumerate_children(
                "standard::name",
                gio::FileQueryInfoFlags::NOFOLLOW_SYMLINKS,
                cancel,
            )
            .with_context(|| format!("listing /usr/lib/modules of {commit}"))?;
        // next_file, not the iterator: an enumerator that keeps failing
        // would make a flattened iterator spin forever.
        while let Some(info) = children
            .next_file(cancel)
            .with_context(|| format!("listing /usr/lib/modules of {commit}"))?
        {
            let name = info.name();
            if modules.child(&name).child("vmlinuz").query_exists(cancel) {
                let what = format!("the kernel directory /usr/lib/modules of commit {commit}");
                return Ok(checked(&what, &name.to_string_lossy())?);
            }
        }
    }
    bail!("commit {commit} has no kernel (no /usr/lib/modules/*/vmlinuz): it cannot boot")
}

/// os-release's NAME, for boot menu titles: read inside the deployment,
/// on one line with control characters escaped.
fn pretty_name(deployment: &Path) -> String {
    for rel in ["usr/lib/os-release", "etc/os-release"] {
        if let Ok(bytes) = fs::read_in_root(deployment, rel) {
            for line in String::from_utf8_lossy(&bytes).lines() {
                if let Some(v) = line.strip_prefix("NAME=") {
                    return labels::one_line(v.trim_matches('"'));
                }
            }
        }
    }
    "CoreOS".to_string()
}

fn write(path: &Path, content: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))
}

/// sha256 of a file read front to back, in steps ([`FileHasher::advance_to`])
/// so that the part already final can be hashed while the rest is written.
/// Holes hash as the zeros they read as, without reading them.
struct FileHasher {
    file: std::fs::File,
    path: PathBuf,
    size: u64,
    pos: u64,
    h: Sha256,
}

impl FileHasher {
    const CHUNK: usize = 1 << 20;

    fn open(path: &Path) -> Result<Self> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let size = file.metadata()?.len();
        Ok(Self {
            file,
            path: path.to_path_buf(),
            size,
            pos: 0,
            h: Sha256::new(),
        })
    }

    /// Hashes the bytes up to `end` (at most the file's size).
    fn advance_to(&mut self, end: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let end = end.min(self.size);
        let reading = || format!("reading {}", self.path.display());
        let zeros = vec![0u8; Self::CHUNK];
        let mut buf = vec![0u8; Self::CHUNK];
        while self.pos < end {
            let data = match rustix::fs::seek(&self.file, rustix::fs::SeekFrom::Data(self.pos)) {
                Ok(d) => d.min(end),
                // No data after `pos`: the rest is a hole.
                Err(rustix::io::Errno::NXIO) => end,
                Err(e) => return Err(e).with_context(reading),
            };
            let mut zero = data - self.pos;
            while zero > 0 {
                let n = zero.min(Self::CHUNK as u64);
                self.h.update(&zeros[..n as usize]);
                zero -= n;
            }
            self.pos = data;
            if data == end {
                break;
            }
            let hole = rustix::fs::seek(&self.file, rustix::fs::SeekFrom::Hole(data))
                .with_context(reading)?
                .min(end);
            while self.pos < hole {
                let n = (hole - self.pos).min(Self::CHUNK as u64) as usize;
                self.file
                    .read_exact_at(&mut buf[..n], self.pos)
                    .with_context(reading)?;
                self.h.update(&buf[..n]);
                self.pos += n as u64;
            }
        }
        Ok(())
    }

    /// The size and sha256 of the whole file.
    fn finish(mut self) -> Result<(u64, String)> {
        self.advance_to(self.size)?;
        Ok((self.size, hex::encode(self.h.finalize())))
    }
}

/// The size and sha256 of a file.
fn hash_file(path: &Path) -> Result<(u64, String)> {
    FileHasher::open(path)?.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn sparse_files_hash_as_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        for (name, len, pieces) in [
            (
                "holes",
                9 << 20,
                vec![(0, &b"abc"[..]), ((5 << 20) + 3, b"xyz")],
            ),
            (
                "trailing-data",
                3 << 20,
                vec![((3 << 20) - 2, &b"end"[..2])],
            ),
            ("all-hole", 2 << 20, vec![]),
            ("empty", 0, vec![]),
        ] {
            let path = dir.path().join(name);
            let f = std::fs::File::create(&path).unwrap();
            f.set_len(len).unwrap();
            for (at, bytes) in pieces {
                f.write_all_at(bytes, at).unwrap();
            }
            let want = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
            assert_eq!(hash_file(&path).unwrap(), (len, want.clone()), "{name}");
            // In steps, cut inside data, inside holes and past the end.
            let mut h = FileHasher::open(&path).unwrap();
            for end in [1, 2 << 20, (5 << 20) + 4, 100 << 20] {
                h.advance_to(end).unwrap();
            }
            assert_eq!(h.finish().unwrap(), (len, want), "{name} in steps");
        }
    }
}
