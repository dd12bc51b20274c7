//! Live media: the ISO and the PXE kernel, initramfs and root image of an
//! image, made from the deployment the disks are written from, so that a
//! release's live system runs its own tree (kubelet and cri-o included)
//! from memory with nothing on disk.
//!
//! - The initramfs is the image's own dracut run in the deployment (its
//!   kernel, modules and configuration, the arguments the base recorded)
//!   with strata's dracut module `strata-live` added (`crates/disk/live`):
//!   it mounts the root image and puts a tmpfs overlay on it as /sysroot;
//!   ostree-prepare-root then boots the deployment as on a disk.
//! - The root image (`rootfs.img`) is an uncompressed cpio whose first
//!   member is `root.squashfs`, the deployment's physical root: the squashfs
//!   starts 124 bytes in, so the ISO's initramfs reads it in place from the
//!   medium; PXE loads the file as a second initrd.
//! - The ISO boots BIOS (the image's i386-pc GRUB as an El Torito image and
//!   as a hybrid MBR) and UEFI (an El Torito FAT image with the image's shim
//!   and GRUB), from CD or USB; one GRUB configuration serves both. It keeps
//!   CoreOS's customisation areas: `coreos/igninfo.json` naming
//!   `images/ignition.img` (256 KiB of zeros, loaded as an initrd, where
//!   `coreos-installer iso ignition embed` writes a compressed cpio holding
//!   `config.ign`), and `coreos/kargs.json` naming the kernel arguments in
//!   the GRUB configuration, padded by a run of `#`.
//!
//! No mounts and no root: the namespaced worker runs dracut (bubblewrap)
//! and mksquashfs, xorriso writes the ISO. Times are the build's epoch.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;
use strata_oscontainer::commit_meta::{InitramfsArg, RecordedInitramfs};
use strata_process::cpio;

use crate::meta::{Artifact, Identity};
use crate::userns::{Job, Namespace};
use crate::{fs, grub_pc, hash};

/// The platform name that asks for live media.
pub const LIVE: &str = "live";

/// The live media's names in the build's record (meta.json `images`), in
/// the order a build lists them. Never compressed.
pub const IMAGES: [&str; 4] = ["live-iso", "live-kernel", "live-initramfs", "live-rootfs"];

/// The dracut module, as dracut's `--add` names it.
const MODULE: &str = "strata-live";
/// Where the module is placed in the deployment while dracut runs.
const MODULE_DIR: &str = "usr/lib/dracut/modules.d/90strata-live";
/// The module's files: name, content, mode.
const MODULE_FILES: &[(&str, &str, u32)] = &[
    (
        "module-setup.sh",
        include_str!("../live/module-setup.sh"),
        0o755,
    ),
    (
        "strata-live-generator",
        include_str!("../live/strata-live-generator"),
        0o755,
    ),
    (
        "strata-live-cmdline",
        include_str!("../live/strata-live-cmdline"),
        0o755,
    ),
    (
        "is-live-image",
        include_str!("../live/is-live-image"),
        0o755,
    ),
    (
        "strata-live-rw.service",
        include_str!("../live/strata-live-rw.service"),
        0o644,
    ),
    (
        "strata-live-ignition.service",
        include_str!("../live/strata-live-ignition.service"),
        0o644,
    ),
    (
        "ostree-prepare-root.conf",
        include_str!("../live/ostree-prepare-root.conf"),
        0o644,
    ),
    (
        "ignition-files.conf",
        include_str!("../live/ignition-files.conf"),
        0o644,
    ),
];

/// The Ignition embed area's size, as CoreOS's ISOs have it.
pub const IGNITION_AREA: usize = 256 * 1024;
/// Where the ISO's Ignition embed area is.
pub const IGNITION_IMG: &str = "images/ignition.img";
/// The GRUB configuration of the ISO (BIOS and UEFI), with the kernel
/// argument area.
pub const GRUB_CFG: &str = "boot/grub2/grub.cfg";
/// The `#` run after the kernel arguments: room for more.
const KARGS_PAD: usize = 1023;
/// What ends the kernel argument area, as coreos-installer finds it.
const KARGS_MARK: &str = "# COREOS_KARG_EMBED_AREA";
/// Where the root image's squashfs starts: after the cpio header and name.
pub const SQUASHFS_OFFSET: u64 = 124;
/// The root image's first member.
const SQUASHFS_NAME: &str = "root.squashfs";
/// BIOS GRUB's directory on the ISO (the prefix of its El Torito image).
const GRUB_PREFIX: &str = "/boot/grub2";
/// The modules of the El Torito image: the CD's filesystem, through the
/// BIOS.
const ELTORITO_MODULES: &[&str] = &["iso9660", "biosdisk"];

