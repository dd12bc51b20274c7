//! The tree's files as the repository's content objects, the fast way.
//!
//! libostree's own writer reads every file, checksums it with GLib's
//! SHA-256 and copies it into a new object, one file at a time: at RHCOS
//! size (2.5 GB) that is most of a compose's commit. The composed tree is
//! scratch and lives on the repository's filesystem, so here a file
//! *becomes* its object instead:
//!
//! - checksums are computed on every core, with the CPU's SHA instructions;
//! - a file that is not in the repository yet is given the object's
//!   metadata in place (the `user.ostreemeta` xattr, the object's mode,
//!   mtime 0, as libostree's bare-user writer sets them) and hard-linked
//!   into `objects/`: no byte of content is written again;
//! - what cannot be adopted that way (hard links reaching outside the tree
//!   or carrying different metadata, files with extended attributes an
//!   object must not carry, another filesystem, no permission) and
//!   symlinks go through libostree's writer, which checks the checksum
//!   computed here against its own.
//!
//! The checksums are ostree's: SHA-256 of the file header (the
//! length-prefixed `(uuuusa(ayay))` variant of uid, gid, mode, rdev,
//! symlink target and xattrs, integers big-endian) followed by the content.
//! The commit's tests hold the result to libostree's writer on the same
//! tree, and `ostree fsck` to the objects.
//!
//! The tree's files are consumed: once written, they may share their inode
//! with an object, so nothing may change them afterwards.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use ostree::gio;
use ostree::gio::prelude::*;
use ostree::glib;
use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode, Timespec, Timestamps, XattrFlags, CWD, UTIME_OMIT};
use sha2::{Digest, Sha256};

/// Extended attributes an entry is committed with: ostree's `a(ayay)`
/// pairs, names NUL-terminated.
pub(super) type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// What `lstat` says of an entry.
#[derive(Clone, Copy)]
struct Meta {
    uid: u32,
    gid: u32,
    mode: u32,
    size: u64,
    dev: u64,
    ino: u64,
    nlink: u64,
    ctime: (i64, i64),
}

