//! What the commit is checked for before anything is deployed: a kernel,
//! the boot chain's pieces (each missing one named with the packages that
//! provide it on RHEL), and owners the build's id map can give.
//! A deployment that would fail on these fails later and says less.
//!
//! It reads the commit in the repository and nothing else; it must not
//! check anything out or deploy.

use anyhow::{bail, Context, Result};
use ostree::gio;
use ostree::prelude::*;
use strata_oscontainer::labels::checked;
use strata_oscontainer::KernelVersion;

use crate::userns::IdMap;
use crate::{bootloader, grub_pc};

/// The first path of `commit` (parents before children) whose owner `map`
/// does not cover, with that owner.
pub(crate) fn owner_beyond(
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
pub(crate) fn check_boot_chain(repo: &ostree::Repo, commit: &str, bios: bool) -> Result<()> {
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
pub(crate) fn kernel_of(repo: &ostree::Repo, commit: &str) -> Result<KernelVersion> {
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
