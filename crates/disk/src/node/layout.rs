//! What a node's disk must look like before libostree is let at it:
//! every directory libostree writes in a real directory of the disk,
//! every link ostree made pointing where ostree puts it. Read through a
//! descriptor of the root filesystem (the boot one bound on its `/boot`),
//! with no symlink followed and nothing above it reached
//! ([`strata_process::own_root::open_dir`]).
//!
//! What it must not do: write anything, or resolve a path of the disk
//! any other way.

use std::os::fd::OwnedFd;

use anyhow::{bail, ensure, Context, Result};
use strata_process::own_root;
use strata_process::text::shown;

/// The root filesystem, the boot filesystem bound on its `/boot`, seen
/// through a descriptor: paths below it are resolved with no symlink
/// followed and nothing above it reached.
pub(super) struct Tree<'a>(pub(super) &'a std::fs::File);

impl Tree<'_> {
    /// The directory `rel`, which must be one.
    pub(super) fn real_dir(&self, rel: &str) -> Result<OwnedFd> {
        match self.dir(rel)? {
            Some(fd) => Ok(fd),
            None => bail!("the disk has no /{rel} directory (not an ostree sysroot?)"),
        }
    }

    /// The directory `rel` if there is anything there; an error if that is
    /// not a directory of the disk.
    fn dir(&self, rel: &str) -> Result<Option<OwnedFd>> {
        use rustix::io::Errno;
        match own_root::open_dir(self.0, rel) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) => {
                let why = match Errno::from_io_error(&e) {
                    Some(Errno::NOENT) => return Ok(None),
                    Some(Errno::LOOP) => "it, or a directory above it, is a symbolic link".into(),
                    Some(Errno::NOTDIR) => "it is not a directory".into(),
                    Some(Errno::XDEV) => "it leads out of the disk".into(),
                    _ => e.to_string(),
                };
                bail!("the disk's /{rel} is not a directory of the disk ({why})")
            }
        }
    }

    /// The entries of the directory `rel` (none when it is absent): each
    /// name and whether it is a directory, a symlink or something else.
    fn entries(&self, rel: &str) -> Result<Vec<(String, Kind)>> {
        if self.dir(rel)?.is_none() {
            return Ok(Vec::new());
        }
        let fd = own_root::read_dir(self.0, rel)
            .with_context(|| format!("reading the disk's /{rel}"))?;
        let mut out = Vec::new();
        let dir = rustix::fs::Dir::read_from(&fd)
            .with_context(|| format!("reading the disk's /{rel}"))?;
        for entry in dir {
            let entry = entry.with_context(|| format!("reading the disk's /{rel}"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let stat = rustix::fs::statat(
                &fd,
                entry.file_name(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .with_context(|| format!("reading the disk's /{rel}/{}", shown(&name)))?;
            let kind = match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
                rustix::fs::FileType::Directory => Kind::Dir,
                rustix::fs::FileType::Symlink => Kind::Link,
                _ => Kind::Other,
            };
            out.push((name, kind));
        }
        out.sort();
        Ok(out)
    }

    /// The target of the link `rel`.
    fn link(&self, rel: &str) -> Result<String> {
        let target = own_root::read_link(self.0, rel)
            .map_err(|e| anyhow::anyhow!("the disk's /{rel} is not a symbolic link ({e})"))?;
        Ok(target.to_string_lossy().into_owned())
    }

    /// `/loader` of the boot filesystem: ostree's link to `loader.0` or
    /// `loader.1`.
    pub(super) fn loader(&self) -> Result<()> {
        self.link_to("loader", |t| t == "loader.0" || t == "loader.1")
    }

    /// The link `rel`, whose target `ok` accepts.
    fn link_to(&self, rel: &str, ok: impl Fn(&str) -> bool) -> Result<()> {
        let target = self.link(rel)?;
        ensure!(
            ok(&target),
            "the disk's /{rel} points at {}, not where ostree puts it",
            shown(&target)
        );
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Dir,
    Link,
    Other,
}

/// Every directory libostree writes in, and every link it follows, is
/// what ostree makes it: a directory of the disk, a link to its sibling.
/// A disk whose directories lead out of it would have libostree write
/// wherever they point (the process it runs in has nothing of the host
/// to reach any more, but it would still write outside the disk's own
/// trees). Checked with the boot filesystem bound on `/boot`.
pub(super) fn check_layout(t: &Tree) -> Result<()> {
    for dir in ["ostree", "ostree/repo", "ostree/deploy"] {
        t.real_dir(dir)?;
    }
    for dir in [
        "ostree/repo/tmp",
        "ostree/repo/tmp/cache",
        "ostree/repo/objects",
        "ostree/repo/refs",
        "ostree/repo/refs/heads",
        "ostree/repo/refs/remotes",
        "ostree/repo/refs/mirrors",
        "ostree/repo/state",
        "ostree/repo/extensions",
        "boot/ostree",
        "boot/loader.0",
        "boot/loader.1",
        "boot/loader.0/entries",
        "boot/loader.1/entries",
    ] {
        t.dir(dir)?;
    }
    t.link_to("boot/loader", |l| l == "loader.0" || l == "loader.1")?;
    // The kernels and initramfs images ostree copied: no link among them.
    for (name, kind) in t.entries("boot/ostree")? {
        let dir = format!("boot/ostree/{name}");
        no_link_in(t, &dir, kind)?;
    }
    for (os, kind) in t.entries("ostree/deploy")? {
        let stateroot = format!("ostree/deploy/{os}");
        must_be_dir(&stateroot, kind)?;
        for dir in ["deploy", "var", "backing"] {
            t.dir(&format!("{stateroot}/{dir}"))?;
        }
        for (name, kind) in t.entries(&format!("{stateroot}/deploy"))? {
            let path = format!("{stateroot}/deploy/{name}");
            ensure!(
                kind != Kind::Link,
                "the disk's /{} is a symbolic link, not ostree's",
                shown(&path)
            );
            if kind == Kind::Dir {
                for dir in ["etc", "usr", "usr/etc"] {
                    t.dir(&format!("{path}/{dir}"))?;
                }
            }
        }
    }
    // /ostree/boot.N -> boot.N.M, each boot.N.M/OS/BOOTCSUM/SERIAL a link
    // to its deployment.
    for (name, kind) in t.entries("ostree")? {
        let Some(version) = name.strip_prefix("boot.") else {
            continue;
        };
        let path = format!("ostree/{name}");
        if matches!(version, "0" | "1") {
            t.link_to(&path, |l| {
                l.strip_prefix(&format!("boot.{version}."))
                    .is_some_and(|sub| matches!(sub, "0" | "1"))
            })?;
            continue;
        }
        must_be_dir(&path, kind)?;
        for (os, kind) in t.entries(&path)? {
            let os_dir = format!("{path}/{os}");
            must_be_dir(&os_dir, kind)?;
            for (csum, kind) in t.entries(&os_dir)? {
                let csum_dir = format!("{os_dir}/{csum}");
                must_be_dir(&csum_dir, kind)?;
                let prefix = format!("../../../deploy/{os}/deploy/");
                for (serial, _) in t.entries(&csum_dir)? {
                    t.link_to(&format!("{csum_dir}/{serial}"), |l| {
                        l.strip_prefix(&prefix)
                            .is_some_and(|d| !d.contains('/') && d != ".." && d != ".")
                    })?;
                }
            }
        }
    }
    Ok(())
}

fn must_be_dir(path: &str, kind: Kind) -> Result<()> {
    ensure!(
        kind == Kind::Dir,
        "the disk's /{} is not a directory of the disk ({})",
        shown(path),
        if kind == Kind::Link {
            "it is a symbolic link"
        } else {
            "it is not a directory"
        }
    );
    Ok(())
}

/// `path` (of `kind`) is a directory holding no symlink, or a file.
fn no_link_in(t: &Tree, path: &str, kind: Kind) -> Result<()> {
    ensure!(
        kind != Kind::Link,
        "the disk's /{} is a symbolic link, not ostree's",
        shown(path)
    );
    if kind == Kind::Dir {
        for (name, kind) in t.entries(path)? {
            ensure!(
                kind != Kind::Link,
                "the disk's /{}/{} is a symbolic link, not ostree's",
                shown(path),
                shown(&name)
            );
        }
    }
    Ok(())
}