impl Meta {
    fn of(m: &std::fs::Metadata) -> Self {
        Meta {
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode(),
            size: m.size(),
            dev: m.dev(),
            ino: m.ino(),
            nlink: m.nlink(),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// The `GFileInfo` libostree reads an entry's metadata from.
    fn file_info(&self, target: Option<&str>) -> gio::FileInfo {
        let info = gio::FileInfo::new();
        info.set_attribute_uint32("unix::uid", self.uid);
        info.set_attribute_uint32("unix::gid", self.gid);
        info.set_attribute_uint32("unix::mode", self.mode);
        match target {
            Some(t) => {
                info.set_file_type(gio::FileType::SymbolicLink);
                info.set_symlink_target(t);
            }
            None if self.mode & 0o170000 == 0o040000 => {
                info.set_file_type(gio::FileType::Directory);
            }
            None => {
                info.set_file_type(gio::FileType::Regular);
                info.set_size(self.size as i64);
            }
        }
        info
    }
}

/// A directory of the tree.
struct Dir {
    /// Commit path: `/`, `/usr`, …
    path: String,
    meta: Meta,
    xattrs: glib::Variant,
}

/// A regular file or symlink.
struct Leaf {
    /// Its directory: an index into the walk's directories.
    dir: usize,
    name: String,
    meta: Meta,
    /// The symlink's target; `None` for a regular file.
    target: Option<String>,
    xattrs: glib::Variant,
}

impl Leaf {
    fn header(&self) -> Vec<u8> {
        let m = &self.meta;
        strata_oscontainer::file_header(
            m.uid,
            m.gid,
            m.mode,
            self.target.as_deref().unwrap_or(""),
            &self.xattrs,
        )
    }

    fn ostreemeta(&self) -> Vec<u8> {
        let m = &self.meta;
        ostreemeta(m.uid, m.gid, m.mode, &self.xattrs)
    }
}

/// What a bare-user object keeps in `user.ostreemeta`: the `(uuua(ayay))`
/// of uid, gid, mode (big-endian) and xattrs.
pub(crate) fn ostreemeta(uid: u32, gid: u32, mode: u32, xattrs: &glib::Variant) -> Vec<u8> {
    glib::Variant::tuple_from_iter([
        uid.to_be().to_variant(),
        gid.to_be().to_variant(),
        mode.to_be().to_variant(),
        xattrs.clone(),
    ])
    .data()
    .to_vec()
}

/// No extended attributes, as ostree's `a(ayay)`.
pub(crate) fn no_xattrs() -> glib::Variant {
    Xattrs::new().to_variant()
}

/// Files of the tree that are already objects of the repository (linked
/// from the package cache), by `(device, inode)`.
pub(crate) type Known = HashMap<(u64, u64), KnownFile>;

/// A file of the tree that is an object: its checksum, the mode it was
/// stored with (owned by root, no xattrs; on disk it has an object's mode,
/// so its own is taken from here) and its change time once linked. A file
/// whose change time moved since was written to, or had its metadata
/// changed, after it was linked: it is committed from what it holds now,
/// and its object is reported as touched.
#[derive(Debug, Clone)]
pub(crate) struct KnownFile {
    pub checksum: String,
    pub mode: u32,
    pub ctime: (i64, i64),
}

/// The root of the tree as written, and the objects of `Known` files that
/// changed after they were linked (they may no longer hold their content).
pub(crate) struct Written {
    pub tree: ostree::MutableTree,
    pub touched: Vec<String>,
}

/// Writes the tree under `root` into `repo` (bare-user, inside a
/// transaction): its files as content objects and its directories'
/// metadata; returns the mutable tree for [`ostree::Repo::write_mtree`].
/// `xattrs_of(path, mode)` gives each entry's xattrs (commit path: `/usr/…`).
/// A file in `known` whose xattrs are none is its object already: it is
/// neither read nor written.
pub(super) fn write_tree(
    repo: &ostree::Repo,
    root: &Path,
    known: &Known,
    xattrs_of: &mut dyn FnMut(&str, u32) -> Result<Xattrs>,
) -> Result<Written> {
    let repo_dir = repo.path().path().context("a repository without a path")?;
    if repo.mode() != ostree::RepoMode::BareUser {
        bail!(
            "the repository {} is not bare-user (strata's workdir repositories are)",
            repo_dir.display()
        );
    }
    let (dirs, leaves, touched) = walk(root, known, xattrs_of)?;
    let bare = no_xattrs();
    let objects = repo_dir.join("objects");
    let paths: Vec<PathBuf> = leaves
        .iter()
        .map(|l| {
            root.join(dirs[l.dir].path.trim_start_matches('/'))
                .join(&l.name)
        })
        .collect();
    let adoptable = adoptable(&leaves);
    // Checksums, and adoption, on every core.
    let done: Vec<Result<(String, bool)>> = leaves
        .par_iter()
        .zip(paths.par_iter())
        .zip(adoptable.par_iter())
        .map(|((leaf, path), &adoptable)| {
            if leaf.target.is_none() && leaf.xattrs == bare {
                if let Some(k) = known
                    .get(&(leaf.meta.dev, leaf.meta.ino))
                    .filter(|k| k.ctime == leaf.meta.ctime)
                {
                    return Ok((k.checksum.clone(), true));
                }
            }
            let checksum =
                checksum(leaf, path).with_context(|| format!("reading {}", path.display()))?;
            // A linked file the commit gives other metadata (a label the
            // tree's policy gives it): its object is a copy, made the same
            // way, the linked one left as it is.
            let linked = known.contains_key(&(leaf.meta.dev, leaf.meta.ino));
            let stored = leaf.target.is_none()
                && (object_path(&objects, &checksum).exists()
                    || (adoptable && adopt(leaf, path, &objects, &checksum)?)
                    || (linked
                        && adopt_copy(leaf, path, &repo_dir.join("tmp"), &objects, &checksum)?));
            Ok((checksum, stored))
        })
        .collect();
    let mtrees = mtrees(repo, &dirs)?;
    for ((leaf, path), done) in leaves.iter().zip(&paths).zip(done) {
        let (checksum, stored) = done?;
        if !stored {
            write_with_libostree(repo, leaf, path, &checksum)
                .with_context(|| format!("writing {} into the repository", path.display()))?;
        }
        mtrees[leaf.dir]
            .replace_file(&leaf.name, &checksum)
            .with_context(|| format!("adding {} to the commit", path.display()))?;
    }
    Ok(Written {
        tree: mtrees.into_iter().next().expect("the root is walked first"),
        touched,
    })
}

/// Walks the tree depth-first, parents before children: its directories
/// and its leaves, with their metadata and xattrs.
fn walk(
    root: &Path,
    known: &Known,
    xattrs_of: &mut dyn FnMut(&str, u32) -> Result<Xattrs>,
) -> Result<(Vec<Dir>, Vec<Leaf>, Vec<String>)> {
    let (mut dirs, mut leaves, mut touched) = (Vec::new(), Vec::new(), Vec::new());
    let top =
        std::fs::symlink_metadata(root).with_context(|| format!("reading {}", root.display()))?;
    let mut pending = vec![("/".to_string(), Meta::of(&top))];
    while let Some((path, meta)) = pending.pop() {
        let xattrs = xattrs_of(&path, meta.mode)?.to_variant();
        let index = dirs.len();
        dirs.push(Dir {
            path: path.clone(),
            meta,
            xattrs,
        });
        let dir = root.join(path.trim_start_matches('/'));
        let mut children = Vec::new();
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            let name = entry.file_name().into_string().map_err(|n| {
                anyhow!(
                    "{}: the name {n:?} is not UTF-8 (ostree commits UTF-8 names)",
                    dir.display()
                )
            })?;
            let m = entry
                .metadata()
                .with_context(|| format!("reading {}", entry.path().display()))?;
            children.push((name, m));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        let mut subdirs = Vec::new();
        for (name, m) in children {
            let child = match path.as_str() {
                "/" => format!("/{name}"),
                _ => format!("{path}/{name}"),
            };
            let mut meta = Meta::of(&m);
            if let Some(k) = known.get(&(meta.dev, meta.ino)).filter(|_| m.is_file()) {
                // Written to in place keeps the mode it was given; a
                // changed mode or owner is what the writer asked for.
                if k.ctime != meta.ctime {
                    touched.push(k.checksum.clone());
                }
                if meta.mode == 0o100000 | object_mode(k.mode) && meta.uid == top.uid() {
                    (meta.uid, meta.gid, meta.mode) = (0, 0, k.mode);
                }
            }
            let ft = m.file_type();
            let target = if ft.is_dir() {
                subdirs.push((child, meta));
                continue;
            } else if ft.is_symlink() {
                let t = std::fs::read_link(root.join(child.trim_start_matches('/')))
                    .with_context(|| format!("reading the symlink {child}"))?;
                Some(
                    t.into_os_string()
                        .into_string()
                        .map_err(|t| anyhow!("{child}: the symlink target {t:?} is not UTF-8"))?,
                )
            } else if ft.is_file() {
                None
            } else {
                bail!("{child}: a device node, socket or fifo (an ostree commit holds none)");
            };
            leaves.push(Leaf {
                dir: index,
                xattrs: xattrs_of(&child, meta.mode)?.to_variant(),
                name,
                meta,
                target,
            });
        }
        // Popped last first: pushed in reverse, walked in name order.
        pending.extend(subdirs.into_iter().rev());
    }
    Ok((dirs, leaves, touched))
}

/// Which regular files may become their object in place: those whose
/// every hard link is in the tree with the same header (an object has one
/// set of metadata; a link from outside would see the object change).
fn adoptable(leaves: &[Leaf]) -> Vec<bool> {
    // Per inode: the links seen, and their header if they all agree.
    type Links = (u64, Option<Vec<u8>>);
    let mut links: HashMap<(u64, u64), Links> = HashMap::new();
    for l in leaves
        .iter()
        .filter(|l| l.target.is_none() && l.meta.nlink > 1)
    {
        let header = l.header();
        let e = links
            .entry((l.meta.dev, l.meta.ino))
            .or_insert((0, Some(header.clone())));
        e.0 += 1;
        if e.1.as_ref() != Some(&header) {
            e.1 = None;
        }
    }
    leaves
        .iter()
        .map(|l| {
            l.target.is_none()
                && (l.meta.nlink == 1
                    || links
                        .get(&(l.meta.dev, l.meta.ino))
                        .is_some_and(|(n, same)| *n == l.meta.nlink && same.is_some()))
        })
        .collect()
}

/// The leaf's ostree checksum: SHA-256 of its header and content.
fn checksum(leaf: &Leaf, path: &Path) -> std::io::Result<String> {
    match leaf.target {
        None => file_checksum(&leaf.header(), path),
        Some(_) => Ok(hex::encode(Sha256::digest(leaf.header()))),
    }
}

/// The ostree checksum of the regular file at `path` given its file
/// `header` ([`strata_oscontainer::file_header`]): SHA-256 of the header,
/// then the content.
pub(crate) fn file_checksum(header: &[u8], path: &Path) -> std::io::Result<String> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 256 * 1024]);
    }
    let mut sha = Sha256::new();
    sha.update(header);
    let mut f = std::fs::File::open(path)?;
    BUF.with_borrow_mut(|buf| loop {
        match f.read(buf)? {
            0 => return Ok::<_, std::io::Error>(()),
            n => sha.update(&buf[..n]),
        }
    })?;
    Ok(hex::encode(sha.finalize()))
}