/// Worker job: the live initramfs, made by the image's dracut in the
/// deployment with the module added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitramfsJob {
    pub deployment: PathBuf,
    pub kver: String,
    /// The generator arguments the base recorded (checked again when the
    /// worker reads the job).
    pub args: Vec<InitramfsArg>,
    /// The initramfs to write (a directory the sandbox binds).
    pub out: PathBuf,
    pub epoch: i64,
}

/// Worker job: the squashfs of a tree, its times clamped first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SquashfsJob {
    pub source: PathBuf,
    pub out: PathBuf,
    /// `xz` or `zstd`.
    pub compression: String,
    pub epoch: i64,
}

/// Runs [`InitramfsJob`] (in the worker): the module is placed in the
/// deployment for dracut to find and removed afterwards, whatever
/// happened.
pub(crate) fn make_initramfs(job: &InitramfsJob) -> Result<()> {
    // The module goes where the image's tree says, never through a link
    // (which could lead out of the tree).
    let parent = Path::new(MODULE_DIR).parent().expect("a parent");
    let mut at = job.deployment.clone();
    for part in parent.components() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at);
        if !meta.is_ok_and(|m| m.is_dir()) {
            bail!(
                "the image's /{} is not a directory: its dracut has no modules to add strata's live module to",
                parent.display()
            );
        }
    }
    // Its times are put back afterwards: the deployment is the disks' and
    // the root image's content, the same whether live media are made or not.
    let parent_times = std::fs::symlink_metadata(&at)?;
    let dir = job.deployment.join(MODULE_DIR);
    if std::fs::symlink_metadata(&dir).is_ok() {
        bail!(
            "the image has a dracut module at /{MODULE_DIR}: strata's live module cannot be added"
        );
    }
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let made = run_dracut(job, &dir);
    let removed = std::fs::remove_dir_all(&dir);
    made?;
    removed.with_context(|| format!("removing {}", dir.display()))?;
    fs::set_times(&at, &parent_times)
}

fn run_dracut(job: &InitramfsJob, module_dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for (name, content, mode) in MODULE_FILES {
        let path = module_dir.join(name);
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))?;
    }
    let out_dir = job.out.parent().context("initramfs path")?;
    let out_name = job
        .out
        .file_name()
        .context("initramfs path")?
        .to_string_lossy();
    let mut argv = vec!["/usr/bin/dracut".to_string()];
    argv.extend(job.args.iter().map(|a| a.as_str().to_string()));
    argv.extend(
        [
            "--no-hostonly",
            "--reproducible",
            "--add",
            MODULE,
            "--tmpdir",
            "/tmp",
            "--kver",
            &job.kver,
            "--force",
        ]
        .map(String::from),
    );
    argv.push(format!("/run/strata-live/{out_name}"));
    strata_process::require("bwrap")?;
    let mut cmd = strata_process::sandbox::Sandbox::new(
        &job.deployment,
        u64::try_from(job.epoch).unwrap_or(0),
    )
    .tmpfs("/run")
    .bind(out_dir, "/run/strata-live")
    // Device nodes are appended below: the same, as root or not (in a
    // user namespace mknod fails, and dracut would leave them out).
    .setenv("DRACUT_NO_MKNOD", "1")
    .command(&argv);
    strata_process::run(&mut cmd)
        .context("the image's dracut failed to make the live initramfs")?;
    cpio::append_device_nodes(&job.out, job.epoch)
        .with_context(|| format!("appending device nodes to {}", job.out.display()))
}

/// Runs [`SquashfsJob`] (in the worker, where the tree's owners are the
/// image's own).
pub(crate) fn make_squashfs(job: &SquashfsJob) -> Result<()> {
    fs::clamp_times(&job.source, job.epoch)?;
    strata_process::require("mksquashfs")?;
    let epoch = job.epoch.to_string();
    strata_process::run(
        Command::new("mksquashfs")
            .arg(&job.source)
            .arg(&job.out)
            .args(["-noappend", "-no-progress", "-quiet", "-comp"])
            .arg(&job.compression)
            .args(["-mkfs-time", &epoch, "-all-time", &epoch])
            // It refuses both ways of setting times at once.
            .env_remove("SOURCE_DATE_EPOCH"),
    )
    .context("writing the live root image")?;
    Ok(())
}

