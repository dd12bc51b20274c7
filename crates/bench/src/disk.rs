//! The disk benchmark (issue 6): `strata disk` for the metal platform
//! against a script doing what a user would otherwise run on the same
//! commit: `ostree admin deploy` into a fresh sysroot (in `unshare --user
//! --mount`, /boot on a tmpfs: a deployment freezes the filesystem holding
//! /boot), then sfdisk, mkfs.vfat + mcopy and `mkfs.ext4 -d` for boot and
//! root at their offsets in a disk file of the same size, then removal of
//! the scratch sysroot (strata removes its own too). The baseline
//! installs no bootloader and writes no metadata: it is the floor of the
//! work, not a complete disk. Run on a larger and a smaller commit, with
//! strata's time per GB of content on each.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::{median, mib, ratio, row, secs, timed};

use anyhow::{Context, Result};

/// The bench binary is its own deploy worker: `strata-bench __disk-worker JOB OUT`.
pub const WORKER_ARG: &str = "__disk-worker";

/// Serves a deploy job when the binary was started as the worker.
pub fn serve_worker() -> Option<std::process::ExitCode> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    match args.split_first() {
        Some((first, rest)) if first == WORKER_ARG => Some(strata_disk::worker_main(rest.to_vec())),
        _ => None,
    }
}

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

/// Both sides on one commit.
struct Measured {
    strata: Duration,
    baseline: Duration,
    /// The sysroot's files (hard links once), as the baseline's `du`
    /// counted them before removing them.
    content: u64,
    raw: u64,
}

/// Runs both sides on `large` and on `small` (a commit with less content)
/// and prints the section: the ratio on each, and strata's time per GB of
/// content on each (equal when the cost is linear in the content).
pub fn bench(large: &Subject, small: &Subject, dir: &Path) -> Result<()> {
    // A copy of this executable: `cargo build` elsewhere may replace the
    // file while a long bench runs, and the worker must still start.
    let exe = dir.join("strata-bench-worker");
    std::fs::copy("/proc/self/exe", &exe).context("copying the bench executable")?;
    let l = measure(large, &exe, &dir.join("disk-large"))?;
    let s = measure(small, &exe, &dir.join("disk-small"))?;

    println!();
    println!("disk image (metal) of a commit, strata against the baseline script");
    for (what, m) in [("larger", &l), ("smaller", &s)] {
        println!(
            "  {what} commit: {:.0} MiB of files in the sysroot, raw disk {:.0} MiB",
            mib(m.content),
            mib(m.raw)
        );
        row(
            &format!("  strata disk (deploy, GRUB, metadata), median of {ROUNDS}"),
            secs(m.strata),
            "s",
        );
        row(
            &format!("  baseline: ostree admin deploy + sfdisk + mkfs, median of {ROUNDS}"),
            secs(m.baseline),
            "s",
        );
        ratio(
            "  ratio baseline/strata (above 1: strata is faster)",
            secs(m.baseline) / secs(m.strata),
        );
        row("  strata per GB of content", per_gb(m), "s/GB");
    }
    ratio(
        "per-GB time, larger / smaller (1: linear in content)",
        per_gb(&l) / per_gb(&s),
    );
    Ok(())
}

fn per_gb(m: &Measured) -> f64 {
    secs(m.strata) / (m.content as f64 / 1e9)
}

/// Rounds per side: a disk build is mostly I/O, and one sample of either
/// side moved the ratio by 0.3 on a shared machine; medians of interleaved
/// rounds are compared.
const ROUNDS: usize = 3;

fn measure(subject: &Subject, exe: &Path, work: &Path) -> Result<Measured> {
    let (mut stratas, mut baselines) = (Vec::new(), Vec::new());
    let (mut raw, mut content) = (0, 0);
    for _ in 0..ROUNDS {
        // Each side starts with no dirty data of earlier steps to write
        // back: a sync() inside one of them would otherwise pay for the
        // others.
        settle()?;
        eprintln!("bench: strata disk (metal) of {}", subject.image);
        let mut worker = Command::new(exe);
        worker.arg(WORKER_ARG);
        let opts = strata_disk::DiskOptions::new(
            subject.workdir,
            subject.image,
            vec!["metal".into()],
            worker,
        );
        let (strata, r) = timed(|| strata_disk::build(&opts))?;
        stratas.push(strata);
        raw = r.artifacts[0].size;

        settle()?;
        eprintln!("bench: baseline ostree admin deploy + sfdisk + mkfs (script)");
        if work.exists() {
            std::fs::remove_dir_all(work)?;
        }
        std::fs::create_dir_all(work)?;
        let disk = work.join("disk.raw");
        let (baseline, out) = timed(|| {
            Ok(strata_process::stdout(
                Command::new("sh")
                    .arg("-c")
                    .arg(BASELINE)
                    .arg("sh")
                    .arg(subject.workdir.join("repo"))
                    .arg(subject.commit)
                    .arg(work)
                    .arg(&disk)
                    .arg(raw.to_string()),
            )?)
        })?;
        baselines.push(baseline);
        content = out
            .trim()
            .parse()
            .with_context(|| format!("the baseline script printed {out:?}"))?;
        std::fs::remove_file(&disk)?;
    }
    Ok(Measured {
        strata: median(stratas),
        baseline: median(baselines),
        content,
        raw,
    })
}

fn settle() -> Result<()> {
    strata_process::run(&mut Command::new("sync"))?;
    Ok(())
}
