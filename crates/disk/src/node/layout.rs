//! What a node's disk must look like before libostree is let at it:
//! every directory libostree writes in a real directory of the disk,
//! every file it reads a regular file of the disk (a FIFO would have it
//! wait forever), every link ostree made pointing where ostree puts it.
//! Names are taken as the disk has them, bytes that need not be UTF-8. Read through a
//! descriptor of the root filesystem (the boot one bound on its `/boot`),
//! with no symlink followed and nothing above it reached
//! ([`strata_process::own_root::open_dir`]).
//!
//! What it must not do: write anything, or resolve a path of the disk
//! any other way.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use strata_process::own_root;
use strata_process::text::{escaped, shown};

/// A path of the disk as errors show it: from its root, escaped (whole:
/// its names are at most 255 bytes each, and a few deep).
fn disk_path(rel: &Path) -> String {
    escaped(&format!("/{}", rel.to_string_lossy()))
}

/// The root filesystem, the boot filesystem bound on its `/boot`, seen
/// through a descriptor: paths below it are resolved with no symlink
/// followed and nothing above it reached.
pub(super) struct Tree<'a>(pub(super) &'a std::fs::File);

impl Tree<'_> {
    /// The directory `rel`, which must be one.
    pub(super) fn real_dir(&self, rel: impl AsRef<Path>) -> Result<OwnedFd> {
        let rel = rel.as_ref();
        match self.dir(rel)? {
            Some(fd) => Ok(fd),
            None => bail!(
                "the disk has no {} directory (not an ostree sysroot?)",
                disk_path(rel)
            ),
        }
    }

    /// The directory `rel` if there is anything there; an error if that is
    /// not a directory of the disk.
    fn dir(&self, rel: impl AsRef<Path>) -> Result<Option<OwnedFd>> {
        use rustix::io::Errno;
        let rel = rel.as_ref();
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
                bail!(
                    "the disk's {} is not a directory of the disk ({why})",
                    disk_path(rel)
                )
            }
        }
    }

    /// What is at `rel` (its parents reached as directories of the disk),
    /// if anything.
    fn kind(&self, rel: &Path) -> Result<Option<Kind>> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Ok(Some(Kind::Dir));
        };
        let Some(fd) = self.dir(parent)? else {
            return Ok(None);
        };
        match rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(Kind::of(stat.st_mode))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading the disk's {}", disk_path(rel))),
        }
    }

    /// The file `rel`, if there is anything there, must be a regular file
    /// of the disk: libostree reads it.
    fn file(&self, rel: impl AsRef<Path>) -> Result<()> {
        let rel = rel.as_ref();
        match self.kind(rel)? {
            None | Some(Kind::File) => Ok(()),
            Some(kind) => must_be_file(rel, kind),
        }
    }

    /// The entries of the directory `rel` (none when it is absent): each
    /// name, as bytes, and what it is.
    fn entries(&self, rel: impl AsRef<Path>) -> Result<Vec<(OsString, Kind)>> {
        let rel = rel.as_ref();
        if self.dir(rel)?.is_none() {
            return Ok(Vec::new());
        }
        let read = || format!("reading the disk's {}", disk_path(rel));
        let fd = own_root::read_dir(self.0, rel).with_context(read)?;
        let mut out = Vec::new();
        let dir = rustix::fs::Dir::read_from(&fd).with_context(read)?;
        for entry in dir {
            let entry = entry.with_context(read)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string();
            if name == "." || name == ".." {
                continue;
            }
            let stat = rustix::fs::statat(
                &fd,
                entry.file_name(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .with_context(|| format!("reading the disk's {}", disk_path(&rel.join(&name))))?;
            out.push((name, Kind::of(stat.st_mode)));
        }
        out.sort();
        Ok(out)
    }

    /// The target of the link `rel`.
    fn link(&self, rel: &Path) -> Result<OsString> {
        own_root::read_link(self.0, rel).map_err(|e| {
            anyhow::anyhow!("the disk's {} is not a symbolic link ({e})", disk_path(rel))
        })
    }

    /// `/loader` of the boot filesystem: ostree's link to `loader.0` or
    /// `loader.1`.
    pub(super) fn loader(&self) -> Result<()> {
        self.link_to("loader", |t| t == b"loader.0" || t == b"loader.1")
    }

    /// The link `rel`, whose target `ok` accepts.
    fn link_to(&self, rel: impl AsRef<Path>, ok: impl Fn(&[u8]) -> bool) -> Result<()> {
        let rel = rel.as_ref();
        let target = self.link(rel)?;
        ensure!(
            ok(target.as_bytes()),
            "the disk's {} points at {}, not where ostree puts it",
            disk_path(rel),
            shown(&target.to_string_lossy())
        );
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Dir,
    Link,
    File,
    /// A FIFO, a device, a socket.
    Other,
}

impl Kind {
    fn of(mode: rustix::fs::RawMode) -> Kind {
        match rustix::fs::FileType::from_raw_mode(mode) {
            rustix::fs::FileType::Directory => Kind::Dir,
            rustix::fs::FileType::Symlink => Kind::Link,
            rustix::fs::FileType::RegularFile => Kind::File,
            _ => Kind::Other,
        }
    }
}

/// The files libostree reads from the boot filesystem's top, when the
/// repository's `sysroot.bootloader` asks it to look for a bootloader:
/// any that is there must be a regular file.
const BOOTLOADER_FILES: [&str; 4] = [
    "boot/grub2/grub.cfg",
    "boot/grub/grub.cfg",
    "boot/uEnv.txt",
    "boot/extlinux/extlinux.conf",
];

/// Every directory libostree writes in, every file it reads, and every
/// link it follows, is what ostree makes it: a directory of the disk, a
/// regular file of the disk, a link to its sibling. A disk whose
/// directories lead out of it would have libostree write wherever they
/// point (the process it runs in has nothing of the host to reach any
/// more, but it would still write outside the disk's own trees); a FIFO
/// where it reads a file would have it wait forever. Checked with the
/// boot filesystem bound on `/boot`.
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
    match t.kind(Path::new("ostree/repo/config"))? {
        Some(Kind::File) => {}
        None => bail!("the disk has no /ostree/repo/config (not an ostree sysroot?)"),
        Some(kind) => must_be_file(Path::new("ostree/repo/config"), kind)?,
    }
    // The refs libostree lists when it prunes the repository.
    only_dirs_and_files(t, Path::new("ostree/repo/refs"))?;
    t.link_to("boot/loader", |l| l == b"loader.0" || l == b"loader.1")?;
    for loader in ["boot/loader.0", "boot/loader.1"] {
        let loader = Path::new(loader);
        only_dirs_and_files(t, &loader.join("entries"))?;
        for name in ["syslinux.cfg", "uEnv.txt", "grub.cfg"] {
            t.file(loader.join(name))?;
        }
    }
    for file in BOOTLOADER_FILES {
        t.file(file)?;
    }
    // ostree's syslinux configuration is its link into the loader.
    let syslinux = Path::new("boot/syslinux/syslinux.cfg");
    if t.kind(syslinux)? == Some(Kind::Link) {
        t.link_to(syslinux, |l| l == b"../loader/syslinux.cfg")?;
    } else {
        t.file(syslinux)?;
    }
    // The kernels and initramfs images ostree copied: no link among them.
    for (name, kind) in t.entries("boot/ostree")? {
        no_link_in(t, &Path::new("boot/ostree").join(name), kind)?;
    }
    for (os, kind) in t.entries("ostree/deploy")? {
        let stateroot = Path::new("ostree/deploy").join(&os);
        must_be_dir(&stateroot, kind)?;
        for dir in ["deploy", "var", "backing"] {
            t.dir(stateroot.join(dir))?;
        }
        for (name, kind) in t.entries(stateroot.join("deploy"))? {
            let path = stateroot.join("deploy").join(&name);
            match kind {
                Kind::Dir => {
                    for dir in ["etc", "usr", "usr/etc"] {
                        t.dir(path.join(dir))?;
                    }
                }
                // Each deployment's origin (`CSUM.SERIAL.origin`), read
                // when the sysroot is loaded.
                Kind::File => {}
                Kind::Link => bail!(
                    "the disk's {} is a symbolic link, not ostree's",
                    disk_path(&path)
                ),
                Kind::Other => must_be_file(&path, kind)?,
            }
        }
    }
    // /ostree/boot.N -> boot.N.M, each boot.N.M/OS/BOOTCSUM/SERIAL a link
    // to its deployment.
    for (name, kind) in t.entries("ostree")? {
        let Some(version) = name.as_bytes().strip_prefix(b"boot.") else {
            continue;
        };
        let path = Path::new("ostree").join(&name);
        if matches!(version, b"0" | b"1") {
            let mut prefix = b"boot.".to_vec();
            prefix.extend_from_slice(version);
            prefix.push(b'.');
            t.link_to(&path, |l| {
                l.strip_prefix(prefix.as_slice())
                    .is_some_and(|sub| matches!(sub, b"0" | b"1"))
            })?;
            continue;
        }
        must_be_dir(&path, kind)?;
        for (os, kind) in t.entries(&path)? {
            let os_dir = path.join(&os);
            must_be_dir(&os_dir, kind)?;
            for (csum, kind) in t.entries(&os_dir)? {
                let csum_dir = os_dir.join(&csum);
                must_be_dir(&csum_dir, kind)?;
                let mut prefix = b"../../../deploy/".to_vec();
                prefix.extend_from_slice(os.as_bytes());
                prefix.extend_from_slice(b"/deploy/");
                for (serial, _) in t.entries(&csum_dir)? {
                    t.link_to(csum_dir.join(serial), |l| {
                        l.strip_prefix(prefix.as_slice()).is_some_and(|d| {
                            !d.is_empty() && !d.contains(&b'/') && d != b".." && d != b"."
                        })
                    })?;
                }
            }
        }
    }
    Ok(())
}

fn must_be_dir(path: &Path, kind: Kind) -> Result<()> {
    ensure!(
        kind == Kind::Dir,
        "the disk's {} is not a directory of the disk ({})",
        disk_path(path),
        if kind == Kind::Link {
            "it is a symbolic link"
        } else {
            "it is not a directory"
        }
    );
    Ok(())
}

fn must_be_file(path: &Path, kind: Kind) -> Result<()> {
    ensure!(
        kind == Kind::File,
        "the disk's {} is not a regular file of the disk ({})",
        disk_path(path),
        match kind {
            Kind::Link => "it is a symbolic link",
            Kind::Dir => "it is a directory",
            _ => "it is a FIFO, a device or a socket",
        }
    );
    Ok(())
}

/// Below `dir` (if it is there), nothing but directories and regular
/// files, however deep.
fn only_dirs_and_files(t: &Tree, dir: &Path) -> Result<()> {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for (name, kind) in t.entries(&dir)? {
            let path: PathBuf = dir.join(name);
            match kind {
                Kind::Dir => todo.push(path),
                kind => must_be_file(&path, kind)?,
            }
        }
    }
    Ok(())
}

/// `path` (of `kind`) is a directory holding no symlink, or a file.
fn no_link_in(t: &Tree, path: &Path, kind: Kind) -> Result<()> {
    ensure!(
        kind != Kind::Link,
        "the disk's {} is a symbolic link, not ostree's",
        disk_path(path)
    );
    if kind == Kind::Dir {
        for (name, kind) in t.entries(path)? {
            ensure!(
                kind != Kind::Link,
                "the disk's {} is a symbolic link, not ostree's",
                disk_path(&path.join(name))
            );
        }
    }
    Ok(())
}
