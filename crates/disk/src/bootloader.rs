//! GRUB from the commit's own content, installed the way bootupd and
//! grub-bios-setup do, and a grub.cfg generated from the BLS entries.
//!
//! The commit ships `usr/lib/bootupd/updates/EFI` (copied to the ESP) and
//! `usr/lib/grub/i386-pc` (boot.img; core.img is assembled from the rest,
//! see [`crate::grub_pc`]). GRUB finds the filesystem labelled `boot` (EFI)
//! or the boot partition (BIOS) and reads `/grub2/grub.cfg` there;
//! that file calls `blscfg` when the image's GRUB has it (RHEL's; Debian's
//! from 2.14), and is otherwise generated here from `/boot/loader/entries`.
//! Parsing and patching are pure; the caller reads and writes the files.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Result};

/// Where the commit keeps its bootloader files (relative to the deployment).
pub const EFI_DIR: &str = "usr/lib/bootupd/updates/EFI";
/// The RHEL packages whose files compose moves to [`EFI_DIR`].
pub const EFI_PACKAGES: &str = "shim-x64 and grub2-efi-x64";

/// The ESP's `EFI/<vendor>/grub.cfg`: RHEL's grubx64.efi (prefix
/// `/EFI/<vendor>`) reads it first. It finds the boot partition (by the
/// UUID in `bootuuid.cfg` once a node has written one, else by its label)
/// and reads GRUB's configuration there, as CoreOS disks do.
pub fn esp_stub() -> String {
    format!(
        "# Written by strata: GRUB's configuration is on the boot partition.\n\
         {}set prefix=($prefix)/grub2\nconfigfile $prefix/grub.cfg\nboot\n",
        find_boot_partition("prefix")
    )
}

/// GRUB script that sets `var` to the boot partition: by the UUID in the
/// `bootuuid.cfg` a node writes beside the configuration, else by the
/// partition's label, as CoreOS's configurations find it.
fn find_boot_partition(var: &str) -> String {
    format!(
        "if [ -f ${{config_directory}}/bootuuid.cfg ]; then\n\
         \x20   source ${{config_directory}}/bootuuid.cfg\n\
         fi\n\
         if [ -n \"${{BOOT_UUID}}\" ]; then\n\
         \x20   search --fs-uuid \"${{BOOT_UUID}}\" --set {var} --no-floppy\n\
         else\n\
         \x20   search --label boot --set {var} --no-floppy\n\
         fi\n"
    )
}

/// The vendor directory of an ESP's `EFI` (the first other than `BOOT`),
/// given its entries' names; `None` for a payload with only `EFI/BOOT`.
pub fn vendor_dir(names: &[String]) -> Option<&str> {
    let mut dirs: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !n.eq_ignore_ascii_case("BOOT"))
        .collect();
    dirs.sort();
    dirs.first().copied()
}

/// A Boot Loader Specification entry: `key value` lines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlsEntry {
    pub fields: BTreeMap<String, String>,
}

