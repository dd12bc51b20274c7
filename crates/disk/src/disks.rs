//! Every platform's disk from one deployment: written in an order that
//! lets a converted disk take its root filesystem from a raw one, each
//! converted and hashed in a thread of its own while the next is written,
//! then compressed when asked.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::bootfiles::{self, BootFiles};
use crate::hash::FileHasher;
use crate::userns::Job;
use crate::{fs, hash, layout, raw};
use crate::{Artifact, Build, Platform, Uncompressed};

impl Build<'_> {
    /// The order the disks are written in: one raw artifact first, so
    /// that a converted disk can take its root filesystem from it (see
    /// `write_disks`), preferring one with the converted disks' sector
    /// size (their layouts must match); then the converted disks, whose
    /// conversion runs while the other raw disks are written; otherwise
    /// as given.
    pub(crate) fn write_order(&self) -> Vec<&'static Platform> {
        let (converted, mut raw): (Vec<&'static Platform>, Vec<_>) = self
            .platforms
            .iter()
            .partition(|p| p.format.qemu_img_args().is_some());
        raw.sort_by_key(|p| !converted.iter().any(|c| c.sector_size == p.sector_size));
        let rest = raw.split_off(raw.len().min(1));
        raw.into_iter().chain(converted).chain(rest).collect()
    }

    /// Each platform's disk, written and hashed: its boot filesystem, a
    /// raw disk, converted when its format is not raw. Converting and
    /// hashing a disk cost about as much as writing it, so each disk is
    /// converted and hashed in a thread of its own while the next is
    /// written and the sysroot removed; a raw disk's part before its root
    /// filesystem was already hashed while the root was written (see
    /// `raw::write_disk`), and a root another disk copies is hashed by
    /// that copy's read of it.
    pub(crate) fn write_disks(
        &self,
        files: &BootFiles,
        root_min: u64,
        in_memory: bool,
        started: std::time::Instant,
    ) -> Result<Vec<Artifact>> {
        let (opts, id, ns, stage) = (self.opts, self.id, self.ns, &self.stage);
        let plans = self
            .write_order()
            .into_iter()
            .map(|p| {
                let size = opts.size.or(p.fixed_size);
                Ok((p, layout::plan(p.sector_size, root_min, size, &opts.uuids)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let roots = root_sources(&plans);
        std::thread::scope(|scope| -> Result<Vec<Artifact>> {
            let mut hashing = Vec::new();
            // The file each disk written so far keeps its root filesystem
            // in: the artifact of a raw disk, the raw of a converted one
            // (it stays until the last disk is written and converted).
            let mut kept: Vec<PathBuf> = Vec::new();
            // The first disk's hasher while a later disk is to copy its
            // root: that copy hashes both (see `raw::write_disk`).
            let mut lender: Option<(&'static Platform, PathBuf, FileHasher)> = None;
            let mut converted_raws = Vec::new();
            for (i, (p, lay)) in plans.iter().enumerate() {
                let (p, lay) = (*p, lay.clone());
                let t = std::time::Instant::now();
                let boot_p = stage.dir.join(format!("boot-{}", p.name));
                fs::copy_tree(&stage.boot, &boot_p)?;
                bootfiles::platform_boot(&boot_p, p, id, &files.pretty, files.reads_bls)?;
                let raw = stage.dir.join(format!("{}.raw", p.name));
                let converted = p.format.qemu_img_args();
                let borrowed = match roots[i] {
                    RootFrom::Borrow(j) => Some(kept[j].clone()),
                    _ => None,
                };
                let root = match roots[i] {
                    RootFrom::Borrow(_) => raw::Root::Elsewhere,
                    RootFrom::Copy(j) => raw::Root::CopyFrom(&kept[j]),
                    // The deployment wrote the first disk's root (see
                    // `Build::in_memory`, which holds the others to the
                    // same partition).
                    RootFrom::Own if in_memory && i == 0 => raw::Root::Written,
                    RootFrom::Own if in_memory => bail!("{}: the sysroot is gone", p.name),
                    RootFrom::Own => raw::Root::Tree(&stage.sysroot),
                };
                let copies = matches!(root, raw::Root::CopyFrom(_));
                let prefix_hashed = raw::write_disk(
                    ns,
                    &raw,
                    &lay,
                    &raw::Sources {
                        esp: &stage.esp,
                        boot: &boot_p,
                        root,
                        boot_img: &files.boot_img,
                        core_img: &files.core_img,
                        uuids: &opts.uuids,
                        epoch: self.epoch,
                    },
                    converted.is_none(),
                    lender.as_mut().filter(|_| copies).map(|(_, _, h)| h),
                )?;
                if copies {
                    if let Some(lent) = lender.take() {
                        hashing.push(finish_lent(scope, lent, started));
                    }
                }
                let name = format!(
                    "{}-{}-{}.x86_64.{}",
                    id.osname,
                    id.version,
                    p.name,
                    p.extension()
                );
                let dest = stage.out.join(&name);
                match converted {
                    None => {
                        std::fs::rename(&raw, &dest)?;
                        kept.push(dest.clone());
                    }
                    Some(_) => {
                        strata_process::require("qemu-img")?;
                        converted_raws.push(raw.clone());
                        kept.push(raw.clone());
                    }
                }
                tracing::info!(platform = p.name, elapsed = ?t.elapsed(), "wrote {name}");
                // A later disk that copies this root hashes it too.
                let copied = roots.contains(&RootFrom::Copy(i));
                let mut prefix_hashed = prefix_hashed;
                if let Some(h) = prefix_hashed.take_if(|_| copied) {
                    lender = Some((p, dest, h));
                    continue;
                }
                let hash = scope.spawn({
                    let dest = dest.clone();
                    move || -> Result<(u64, String)> {
                        if let Some(args) = converted {
                            let t = std::time::Instant::now();
                            let mut cmd = Command::new("qemu-img");
                            cmd.arg("convert");
                            match &borrowed {
                                None => cmd.args(["-f", "raw"]).arg(&raw),
                                Some(from) => {
                                    let root = lay.root().start;
                                    cmd.arg("--image-opts")
                                        .arg(raw_slice(&raw, 0, Some(root)))
                                        .arg(raw_slice(from, root, None))
                                }
                            };
                            strata_process::run(cmd.args(args).arg(&dest))?;
                            tracing::debug!(elapsed = ?t.elapsed(), "converted {}", dest.display());
                        }
                        let hashed = match prefix_hashed {
                            Some(hasher) => hasher.finish(),
                            None => hash::hash_file(&dest),
                        };
                        tracing::debug!(elapsed = ?started.elapsed(), "hashed {}", dest.display());
                        hashed
                    }
                });
                hashing.push((p, dest, hash));
            }
            // No later disk copied the first one's root after all.
            if let Some(lent) = lender.take() {
                hashing.push(finish_lent(scope, lent, started));
            }
            tracing::debug!(elapsed = ?started.elapsed(), "every disk written");
            // The sysroot is no longer needed: removing thousands of files
            // waits on the filesystem's journal, so it overlaps the
            // conversions and the hashing.
            let cleanup = scope.spawn(|| {
                let removed = ns.run::<()>(&Job::Remove {
                    path: stage.sysroot.clone(),
                });
                tracing::debug!(elapsed = ?started.elapsed(), "sysroot removed");
                removed
            });
            // In the order given.
            hashing.sort_by_key(|(p, _, _)| self.platforms.iter().position(|q| q.name == p.name));
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
            for raw in converted_raws {
                if let Err(e) = std::fs::remove_file(&raw) {
                    tracing::warn!("removing {}: {e}", raw.display());
                }
            }
            if let Ok(Err(e)) = cleanup.join() {
                tracing::warn!("removing the sysroot: {e:#}");
            }
            artifacts
        })
    }
}

/// Where a planned disk's root filesystem comes from (disks by their
/// place in the plans).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootFrom {
    /// Written for this disk.
    Own,
    /// Copied from the first disk, whose root partition is the same (the
    /// root filesystem does not differ between platforms).
    Copy(usize),
    /// Left to the conversion, which reads it from that raw artifact: a
    /// disk to convert whose layout the artifact has differs from it only
    /// before the root partition (the boot filesystem's kernel
    /// arguments). Its raw holds that part, and qemu-img concatenates the
    /// two (the same bytes as from a whole raw), so the root filesystem is
    /// not copied once more only to be read.
    Borrow(usize),
}

/// Each planned disk's [`RootFrom`], in the order written.
fn root_sources(plans: &[(&'static Platform, layout::Layout)]) -> Vec<RootFrom> {
    let raw = |p: &Platform| p.format.qemu_img_args().is_none();
    plans
        .iter()
        .enumerate()
        .map(|(i, (p, lay))| {
            let artifact = plans[..i].iter().position(|(q, l)| raw(q) && l == lay);
            match artifact {
                Some(j) if !raw(p) => RootFrom::Borrow(j),
                _ if i > 0 && plans[0].1.root() == lay.root() => RootFrom::Copy(0),
                _ => RootFrom::Own,
            }
        })
        .collect()
}

/// The rest of a disk whose root another disk's copy hashed, hashed on
/// a thread of its own.
fn finish_lent<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    (p, dest, hasher): (&'static Platform, PathBuf, FileHasher),
    started: std::time::Instant,
) -> Hashing<'scope> {
    let path = dest.clone();
    let hash = scope.spawn(move || {
        let hashed = hasher.finish();
        tracing::debug!(elapsed = ?started.elapsed(), "hashed {}", path.display());
        hashed
    });
    (p, dest, hash)
}

/// A disk being hashed: its platform, its file, the thread.
type Hashing<'scope> = (
    &'static Platform,
    PathBuf,
    std::thread::ScopedJoinHandle<'scope, Result<(u64, String)>>,
);

/// Each disk gzipped in place of itself (deterministic: the layers' gzip),
/// its record naming the `.gz` file with the content's size and hash.
pub(crate) fn compress(artifacts: &mut [Artifact]) -> Result<()> {
    for a in artifacts {
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
    Ok(())
}

/// A `qemu-img --image-opts` source: `len` bytes (to the end without)
/// of the raw file `path` from `offset`.
fn raw_slice(path: &Path, offset: u64, len: Option<u64>) -> std::ffi::OsString {
    let mut opts = std::ffi::OsString::from(format!("driver=raw,offset={offset},"));
    if let Some(len) = len {
        opts.push(format!("size={len},"));
    }
    opts.push("file.driver=file,file.filename=");
    // A comma inside a value is written twice.
    opts.push(path.to_string_lossy().replace(',', ",,"));
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// metal written first; qemu (same layout) converted from its root;
    /// metal4k (4K sectors, same root partition) copies it.
    #[test]
    fn where_each_disks_root_comes_from() {
        let uuids = layout::Uuids::default();
        let plans: Vec<_> = ["metal", "qemu", "metal4k"]
            .map(|name| {
                let p = Platform::get(name).unwrap();
                (
                    p,
                    layout::plan(p.sector_size, 1 << 30, None, &uuids).unwrap(),
                )
            })
            .into();
        assert_eq!(
            root_sources(&plans),
            [RootFrom::Own, RootFrom::Borrow(0), RootFrom::Copy(0)]
        );
        // Another root partition (a fixed size) is written for its disk.
        let mut sized = plans.clone();
        sized[2].1 = layout::plan(4096, 1 << 30, Some(8 << 30), &uuids).unwrap();
        assert_eq!(
            root_sources(&sized),
            [RootFrom::Own, RootFrom::Borrow(0), RootFrom::Own]
        );
    }

    #[test]
    fn raw_slices_for_qemu_img() {
        assert_eq!(
            raw_slice(Path::new("/w/tmp/qemu.raw"), 0, Some(512)),
            "driver=raw,offset=0,size=512,file.driver=file,file.filename=/w/tmp/qemu.raw"
        );
        assert_eq!(
            raw_slice(Path::new("/w,x/metal.raw"), 537919488, None),
            "driver=raw,offset=537919488,file.driver=file,file.filename=/w,,x/metal.raw"
        );
    }
}
