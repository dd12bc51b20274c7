//! The boot files, taken from the deployment's own content: the ESP's
//! EFI payload, BIOS GRUB (boot.img, core.img and its modules), whether
//! the image's GRUB reads BLS entries, and each platform's boot
//! filesystem (its BLS entries' arguments and titles, its grub.cfg).
//! [`crate::bootloader`] and [`crate::grub_pc`] do the parsing and
//! assembling; this module reads and writes the files.
//!
//! Files inside the deployment are read with `RESOLVE_IN_ROOT`
//! ([`crate::fs::read_in_root`]): it must not follow the image's links out
//! of it. It writes only into the staging directory.

use std::path::Path;

use anyhow::{Context, Result};

use crate::{bootloader, fs, grub_pc, layout, meta, write, Identity, Platform, Stage, PLATFORMS};

/// What the disks' boot files are made of, besides the staged trees.
pub(crate) struct BootFiles {
    /// GRUB's BIOS `boot.img` and assembled `core.img` (empty when no disk
    /// boots with BIOS).
    pub(crate) boot_img: Vec<u8>,
    pub(crate) core_img: Vec<u8>,
    /// Whether every GRUB the disks boot reads the BLS entries itself.
    pub(crate) reads_bls: bool,
    /// os-release's NAME, for boot menu titles.
    pub(crate) pretty: String,
}

/// The boot files every platform shares, from the deployment: the EFI
/// payload into the staged ESP (with the vendor directory's grub.cfg
/// stub), BIOS GRUB when a disk boots with BIOS, and `platforms.json` and
/// the first-boot flag into the staged /boot.
pub(crate) fn prepare(
    deployment: &Path,
    stage: &Stage,
    platforms: &[&Platform],
    id: &Identity,
    epoch: i64,
) -> Result<BootFiles> {
    let (esp, boot) = (&stage.esp, &stage.boot);
    fs::copy_tree_in_root(deployment, bootloader::EFI_DIR, &esp.join("EFI"))
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
        bios_grub(deployment, boot)?
    } else {
        (Vec::new(), Vec::new())
    };
    let reads_bls = grub_reads_bls(deployment, &esp.join("EFI"), bios)?;
    if !reads_bls {
        tracing::warn!(
            "the image's GRUB has no blscfg: the boot menu lists this disk's deployment only, and updates a node deploys will not appear in it"
        );
    }
    let pretty = pretty_name(deployment);

    write(
        &boot.join("coreos/platforms.json"),
        &serde_json::to_vec_pretty(&meta::platforms_json(PLATFORMS, id))?,
    )?;
    write(&boot.join("ignition.firstboot"), b"")?;
    fs::clamp_times(esp, epoch)?;
    Ok(BootFiles {
        boot_img,
        core_img,
        reads_bls,
        pretty,
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
pub(crate) fn platform_boot(
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

/// os-release's NAME, for boot menu titles: read inside the deployment,
/// on one line with control characters escaped.
fn pretty_name(deployment: &Path) -> String {
    for rel in ["usr/lib/os-release", "etc/os-release"] {
        if let Ok(bytes) = fs::read_in_root(deployment, rel) {
            for line in String::from_utf8_lossy(&bytes).lines() {
                if let Some(v) = line.strip_prefix("NAME=") {
                    return strata_process::text::escaped(v.trim_matches('"'));
                }
            }
        }
    }
    "CoreOS".to_string()
}