fn object_path(objects: &Path, checksum: &str) -> PathBuf {
    objects
        .join(&checksum[..2])
        .join(format!("{}.file", &checksum[2..]))
}

/// Extended attributes a file may carry on disk when it becomes an object
/// (the build host's own label; a previous object's metadata).
const ADOPTABLE_XATTRS: &[&str] = &["security.selinux", "user.ostreemeta"];

/// Makes the file at `path` the object `checksum`: the metadata libostree's
/// bare-user writer gives an object (`user.ostreemeta`, mode
/// `(mode & 0775) | 0400`, mtime 0), then a hard link into `objects/`.
/// `Ok(false)`: it cannot be (permissions, another filesystem, xattrs an
/// object must not carry); the caller writes it the ordinary way.
fn adopt(leaf: &Leaf, path: &Path, objects: &Path, checksum: &str) -> Result<bool> {
    use rustix::io::Errno;
    let declined = |e: Errno| {
        matches!(
            e,
            Errno::PERM | Errno::ACCESS | Errno::XDEV | Errno::NOTSUP | Errno::ROFS | Errno::MLINK
        )
    };
    let foreign = strata_process::xattr::names(path)?.iter().any(|name| {
        !ADOPTABLE_XATTRS
            .iter()
            .any(|a| a.as_bytes() == name.as_bytes())
    });
    if foreign {
        return Ok(false);
    }
    let object = object_path(objects, checksum);
    let steps = || -> rustix::io::Result<()> {
        rustix::fs::lsetxattr(
            path,
            "user.ostreemeta",
            &leaf.ostreemeta(),
            XattrFlags::empty(),
        )?;
        rustix::fs::chmod(path, Mode::from_raw_mode(object_mode(leaf.meta.mode)))?;
        rustix::fs::utimensat(CWD, path, &mtime_zero(), AtFlags::SYMLINK_NOFOLLOW)?;
        match rustix::fs::mkdir(
            object.parent().expect("sharded"),
            Mode::from_raw_mode(0o755),
        ) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        match rustix::fs::linkat(CWD, path, CWD, &object, AtFlags::empty()) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e),
        }
    };
    match steps() {
        Ok(()) => Ok(true),
        Err(e) if declined(e) => Ok(false),
        Err(e) => {
            Err(e).with_context(|| format!("storing {} as the object {checksum}", path.display()))
        }
    }
}