/// What the live media are made from.
pub(crate) struct Inputs<'a> {
    pub ns: &'a Namespace<'a>,
    pub id: &'a Identity,
    /// The deployment (its tree).
    pub deployment: &'a Path,
    /// The sysroot: the root image's content.
    pub sysroot: &'a Path,
    /// The deployed /boot: its BLS entry has the image's kernel arguments.
    pub boot: &'a Path,
    /// The ESP's content (shim and GRUB).
    pub esp: &'a Path,
    /// A directory of the build's own to work in.
    pub work: &'a Path,
    /// Where the artifacts go.
    pub out: &'a Path,
    pub kver: &'a str,
    pub initramfs_args: Vec<InitramfsArg>,
    /// Boot menu title.
    pub title: String,
    /// Console kernel arguments and GRUB's console commands.
    pub console_kargs: &'a [&'a str],
    pub grub_commands: &'a [&'a str],
    pub epoch: i64,
}

/// The generator arguments a base commit recorded (none when an image
/// built elsewhere has none), checked as they are read.
pub(crate) fn recorded_initramfs_args(
    repo: &ostree::Repo,
    commit: &str,
) -> Result<Vec<InitramfsArg>> {
    let (variant, _) = repo
        .load_commit(commit)
        .with_context(|| format!("loading commit {commit}"))?;
    let recorded = RecordedInitramfs::read(&variant).with_context(|| format!("commit {commit}"))?;
    Ok(recorded.args)
}

/// Builds the four artifacts (ISO, kernel, initramfs, root image) into
/// `inputs.out`; the sysroot is left as it was (its times clamped).
pub(crate) fn build(inputs: &Inputs) -> Result<Vec<Artifact>> {
    let t = std::time::Instant::now();
    let id = inputs.id;
    let base = format!("{}-{}", id.osname, id.version);
    let names = [
        (IMAGES[0], "iso", format!("{base}-live.x86_64.iso")),
        (IMAGES[1], "kernel", format!("{base}-live-kernel-x86_64")),
        (
            IMAGES[2],
            "initramfs",
            format!("{base}-live-initramfs.x86_64.img"),
        ),
        (
            IMAGES[3],
            "rootfs",
            format!("{base}-live-rootfs.x86_64.img"),
        ),
    ];
    let path = |i: usize| inputs.out.join(&names[i].2);
    std::fs::create_dir_all(inputs.work)?;
    std::fs::create_dir_all(inputs.out)?;

    let initrd = path(2);
    inputs
        .ns
        .run::<()>(&Job::LiveInitramfs(InitramfsJob {
            deployment: inputs.deployment.to_path_buf(),
            kver: inputs.kver.to_string(),
            args: inputs.initramfs_args.clone(),
            out: initrd.clone(),
            epoch: inputs.epoch,
        }))
        .context("making the live initramfs")?;
    tracing::info!(elapsed = ?t.elapsed(), "live initramfs made");

    let squashfs = inputs.work.join(SQUASHFS_NAME);
    inputs
        .ns
        .run::<()>(&Job::Squashfs(SquashfsJob {
            source: inputs.sysroot.to_path_buf(),
            out: squashfs.clone(),
            compression: squashfs_compression(inputs.deployment, inputs.kver).to_string(),
            epoch: inputs.epoch,
        }))
        .context("making the live root image")?;
    write_rootfs(&squashfs, &path(3), inputs.epoch)?;
    std::fs::remove_file(&squashfs)?;
    tracing::info!(elapsed = ?t.elapsed(), "live root image made");

    let kernel = fs::read_in_root(
        inputs.deployment,
        &format!("usr/lib/modules/{}/vmlinuz", inputs.kver),
    )
    .context("the image's kernel")?;
    std::fs::write(path(1), kernel)?;

    let iso = inputs.work.join("iso");
    let kargs = live_kargs(inputs)?;
    let volid = volume_id(id.osname.as_str(), id.version.as_str());
    iso_tree(inputs, &iso, &volid, &kargs, [&path(1), &path(2), &path(3)])?;
    write_iso(&iso, &path(0), &volid, &inputs.title, inputs.epoch)?;
    tracing::info!(elapsed = ?t.elapsed(), "wrote {}", names[0].2);

    names
        .iter()
        .enumerate()
        .map(|(i, (platform, format, _))| {
            let (size, sha256) = hash::hash_file(&path(i))?;
            Ok(Artifact {
                platform: platform.to_string(),
                format: format.to_string(),
                path: path(i),
                size,
                sha256,
                uncompressed: None,
            })
        })
        .collect()
}