impl BlsEntry {
    pub fn parse(text: &str) -> BlsEntry {
        let fields = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.split_once(char::is_whitespace) {
                Some((k, v)) => (k.to_string(), v.trim().to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect();
        BlsEntry { fields }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The entry in BLS syntax, keys in the usual order.
    pub fn render(&self) -> String {
        const ORDER: &[&str] = &["title", "version", "options", "linux", "initrd"];
        let mut out = String::new();
        for k in ORDER {
            if let Some(v) = self.get(k) {
                out.push_str(&format!("{k} {v}\n"));
            }
        }
        for (k, v) in &self.fields {
            if !ORDER.contains(&k.as_str()) {
                out.push_str(&format!("{k} {v}\n"));
            }
        }
        out
    }
}

/// A path of an entry relative to the boot filesystem (ostree may write it
/// with a `/boot` prefix when /boot is not a separate filesystem).
fn on_boot_fs(path: &str) -> &str {
    match path.strip_prefix("/boot") {
        Some(rest) if rest.starts_with('/') => rest,
        _ => path,
    }
}

/// How grub.cfg makes the boot menu.
pub enum Menu<'a> {
    /// `blscfg`: GRUB reads the BLS entries at boot, so the menu is what
    /// ostree wrote last on the node (RHEL's GRUB, Debian's from 2.14).
    Bls,
    /// One menu entry per BLS entry the disk was built with, for a GRUB
    /// without `blscfg`: updates a node deploys never reach this menu.
    Entries(&'a [BlsEntry]),
}

/// grub.cfg for the boot partition, as CoreOS disks have it: the boot
/// partition as GRUB's root, consoles, the CoreOS first-boot variables
/// (`$ignition_firstboot`, which the entries' options name), the menu.
pub fn grub_cfg(grub_commands: &[&str], menu: Menu) -> Result<String> {
    let mut out = String::from(match menu {
        Menu::Bls => {
            "# Written by strata. The menu is the BLS entries in /loader/entries,\n\
             # read at boot (blscfg): it follows what ostree deploys on the node.\n"
        }
        Menu::Entries(_) => {
            "# Generated by strata from /boot/loader/entries (this GRUB has no blscfg).\n"
        }
    });
    // GRUB loaded from the ESP starts with the ESP as its root.
    out.push_str(&find_boot_partition("root"));
    out.push_str("set timeout=1\n");
    for c in grub_commands {
        out.push_str(c);
        out.push('\n');
    }
    // blscfg expands the entries' variables while it builds the menu: the
    // first-boot variable is set before.
    out.push_str(
        "set ignition_firstboot=\"\"\n\
         if [ -f \"/ignition.firstboot\" ]; then\n\
         \x20   set ignition_network_kcmdline=\"\"\n\
         \x20   source \"/ignition.firstboot\"\n\
         \x20   set ignition_firstboot=\"ignition.firstboot ${ignition_network_kcmdline}\"\n\
         fi\n",
    );
    let entries = match menu {
        Menu::Bls => {
            out.push_str("blscfg\n");
            return Ok(out);
        }
        Menu::Entries(entries) => entries,
    };
    ensure!(!entries.is_empty(), "the deployment wrote no BLS entry");
    for (i, e) in entries.iter().enumerate() {
        let (Some(linux), Some(title)) = (e.get("linux"), e.get("title")) else {
            bail!("BLS entry {i} has no linux or title line");
        };
        out.push_str(&format!(
            "menuentry '{}' --id 'ostree-{i}' {{\n    linux {} {}\n",
            title.replace('\'', ""),
            on_boot_fs(linux),
            e.get("options").unwrap_or("")
        ));
        if let Some(initrd) = e.get("initrd") {
            out.push_str(&format!("    initrd {}\n", on_boot_fs(initrd)));
        }
        out.push_str("}\n");
    }
    Ok(out)
}

/// Whether a GRUB reads BLS entries itself: its EFI image names the
/// `blscfg` command (built in, as RHEL's is), or its i386-pc `command.lst`
/// lists it (loaded on demand).
pub fn efi_image_has_blscfg(image: &[u8]) -> bool {
    image.windows(7).any(|w| w == b"blscfg\0")
}

pub fn command_lst_has_blscfg(command_lst: &str) -> bool {
    command_lst
        .lines()
        .any(|l| l.trim_start_matches('*').starts_with("blscfg:"))
}

// Offsets in GRUB's boot.img (include/grub/i386/pc/boot.h).
const BPB_START: usize = 0x3;
const BPB_END: usize = 0x5a;
const KERNEL_SECTOR: usize = 0x5c;
const BOOT_DRIVE: usize = 0x64;
const DRIVE_CHECK: usize = 0x66;
/// From here to the end of the sector: disk signature, partition table, 55AA.
const PART_START: usize = 0x1b8;
/// The first sector of core.img ends with its blocklist: start (u64),
/// len (u16), segment (u16).
const BLOCKLIST: usize = 512 - 12;
const CORE_SEGMENT: u16 = 0x820;

/// Patches `mbr` (the disk's first sector, holding the protective MBR) with
/// GRUB's `boot_img`, and `core` to be loaded from `core_sector` on, as
/// grub-bios-setup does when it embeds core.img in a BIOS boot partition:
/// the BPB and partition table are kept, the boot drive is taken from the
/// BIOS, and the blocklist names the sectors after core's first.
pub fn bios_patch(
    mbr: &mut [u8],
    boot_img: &[u8],
    core: &mut [u8],
    core_sector: u64,
) -> Result<()> {
    ensure!(mbr.len() == 512, "the MBR is one 512-byte sector");
    ensure!(
        boot_img.len() == 512,
        "boot.img is {} bytes, not 512",
        boot_img.len()
    );
    ensure!(core.len() > 512, "core.img is too small");
    let mut new = boot_img.to_vec();
    new[BPB_START..BPB_END].copy_from_slice(&mbr[BPB_START..BPB_END]);
    new[PART_START..].copy_from_slice(&mbr[PART_START..]);
    new[KERNEL_SECTOR..KERNEL_SECTOR + 8].copy_from_slice(&core_sector.to_le_bytes());
    new[BOOT_DRIVE] = 0xff;
    // A hard disk: skip the check that trusts the BIOS's drive number.
    new[DRIVE_CHECK] = 0x90;
    new[DRIVE_CHECK + 1] = 0x90;
    mbr.copy_from_slice(&new);

    let sectors = core.len().div_ceil(512) as u64;
    ensure!(sectors >= 2, "core.img has no body");
    core[BLOCKLIST..BLOCKLIST + 8].copy_from_slice(&(core_sector + 1).to_le_bytes());
    core[BLOCKLIST + 8..BLOCKLIST + 10].copy_from_slice(&((sectors - 1) as u16).to_le_bytes());
    core[BLOCKLIST + 10..BLOCKLIST + 12].copy_from_slice(&CORE_SEGMENT.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = "title Red Hat Enterprise Linux CoreOS 8.6 (Ootpa) (ostree:0)\n\
        version 1\n\
        options rw $ignition_firstboot ostree=/ostree/boot.1/rhcos/abc/0\n\
        linux /ostree/rhcos-abc/vmlinuz-6.1\n\
        initrd /boot/ostree/rhcos-abc/initramfs-6.1.img\n";

    #[test]
    fn bls_round_trip_and_grub_cfg() {
        let e = BlsEntry::parse(ENTRY);
        assert_eq!(e.render(), ENTRY);
        let entries = [e];
        let cfg = grub_cfg(&["serial --speed=115200"], Menu::Entries(&entries)).unwrap();
        assert!(cfg.contains("serial --speed=115200\n"), "{cfg}");
        assert!(
            cfg.contains("    linux /ostree/rhcos-abc/vmlinuz-6.1 rw $ignition_firstboot ostree=/ostree/boot.1/rhcos/abc/0\n"),
            "{cfg}"
        );
        assert!(
            cfg.contains("    initrd /ostree/rhcos-abc/initramfs-6.1.img\n"),
            "{cfg}"
        );
        assert!(grub_cfg(&[], Menu::Entries(&[])).is_err());
        let bls = grub_cfg(&["serial --speed=115200"], Menu::Bls).unwrap();
        assert!(bls.ends_with("fi\nblscfg\n"), "{bls}");
        assert!(!bls.contains("menuentry"), "{bls}");
        assert!(command_lst_has_blscfg("cat: cat\n*blscfg: blsuki\n"));
        assert!(!command_lst_has_blscfg("cat: cat\nblscfgx: y\n"));
        assert!(efi_image_has_blscfg(b"..blscfg\0.."));
    }

    #[test]
    fn bios_patch_keeps_the_partition_table() {
        let mut mbr = vec![0u8; 512];
        mbr[PART_START..].fill(0xee);
        let boot = vec![0x11u8; 512];
        let mut core = vec![0x22u8; 512 * 3 + 100];
        bios_patch(&mut mbr, &boot, &mut core, 2048).unwrap();
        assert_eq!(mbr[0], 0x11);
        assert_eq!(&mbr[BPB_START..BPB_END], &[0u8; BPB_END - BPB_START][..]);
        assert_eq!(
            &mbr[KERNEL_SECTOR..KERNEL_SECTOR + 8],
            &2048u64.to_le_bytes()
        );
        assert_eq!(mbr[BOOT_DRIVE], 0xff);
        assert!(mbr[PART_START..].iter().all(|b| *b == 0xee));
        assert_eq!(&core[BLOCKLIST..BLOCKLIST + 8], &2049u64.to_le_bytes());
        assert_eq!(&core[BLOCKLIST + 8..BLOCKLIST + 10], &3u16.to_le_bytes());
    }
}