/// Timestamps that set an object's modification time (0) and leave its
/// access time.
pub(crate) fn mtime_zero() -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    }
}

/// The mode of a bare-user object on disk, for a file of `mode`.
pub(crate) fn object_mode(mode: u32) -> u32 {
    (mode & 0o775) | 0o400
}

/// Makes a copy of the file at `path` (in the kernel) in `tmp`, beside
/// the objects, and [`adopt`]s the copy as the object `checksum`.
fn adopt_copy(
    leaf: &Leaf,
    path: &Path,
    tmp: &Path,
    objects: &Path,
    checksum: &str,
) -> Result<bool> {
    let copy = tempfile::NamedTempFile::new_in(tmp)
        .with_context(|| format!("creating a file in {}", tmp.display()))?;
    std::fs::copy(path, copy.path())
        .with_context(|| format!("copying {} into {}", path.display(), tmp.display()))?;
    adopt(leaf, copy.path(), objects, checksum)
}

/// Writes the leaf through libostree, which checks `checksum` against its
/// own.
fn write_with_libostree(
    repo: &ostree::Repo,
    leaf: &Leaf,
    path: &Path,
    checksum: &str,
) -> Result<()> {
    let cancel = gio::Cancellable::NONE;
    let info = leaf.meta.file_info(leaf.target.as_deref());
    let input: gio::InputStream = match leaf.target {
        Some(_) => gio::MemoryInputStream::new().upcast(),
        None => gio::File::for_path(path).read(cancel)?.upcast(),
    };
    let (stream, len) =
        ostree::raw_file_to_content_stream(&input, &info, Some(&leaf.xattrs), cancel)?;
    repo.write_content(Some(checksum), &stream, len, cancel)?;
    Ok(())
}

