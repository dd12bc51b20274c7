//! The CoreOS GPT layout, computed as data, and the sfdisk script for it.
//!
//! BIOS-BOOT 1 MiB, EFI-SYSTEM 127 MiB, boot 384 MiB, root the rest, the
//! first partition at 1 MiB. Partition and disk GUIDs are fixed (and
//! overridable) so that the same content gives the same bytes. Pure: no I/O.

use anyhow::{bail, Result};

const MIB: u64 = 1024 * 1024;

pub const BIOS_BOOT_TYPE: &str = "21686148-6449-6E6F-744E-656564454649";
pub const ESP_TYPE: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
pub const BOOT_TYPE: &str = "BC13C2FF-59E6-4262-A352-B275FD6F7172";
pub const ROOT_TYPE: &str = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709";

/// Fixed identifiers of the disk and its filesystems.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Uuids {
    pub disk: String,
    pub bios_boot: String,
    pub esp: String,
    pub boot: String,
    pub root: String,
    /// ext4 UUID of the boot filesystem.
    pub boot_fs: String,
    /// ext4 UUID of the root filesystem (the `root=UUID=` karg).
    pub root_fs: String,
    /// FAT volume id of the ESP (8 hex digits).
    pub esp_volid: String,
}

impl Default for Uuids {
    /// Constants, like the ones CoreOS images ship with and replace on first boot.
    fn default() -> Self {
        Self {
            disk: "00000000-0000-4000-a000-000000000001".into(),
            bios_boot: "00000000-0000-4000-a000-000000000002".into(),
            esp: "00000000-0000-4000-a000-000000000003".into(),
            boot: "00000000-0000-4000-a000-000000000004".into(),
            root: "00000000-0000-4000-a000-000000000005".into(),
            boot_fs: "96d15588-3596-4b3c-adca-a2ff7279ea63".into(),
            root_fs: "910678ff-f77e-4a7d-8d53-86f2ac47a823".into(),
            esp_volid: "7b7795e7".into(),
        }
    }
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub label: &'static str,
    pub type_guid: &'static str,
    pub uuid: String,
    /// Byte offset on the disk.
    pub start: u64,
    /// Bytes.
    pub size: u64,
}

/// A planned disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub sector_size: u64,
    pub disk_size: u64,
    pub disk_uuid: String,
    /// BIOS-BOOT, EFI-SYSTEM, boot, root.
    pub parts: [Part; 4],
}

/// Space after the last partition for the backup GPT.
const TAIL: u64 = MIB;
/// Everything before root: the 1 MiB gap, BIOS-BOOT, ESP, boot.
const BEFORE_ROOT: u64 = MIB + MIB + 127 * MIB + 384 * MIB;

/// Room the root filesystem needs for `content` bytes of files: ext4
/// metadata, the journal and some headroom.
pub fn root_size_for(content: u64) -> u64 {
    round_up(content + content / 4 + 128 * MIB, MIB)
}

/// Plans the disk. With `size` the disk has exactly that size and must fit
/// `root_min` bytes of root filesystem; without, it is sized to fit.
pub fn plan(sector_size: u64, root_min: u64, size: Option<u64>, uuids: &Uuids) -> Result<Layout> {
    let needed = BEFORE_ROOT + root_min + TAIL;
    let disk_size = match size {
        Some(s) if s < needed => bail!(
            "disk size {} MiB is too small: the content needs at least {} MiB",
            s / MIB,
            needed.div_ceil(MIB)
        ),
        Some(s) => round_down(s, MIB),
        None => needed,
    };
    let part = |label, type_guid, uuid: &str, start, size| Part {
        label,
        type_guid,
        uuid: uuid.to_string(),
        start,
        size,
    };
    let root_start = BEFORE_ROOT;
    Ok(Layout {
        sector_size,
        disk_size,
        disk_uuid: uuids.disk.clone(),
        parts: [
            part("BIOS-BOOT", BIOS_BOOT_TYPE, &uuids.bios_boot, MIB, MIB),
            part("EFI-SYSTEM", ESP_TYPE, &uuids.esp, 2 * MIB, 127 * MIB),
            part("boot", BOOT_TYPE, &uuids.boot, 129 * MIB, 384 * MIB),
            part(
                "root",
                ROOT_TYPE,
                &uuids.root,
                root_start,
                disk_size - TAIL - root_start,
            ),
        ],
    })
}

/// The boot partition's number (GPT entries count from 1): BIOS GRUB's
/// prefix names it, `(,gpt3)/grub2`, as grub2-install does.
pub const BOOT_PARTITION: usize = 3;

impl Layout {
    pub fn bios_boot(&self) -> &Part {
        &self.parts[0]
    }
    pub fn esp(&self) -> &Part {
        &self.parts[1]
    }
    pub fn boot(&self) -> &Part {
        &self.parts[BOOT_PARTITION - 1]
    }
    pub fn root(&self) -> &Part {
        &self.parts[3]
    }

    /// The layout as an sfdisk script, in units of the disk's sectors.
    pub fn sfdisk_script(&self) -> String {
        let s = self.sector_size;
        let mut out = format!(
            "label: gpt\nlabel-id: {}\nunit: sectors\nsector-size: {s}\nfirst-lba: {}\n\n",
            self.disk_uuid,
            MIB / s
        );
        for p in &self.parts {
            out.push_str(&format!(
                "start={}, size={}, type={}, uuid={}, name=\"{}\"\n",
                p.start / s,
                p.size / s,
                p.type_guid,
                p.uuid,
                p.label
            ));
        }
        out
    }
}

fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

fn round_down(n: u64, to: u64) -> u64 {
    n / to * to
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_to_fit_and_fixed() {
        let l = plan(512, 200 * MIB, None, &Uuids::default()).unwrap();
        assert_eq!(l.root().start, 513 * MIB);
        assert_eq!(l.root().size, 200 * MIB);
        assert_eq!(l.disk_size, 714 * MIB);
        let l = plan(4096, 200 * MIB, Some(1024 * MIB), &Uuids::default()).unwrap();
        assert_eq!(l.root().size, (1024 - 514) * MIB);
        let err = plan(512, 200 * MIB, Some(600 * MIB), &Uuids::default()).unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
    }

    #[test]
    fn script_in_sectors() {
        let l = plan(4096, 10 * MIB, None, &Uuids::default()).unwrap();
        let s = l.sfdisk_script();
        assert!(s.contains("first-lba: 256\n"), "{s}");
        assert!(s.contains("start=256, size=256, type=21686148"), "{s}");
        assert!(s.contains("name=\"root\""), "{s}");
    }
}
