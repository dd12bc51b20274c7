//! One raw disk: a plain file partitioned (sfdisk; fdisk for 4K sectors),
//! GRUB's BIOS code in its MBR and BIOS boot partition, and the ESP, boot
//! and root filesystems written at their offsets, the ext4 ones by the
//! namespaced worker. Where the partitions are is [`crate::layout`]'s.
//!
//! It writes that one file; it must not need root, a loop device or a
//! mount.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::hash::FileHasher;
use crate::userns::{Job, Namespace};
use crate::{bootloader, fs, layout, write, Uuids};

/// What one disk is written from: the trees of its three filesystems,
/// GRUB's BIOS code, and what makes the bytes the same every time.
pub(crate) struct Sources<'a> {
    pub(crate) esp: &'a Path,
    pub(crate) boot: &'a Path,
    pub(crate) root: Root<'a>,
    pub(crate) boot_img: &'a [u8],
    pub(crate) core_img: &'a [u8],
    pub(crate) uuids: &'a Uuids,
    pub(crate) epoch: i64,
}

/// Where a disk's root filesystem comes from.
pub(crate) enum Root<'a> {
    /// This tree (the sysroot), written as the filesystem (the `ext4` module).
    Tree(&'a Path),
    /// A disk written before whose root partition lies where this one's
    /// does and holds the same filesystem: its bytes are copied rather
    /// than made again (the root filesystem does not differ between
    /// platforms: same tree, size, label, UUID and times).
    CopyFrom(&'a Path),
    /// Already in the disk file, which exists at its size: the deployment
    /// wrote it (its sysroot in memory, see [`crate::deploy::InMemory`]).
    Written,
    /// Left out: only the part before it is read from this disk (a disk
    /// converted with another's root filesystem and what follows it).
    Elsewhere,
}

/// Partitions `raw`, writes the BIOS boot code and the three filesystems.
/// With `hash`, also returns a hasher of the disk that has read everything
/// before the root filesystem: that part is final once the others are
/// written, so it is hashed while the root filesystem is (hashing a disk
/// costs about as much as writing its root). The caller hashes the rest
/// off the critical path.
///
/// `lender` is the hasher of the disk [`Root::CopyFrom`] names, at the
/// start of its root: it is fed that root as it is copied, so the root is
/// read once for both disks' hashes.
pub(crate) fn write_disk(
    ns: &Namespace,
    raw: &Path,
    lay: &layout::Layout,
    src: &Sources,
    hash: bool,
    lender: Option<&mut FileHasher>,
) -> Result<Option<FileHasher>> {
    if !matches!(src.root, Root::Written) {
        let file =
            std::fs::File::create(raw).with_context(|| format!("creating {}", raw.display()))?;
        file.set_len(lay.disk_size)?;
        drop(file);
    } else if std::fs::metadata(raw)?.len() != lay.disk_size {
        bail!(
            "{} is not the disk its root filesystem was written for",
            raw.display()
        );
    }
    let script = lay.sfdisk_script();
    if lay.sector_size == 512 {
        strata_process::require("sfdisk")?;
        strata_process::run_with_input(
            Command::new("sfdisk")
                .args(["--quiet", "--no-reread", "--no-tell-kernel"])
                // A root filesystem may already be in place (`Root::Written`).
                .args(["--wipe", "never", "--wipe-partitions", "never"])
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
                .args(["--wipe", "never", "--wipe-partitions", "never"])
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
    // Each job clamps the times it copies as it reads them, before it
    // reads the file, so an earlier platform's copy (reading a file moves
    // its atime) leaves no trace in the next one.
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
    // A copied root is hashed as it is copied, not read back.
    if let Root::CopyFrom(from) = src.root {
        let root = lay.root();
        let mut own = match hash {
            true => {
                let mut h = FileHasher::open(raw)?;
                h.advance_to(root.start)?;
                Some(h)
            }
            false => None,
        };
        let mut hashers: Vec<&mut FileHasher> = own.iter_mut().chain(lender).collect();
        crate::dio::copy_range(from, raw, root.start, root.size, &mut hashers)?;
        return Ok(own);
    }
    if lender.is_some() {
        bail!(
            "{}: a root not copied from a disk cannot hash it",
            raw.display()
        );
    }
    let write_root = || match src.root {
        Root::Tree(tree) => ns.run::<()>(&ext4(lay.root(), "root", &src.uuids.root_fs, tree)),
        Root::CopyFrom(_) | Root::Written | Root::Elsewhere => Ok(()),
    };
    if !hash {
        write_root()?;
        return Ok(None);
    }
    std::thread::scope(|scope| {
        let prefix = scope.spawn(|| -> Result<FileHasher> {
            let mut h = FileHasher::open(raw)?;
            h.advance_to(lay.root().start)?;
            Ok(h)
        });
        let written = write_root();
        let hashed = prefix.join().expect("the hashing thread panicked");
        written?;
        Ok(Some(hashed?))
    })
}
