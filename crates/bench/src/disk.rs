//! The disk benchmark (issue 6): `strata disk` for the metal platform
//! against a script doing what a user would otherwise run on the same
//! commit: `ostree admin deploy` into a fresh sysroot (in `unshare --user
//! --mount`, /boot on a tmpfs: a deployment freezes the filesystem holding
//! /boot), then sfdisk, mkfs.vfat + mcopy and `mkfs.ext4 -d` for boot and
//! root at their offsets in a disk file of the same size, then removal of
//! the scratch sysroot (strata removes its own too). The baseline
//! installs no bootloader and writes no metadata: it is the floor of the
//! work, not a complete disk. Then qemu, metal and metal4k in one `strata
//! disk` against metal alone.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::bench::Bench;
use crate::measure::{self, Composed, Run};
use crate::table::{mib, Goal, Line};

const BASELINE: &str = r#"set -eu
repo=$1 commit=$2 work=$3 disk=$4 size=$5
S=$work/sysroot
mkdir -p "$S"
unshare --user --map-root-user --mount sh -eu -c '
  S=$1; mkdir -p "$S/boot"; mount -t tmpfs tmpfs "$S/boot"
  ostree admin init-fs --modern "$S" >/dev/null
  ostree admin os-init rhcos --sysroot="$S" >/dev/null
  ostree --repo="$S/ostree/repo" pull-local "$2" "$3" >/dev/null
  ostree admin deploy --sysroot="$S" --os=rhcos --karg=rw --karg=console=ttyS0,115200n8 "$3" >/dev/null
  cp -a "$S/boot" "$4/boot"' sh "$S" "$repo" "$commit" "$work"
dep=$(ls -d "$S"/ostree/deploy/rhcos/deploy/*.0)
mkdir -p "$work/esp" && cp -r "$dep/usr/lib/bootupd/updates/EFI" "$work/esp/"
truncate -s "$size" "$disk"
printf 'label: gpt\nstart=2048, size=2048, type=21686148-6449-6E6F-744E-656564454649\nsize=260096, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\nsize=786432, type=BC13C2FF-59E6-4262-A352-B275FD6F7172\ntype=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709\n' | sfdisk --quiet "$disk"
mkfs.vfat -F 32 -s 1 -n EFI-SYSTEM --offset=4096 "$disk" 130048 >/dev/null
mcopy -s -i "$disk@@2097152" "$work/esp/EFI" ::/
rootsize=$(( (size - 1050624 * 512 - 1048576) / 4096 ))
unshare --user --map-root-user mkfs.ext4 -q -F -b 4096 -L boot -E offset=135266304 -d "$work/boot" "$disk" 98304
unshare --user --map-root-user mkfs.ext4 -q -F -b 4096 -L root -E offset=537919488 -d "$S" "$disk" "$rootsize"
du -s --apparent-size -B1 "$S" | cut -f1
rm -rf "$S" "$work/boot" "$work/esp"
"#;

/// One commit to build disks of: its workdir, image and commit.
pub struct Subject<'a> {
    pub workdir: &'a Path,
    pub image: &'a str,
    pub commit: &'a str,
}

/// Both sides on one commit, metal.
pub struct Metal {
    pub strata: Run,
    pub baseline: Run,
    /// The sysroot's files (hard links once), as the baseline's `du`
    /// counted them before removing them.
    pub content: u64,
}

/// `rounds` interleaved rounds of each side on `subject` (medians): a disk
/// build is mostly I/O, and one sample of either side moved the ratio by
/// 0.3 on a shared machine.
pub fn metal(subject: &Subject, rounds: usize, work: &Path) -> Result<Metal> {
    let (mut stratas, mut baselines) = (Vec::new(), Vec::new());
    let mut content = 0;
    for _ in 0..rounds {
        // measure::run syncs before each side: a sync() inside one of them
        // would otherwise pay for the others' writes.
        eprintln!("bench: strata disk (metal) of {}", subject.image);
        let (strata, raw) = measure::disk(subject.workdir, subject.image, "metal")?;
        stratas.push(strata);

        eprintln!("bench: baseline ostree admin deploy + sfdisk + mkfs (script)");
        if work.exists() {
            crate::scratch::set_aside(work)?;
        }
        std::fs::create_dir_all(work)?;
        let disk = work.join("disk.raw");
        let (baseline, out) = measure::run(
            Command::new("sh")
                .arg("-c")
                .arg(BASELINE)
                .arg("sh")
                .arg(subject.workdir.join("repo"))
                .arg(subject.commit)
                .arg(work)
                .arg(&disk)
                .arg(raw.to_string()),
        )?;
        baselines.push(baseline);
        content = out
            .trim()
            .parse()
            .with_context(|| format!("the baseline script printed {out:?}"))?;
        std::fs::remove_file(&disk)?;
    }
    Ok(Metal {
        strata: measure::median(stratas),
        baseline: measure::median(baselines),
        content,
    })
}

/// qemu, metal and metal4k in one `strata disk`.
pub fn all_platforms(subject: &Subject) -> Result<Run> {
    eprintln!(
        "bench: strata disk (qemu,metal,metal4k) of {}",
        subject.image
    );
    Ok(measure::disk(subject.workdir, subject.image, "qemu,metal,metal4k")?.0)
}

impl Bench<'_> {
    /// The disk lines on the first build; returns the metal measurement.
    pub fn disk(&mut self, v1: &Composed) -> Result<Metal> {
        let subject = Subject {
            workdir: &self.workdir,
            image: &v1.image,
            commit: &v1.ostree_commit,
        };
        let rounds = self.scale.rounds() as usize;
        let metal = metal(&subject, rounds, &self.dir.join("disk-work"))?;
        self.lines.push(Line::faster(
            format!(
                "disk metal ({:.0} MiB of files) vs deploy + sfdisk + mkfs, median of {rounds}",
                mib(metal.content)
            ),
            &metal.strata,
            &metal.baseline,
            Goal::AtLeast(1.5),
        ));
        let all = all_platforms(&subject)?;
        self.lines.push(Line::share(
            "disk qemu + metal + metal4k vs metal alone",
            &all,
            &metal.strata,
            Goal::AtMost(1.3),
        ));
        Ok(metal)
    }
}