/// zstd when the image's kernel reads it (its config says so), else xz,
/// which every RHEL kernel reads.
fn squashfs_compression(deployment: &Path, kver: &str) -> &'static str {
    match fs::read_in_root(deployment, &format!("usr/lib/modules/{kver}/config")) {
        Ok(config)
            if String::from_utf8_lossy(&config)
                .lines()
                .any(|l| l == "CONFIG_SQUASHFS_ZSTD=y") =>
        {
            "zstd"
        }
        _ => "xz",
    }
}

/// The ISO's volume id: `<osname>-<version>`, at most 32 characters of
/// `[A-Za-z0-9._-]` (the initramfs finds the medium by it).
pub fn volume_id(osname: &str, version: &str) -> String {
    let name: String = format!("{osname}-{version}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.chars().take(32).collect()
}

/// The live system's kernel arguments: the image's (its BLS entry's,
/// without the disk's root, console, platform and first-boot arguments),
/// the console, and a first boot on metal, as CoreOS's live media have.
fn live_kargs(inputs: &Inputs) -> Result<Vec<String>> {
    let dir = inputs.boot.join("loader/entries");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    let Some(first) = entries.first() else {
        bail!("the deployment has no boot entry in {}", dir.display());
    };
    let entry = crate::bootloader::BlsEntry::parse(&std::fs::read_to_string(first)?);
    let mut kargs: Vec<String> = entry
        .get("options")
        .unwrap_or_default()
        .split_whitespace()
        .filter(|a| {
            !["root=", "ostree=", "console=", "ignition.platform.id="]
                .iter()
                .any(|p| a.starts_with(p))
                && !matches!(*a, "rw" | "$ignition_firstboot" | "ignition.firstboot")
        })
        .map(String::from)
        .collect();
    // They go into a GRUB configuration: nothing GRUB would read as syntax.
    if let Some(bad) = kargs.iter().find(|a| {
        !a.chars()
            .all(|c| c.is_ascii_graphic() && !"'\"\\$;{}#".contains(c))
    }) {
        bail!("the image's kernel argument {bad:?} cannot go into the live media's boot menu");
    }
    kargs.extend(inputs.console_kargs.iter().map(|s| s.to_string()));
    kargs.extend(["ignition.firstboot", "ignition.platform.id=metal"].map(String::from));
    Ok(kargs)
}

/// The ISO's tree: the PXE files, the Ignition area, GRUB for BIOS (its
/// modules and El Torito image) and UEFI (the FAT image), the GRUB
/// configuration, and CoreOS's `coreos/` metadata.
fn iso_tree(
    inputs: &Inputs,
    iso: &Path,
    volid: &str,
    kargs: &[String],
    [kernel, initrd, rootfs]: [&Path; 3],
) -> Result<()> {
    let pxe = iso.join("images/pxeboot");
    std::fs::create_dir_all(&pxe)?;
    for (from, name) in [
        (kernel, "vmlinuz"),
        (initrd, "initrd.img"),
        (rootfs, "rootfs.img"),
    ] {
        std::fs::hard_link(from, pxe.join(name))
            .or_else(|_| std::fs::copy(from, pxe.join(name)).map(|_| ()))
            .with_context(|| format!("placing {name} on the ISO"))?;
    }
    std::fs::write(iso.join(IGNITION_IMG), vec![0u8; IGNITION_AREA])?;

    // BIOS: the image's GRUB modules, and its El Torito image.
    let modules = iso
        .join(GRUB_PREFIX.trim_start_matches('/'))
        .join("i386-pc");
    fs::copy_tree_in_root(inputs.deployment, grub_pc::MODULE_DIR, &modules).with_context(|| {
        format!(
            "the image has no BIOS GRUB (/{}, {})",
            grub_pc::MODULE_DIR,
            grub_pc::MODULE_PACKAGE
        )
    })?;
    let read = |name: &str| {
        fs::read_in_root(
            inputs.deployment,
            &format!("{}/{name}", grub_pc::MODULE_DIR),
        )
    };
    let eltorito = grub_pc::eltorito_img(read, ELTORITO_MODULES, GRUB_PREFIX)
        .context("assembling BIOS GRUB's El Torito image")?;
    std::fs::write(iso.join("images/eltorito.img"), eltorito)?;

    // The menu, with the kernel argument area.
    let (cfg, area) = grub_cfg(inputs, volid, kargs);
    let cfg_path = iso.join(GRUB_CFG);
    std::fs::write(&cfg_path, &cfg)?;

    // UEFI: shim and GRUB from the image's ESP, in a FAT image.
    let efi = inputs.work.join("efiboot");
    let vendor = efi_tree(inputs.esp, &efi, volid)?;
    // GRUB booted from the CD reads its prefix on the ISO itself (from a
    // USB stick, on the FAT partition): the same stub in both.
    let stub = format!("EFI/{vendor}/grub.cfg");
    std::fs::create_dir_all(iso.join(format!("EFI/{vendor}")))?;
    std::fs::copy(efi.join(&stub), iso.join(&stub))?;
    fs::clamp_times(&efi, inputs.epoch)?;
    let size = (fs::content_size(&efi)? + (2 << 20)).div_ceil(1 << 16) << 16;
    fs::fat_image(
        &iso.join("images/efiboot.img"),
        size,
        "5354524c", // "STRL": fixed, as every input is
        &efi,
        inputs.epoch,
    )?;

    let coreos = iso.join("coreos");
    std::fs::create_dir_all(&coreos)?;
    std::fs::write(
        coreos.join("igninfo.json"),
        strata_workdir::pretty(&json!({ "file": IGNITION_IMG }))?,
    )?;
    std::fs::write(
        coreos.join("kargs.json"),
        strata_workdir::pretty(&json!({
            "default": area.default,
            "files": [{"path": GRUB_CFG, "offset": area.offset}],
            "size": area.size,
        }))?,
    )?;
    fs::clamp_times(iso, inputs.epoch)
}

/// The kernel argument area of the GRUB configuration.
#[derive(Debug, PartialEq, Eq)]
pub struct KargsArea {
    /// The arguments as written.
    pub default: String,
    /// Byte offset in the file.
    pub offset: usize,
    /// The arguments, the newline and the `#` run.
    pub size: usize,
}

/// The ISO's GRUB configuration: the console, then one entry booting the
/// live system, its kernel arguments followed by the `#` run that makes
/// their area.
fn grub_cfg(inputs: &Inputs, volid: &str, kargs: &[String]) -> (String, KargsArea) {
    let mut cfg =
        String::from("# Written by strata: the live media's boot menu (BIOS and UEFI).\n");
    for c in inputs.grub_commands {
        cfg.push_str(c);
        cfg.push('\n');
    }
    cfg.push_str("set timeout=1\n");
    cfg.push_str(&format!(
        "menuentry '{}' {{\n    linux /images/pxeboot/vmlinuz strata.live.iso={volid} ",
        inputs.title.replace('\'', "")
    ));
    let default = kargs.join(" ");
    // The volume id stays outside the area: coreos-installer rewrites the
    // area, and the medium must still be found.
    let offset = cfg.len();
    cfg.push_str(&default);
    cfg.push('\n');
    cfg.push_str(&"#".repeat(KARGS_PAD));
    cfg.push_str(KARGS_MARK);
    cfg.push('\n');
    cfg.push_str(&format!(
        "    initrd /images/pxeboot/initrd.img /{IGNITION_IMG}\n}}\n"
    ));
    let size = default.len() + 1 + KARGS_PAD;
    (
        cfg,
        KargsArea {
            default,
            offset,
            size,
        },
    )
}

/// The EFI boot image's content: the ESP's shim and GRUB with GRUB beside
/// shim on the removable-media path (shim loads `grubx64.efi` from its own
/// directory) and no fallback (on a CD it would write boot entries and
/// reset), and the vendor directory's grub.cfg finding the ISO by its
/// volume id. Answers the vendor directory's name.
fn efi_tree(esp: &Path, to: &Path, volid: &str) -> Result<String> {
    fs::copy_tree(&esp.join("EFI"), &to.join("EFI"))?;
    fs::make_removable(to)?;
    let names: Vec<String> = std::fs::read_dir(to.join("EFI"))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let Some(vendor) = crate::bootloader::vendor_dir(&names) else {
        bail!("the image's ESP has no vendor directory beside EFI/BOOT (shim and GRUB)");
    };
    let vendor_dir = to.join("EFI").join(vendor);
    let boot_dir = to.join("EFI/BOOT");
    std::fs::create_dir_all(&boot_dir)?;
    let _ = std::fs::remove_file(boot_dir.join("fbx64.efi"));
    std::fs::copy(vendor_dir.join("grubx64.efi"), boot_dir.join("grubx64.efi"))
        .context("the image's ESP has no grubx64.efi")?;
    std::fs::write(
        vendor_dir.join("grub.cfg"),
        format!(
            "# Written by strata: the live medium's configuration is on the ISO.\n\
             search --label {volid} --set root --no-floppy\n\
             set prefix=($root){GRUB_PREFIX}\n\
             configfile ($root)/{GRUB_CFG}\n"
        ),
    )?;
    Ok(vendor.to_string())
}

/// `rootfs.img`: a newc cpio with `root.squashfs` first (its data at
/// [`SQUASHFS_OFFSET`]), as the kernel unpacks an initrd and coreos-installer
/// reads the root image.
fn write_rootfs(squashfs: &Path, to: &Path, epoch: i64) -> Result<()> {
    let len = std::fs::metadata(squashfs)?.len();
    ensure!(
        len <= u64::from(u32::MAX),
        "the live root image is {len} bytes: a cpio member holds at most 4 GiB"
    );
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(to).with_context(|| format!("creating {}", to.display()))?,
    );
    let header = cpio::entry(&cpio::Entry {
        ino: 1,
        mode: 0o100_644,
        mtime: epoch,
        size: len,
        rdev: (0, 0),
        name: SQUASHFS_NAME,
    });
    debug_assert_eq!(header.len() as u64, SQUASHFS_OFFSET);
    out.write_all(&header)?;
    std::io::copy(&mut std::fs::File::open(squashfs)?, &mut out)?;
    out.write_all(&vec![0u8; cpio::pad4(len)])?;
    out.write_all(&cpio::entry(&cpio::Entry::trailer()))?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

/// xorriso's ISO: El Torito BIOS (with GRUB's boot info patched in) and
/// UEFI images, a hybrid MBR for USB and the FAT image as a partition, Rock
/// Ridge and Joliet names beside the plain ISO 9660 ones that
/// coreos-installer reads; every date the epoch.
fn write_iso(tree: &Path, out: &Path, volid: &str, title: &str, epoch: i64) -> Result<()> {
    strata_process::require("xorriso")?;
    let date = chrono::DateTime::from_timestamp(epoch, 0)
        .context("the build's epoch is not a date")?
        .format("%Y%m%d%H%M%S00")
        .to_string();
    let hybrid = tree.join(format!(
        "{}/i386-pc/boot_hybrid.img",
        GRUB_PREFIX.trim_start_matches('/')
    ));
    ensure!(
        hybrid.exists(),
        "the image's BIOS GRUB has no boot_hybrid.img ({})",
        grub_pc::MODULE_PACKAGE
    );
    let application: String = title
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(128)
        .collect();
    strata_process::run(
        Command::new("xorriso")
            .args(["-as", "mkisofs", "-quiet", "-o"])
            .arg(out)
            .args(["-V", volid, "-volset", volid, "-A", &application])
            // Rational Rock: owners root, permissions normalised, whoever
            // builds.
            .args(["-r", "-J", "-joliet-long"])
            .arg(format!("--modification-date={date}"))
            .args(["-b", "images/eltorito.img", "-c", "images/boot.cat"])
            .args(["-no-emul-boot", "-boot-load-size", "4", "-boot-info-table"])
            .arg("--grub2-boot-info")
            .arg("--grub2-mbr")
            .arg(&hybrid)
            .args([
                "-eltorito-alt-boot",
                "-e",
                "images/efiboot.img",
                "-no-emul-boot",
            ])
            .args([
                "-efi-boot-part",
                "--efi-boot-image",
                "--protective-msdos-label",
            ])
            .arg(tree)
            .env("SOURCE_DATE_EPOCH", epoch.to_string()),
    )
    .context("writing the ISO")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_squashfs_starts_where_coreos_reads_it() {
        let h = cpio::entry(&cpio::Entry {
            ino: 1,
            mode: 0o100_644,
            mtime: 0,
            size: 5,
            rdev: (0, 0),
            name: SQUASHFS_NAME,
        });
        assert_eq!(h.len() as u64, SQUASHFS_OFFSET);
        assert!(h.starts_with(b"070701"));
        assert_eq!(cpio::entry(&cpio::Entry::trailer()).len() % 4, 0);
    }

    #[test]
    fn volume_ids_are_what_the_initramfs_accepts() {
        assert_eq!(volume_id("rhcos", "413.86.1-0"), "rhcos-413.86.1-0");
        let odd = volume_id("rhcos", "413.86.2026120400000000 weird/version");
        assert_eq!(odd, "rhcos-413.86.2026120400000000_we");
        assert!(odd
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
    }
}