/// One mutable tree per directory, in the walk's order, each with its
/// directory metadata written.
fn mtrees(repo: &ostree::Repo, dirs: &[Dir]) -> Result<Vec<ostree::MutableTree>> {
    let cancel = gio::Cancellable::NONE;
    let mut trees: Vec<ostree::MutableTree> = Vec::with_capacity(dirs.len());
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut written: HashMap<Vec<u8>, String> = HashMap::new();
    for (i, d) in dirs.iter().enumerate() {
        let tree = match d.path.rsplit_once('/') {
            _ if d.path == "/" => ostree::MutableTree::new(),
            Some((parent, name)) => {
                let parent = if parent.is_empty() { "/" } else { parent };
                trees[index[parent]].ensure_dir(name)?
            }
            None => unreachable!("commit paths start with /"),
        };
        let dirmeta = ostree::create_directory_metadata(&d.meta.file_info(None), Some(&d.xattrs));
        let key = dirmeta.data().to_vec();
        let checksum = match written.get(&key) {
            Some(c) => c.clone(),
            None => {
                let c = repo
                    .write_metadata(ostree::ObjectType::DirMeta, None, &dirmeta, cancel)
                    .with_context(|| format!("writing the metadata of {}", d.path))?
                    .to_string();
                written.insert(key, c.clone());
                c
            }
        };
        tree.set_metadata_checksum(&checksum);
        index.insert(&d.path, i);
        trees.push(tree);
    }
    Ok(trees)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// libostree's own writer, the judge: the same tree through
    /// `write_directory_to_mtree` with the same xattrs.
    fn libostree_root(repo: &ostree::Repo, tree: &Path) -> String {
        let cancel = gio::Cancellable::NONE;
        let mtree = ostree::MutableTree::new();
        let modifier = ostree::RepoCommitModifier::new(ostree::RepoCommitModifierFlags::NONE, None);
        modifier.set_xattr_callback(|_, _, _| Xattrs::new().to_variant());
        repo.write_directory_to_mtree(&gio::File::for_path(tree), &mtree, Some(&modifier), cancel)
            .unwrap();
        root_of(repo, &mtree)
    }

    fn root_of(repo: &ostree::Repo, mtree: &ostree::MutableTree) -> String {
        let root = repo.write_mtree(mtree, gio::Cancellable::NONE).unwrap();
        let root = root.downcast_ref::<ostree::RepoFile>().unwrap();
        format!(
            "{}/{}",
            root.tree_get_contents_checksum().unwrap(),
            root.tree_get_metadata_checksum().unwrap()
        )
    }

    fn repo(path: &Path) -> ostree::Repo {
        let repo = ostree::Repo::new_for_path(path);
        std::fs::create_dir_all(path).unwrap();
        repo.create(ostree::RepoMode::BareUser, gio::Cancellable::NONE)
            .unwrap();
        repo
    }

    fn file(path: &Path, content: &[u8], mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_tree_commits_as_libostree_commits_it_and_fsck_passes() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        file(&tree.join("usr/bin/passwd"), b"setuid", 0o4755);
        file(&tree.join("usr/bin/tool"), &vec![7u8; 3 << 20], 0o755);
        file(&tree.join("usr/etc/shadow"), b"root:!::", 0o000);
        file(&tree.join("usr/share/same-a"), b"same", 0o644);
        file(&tree.join("usr/share/same-b"), b"same", 0o644);
        file(&tree.join("usr/share/world"), b"w", 0o666);
        file(&tree.join("usr/share/empty"), b"", 0o644);
        // Hard links inside the tree; one reaching outside it.
        std::fs::hard_link(tree.join("usr/bin/tool"), tree.join("usr/bin/tool-alias")).unwrap();
        file(&tree.join("usr/lib/linked-out"), b"out", 0o644);
        std::fs::hard_link(tree.join("usr/lib/linked-out"), t.path().join("outside")).unwrap();
        // A file with an xattr its object must not carry.
        file(&tree.join("usr/lib/tagged"), b"tagged", 0o644);
        rustix::fs::lsetxattr(
            tree.join("usr/lib/tagged"),
            "user.builder",
            b"x",
            XattrFlags::empty(),
        )
        .unwrap();
        symlink("../lib/tagged", tree.join("usr/bin/link")).unwrap();
        symlink("/dangling", tree.join("usr/dangling")).unwrap();
        std::fs::create_dir_all(tree.join("var/empty")).unwrap();
        std::fs::set_permissions(
            tree.join("var/empty"),
            std::fs::Permissions::from_mode(0o711),
        )
        .unwrap();
        let twin = t.path().join("twin");
        let cp = std::process::Command::new("cp")
            .args(["-a"])
            .arg(&tree)
            .arg(&twin)
            .status()
            .unwrap();
        assert!(cp.success());

        let reference = repo(&t.path().join("reference"));
        let expected = libostree_root(&reference, &twin);
        let ours = repo(&t.path().join("ours"));
        ours.prepare_transaction(gio::Cancellable::NONE).unwrap();
        let mtree = write_tree(&ours, &tree, &Known::new(), &mut |_, _| Ok(Xattrs::new()))
            .unwrap()
            .tree;
        let got = root_of(&ours, &mtree);
        ours.commit_transaction(gio::Cancellable::NONE).unwrap();
        assert_eq!(got, expected);

        // The adopted file is now its object; the one linked from outside
        // and the tagged one were copied.
        let outside = std::fs::metadata(t.path().join("outside")).unwrap();
        assert_eq!(outside.nlink(), 2, "the outside link is left alone");
        assert_eq!(
            std::fs::metadata(tree.join("usr/bin/tool"))
                .unwrap()
                .nlink(),
            3
        );
        assert_eq!(
            std::fs::metadata(tree.join("usr/lib/tagged"))
                .unwrap()
                .nlink(),
            1
        );

        // ostree's own check of every object of a commit of that tree.
        let ours_path = t.path().join("ours");
        let cancel = gio::Cancellable::NONE;
        ours.prepare_transaction(cancel).unwrap();
        let root = ours.write_mtree(&mtree, cancel).unwrap();
        let root = root.downcast_ref::<ostree::RepoFile>().unwrap();
        let c = ours
            .write_commit_with_time(None, None, None, None, root, 0, cancel)
            .unwrap();
        ours.transaction_set_ref(None, "t", Some(&c));
        ours.commit_transaction(cancel).unwrap();
        let fsck = std::process::Command::new("ostree")
            .arg(format!("--repo={}", ours_path.display()))
            .arg("fsck")
            .output()
            .expect("ostree (Debian package ostree) runs");
        assert!(
            fsck.status.success(),
            "ostree fsck: {}",
            String::from_utf8_lossy(&fsck.stderr)
        );
    }
}
