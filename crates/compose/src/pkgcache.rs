//! The package cache: each package's files under `/usr` stored once, as
//! objects of the workdir's repository, and hard-linked into the staging
//! root before librpm runs; librpm then skips them (`%_netsharedpath`)
//! and does everything else as in any install: the rest of the files, the
//! directories it owns, the scriptlets, the rpm database.
//!
//! Why: installing is most of a compose, and nearly all of it is writing
//! the same 2.5 GB of files again after a z-stream changed a handful of
//! packages. A linked file costs one `link()`, and it is already the object
//! the commit needs (the commit neither reads nor writes it). rpm-ostree's
//! package cache is the model (packages imported into ostree once, checked
//! out with hard links); unlike rpm-ostree, librpm still runs the
//! transaction, so scriptlets, triggers and the database are librpm's own.
//!
//! Which entries are linked (placed): under `/usr/`, owned by root:root, no
//! file capabilities, not `%config`, not a `%doc` when documentation is
//! off, regular files that are not hard-linked inside their package, and
//! symlinks and directories; a path is placed only when every package
//! listing it agrees on it. Directories are placed whole (every entry below
//! them placed) and listed in `%_netsharedpath` as one prefix; other placed
//! entries are listed one by one. Everything else is librpm's.
//!
//! The rpm database records skipped files as net-shared: compose rewrites
//! that state to the normal one (`strata_rpmdb::convert_placed`).
//!
//! librpm reads a package's substitute (written when the package is
//! stored, see [`crate::payload`]) instead of the package when every file
//! the package stored is placed: it then decompresses zeros, not the
//! content, to get past what it skips.
//!
//! What it must not do:
//! - let an object change: a tree file that is an object has no other link
//!   in the tree (a second path with the same content gets a copy), and a
//!   file changed in place after linking (its change time moved) is
//!   committed from what it holds; its object is checked and written again
//!   from the package ([`Cache::repair`]);
//! - trust an index whose objects are gone (pruned): the package is read
//!   again; nor write an index before the commit synced its objects;
//! - place anything below a symlink (symlinks are placed last).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use ostree::glib;
use rayon::prelude::*;
use rpm::{FileFlags, FileType, IndexSignatureTag, IndexTag};
use rustix::fs::{AtFlags, XattrFlags, CWD};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::commit::{self, Known, KnownFile};
use crate::payload;

/// The format of an index file; another one is read again from the package.
const INDEX_VERSION: u32 = 1;

/// A package to install: its NEVRA and its downloaded file.
pub(crate) struct Input<'a> {
    pub nevra: &'a str,
    pub path: &'a Path,
}

/// The package cache of a workdir: index files (one per package, by its
/// header's SHA-256) naming the objects that hold its files.
pub(crate) struct Cache {
    index_dir: PathBuf,
    objects: PathBuf,
    tmp: PathBuf,
}

/// Which object holds each cacheable regular file of a package.
#[derive(Serialize, Deserialize)]
struct Index {
    version: u32,
    nevra: String,
    /// Path → object checksum.
    files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    File,
    Symlink(String),
    Dir,
    Ghost,
}

/// An entry of a package's file list that may be placed.
#[derive(Debug, Clone)]
struct Entry {
    path: String,
    kind: Kind,
    mode: u32,
    /// The object holding a regular file.
    object: Option<String>,
}

/// A package's entries by path: placeable ones (`Some`) and the others
/// (`None`: librpm's).
type Entries = BTreeMap<String, Option<Entry>>;

/// A package's entries, placeable ones (`Some`) and the others (`None`:
/// librpm's), by path.
struct Loaded {
    nevra: String,
    package: PathBuf,
    /// The index of a package stored now, by key.
    new_index: Option<(String, Index)>,
    entries: BTreeMap<String, Option<Entry>>,
    /// Its substitute, and the stored files librpm would install (all but
    /// the documentation it leaves out): it may read the substitute when
    /// every one of them is placed.
    substitute: Option<(PathBuf, Vec<String>)>,
}

/// What is placed before the install, and what librpm is told to skip.
pub(crate) struct Plan {
    /// `%_netsharedpath`'s entries, those covering most entries first.
    pub netshared: Vec<String>,
    /// Directories placed whole (librpm skips them), parents first, with
    /// the mode every package listing them gives them.
    dirs: Vec<(String, u32)>,
    /// The mode of each directory librpm installs that every package
    /// listing it agrees on: given to it when it is made as the parent of
    /// a placed entry (librpm leaves the mode of a directory whose files
    /// it all skipped as it finds it). One nothing is placed in is
    /// librpm's alone: a documentation directory it leaves out with its
    /// files is not made.
    parent_modes: BTreeMap<String, u32>,
    symlinks: Vec<(String, String)>,
    files: Vec<PlannedFile>,
    /// The indexes of the packages stored by this compose.
    pub new_indexes: NewIndexes,
    /// The packages librpm reads from their substitutes, by NEVRA.
    pub substitutes: Vec<(String, PathBuf)>,
}

/// Indexes not written yet (see [`Cache::remember`]).
#[derive(Default)]
pub(crate) struct NewIndexes(Vec<(String, Index)>);

/// A regular file placed from its object.
struct PlannedFile {
    path: String,
    object: String,
    mode: u32,
    /// A package holding it, to write the object again from.
    package: PathBuf,
}

/// The placed files, for the commit.
pub(crate) struct Placed {
    pub known: Known,
    /// Each linked object: a package holding it, its path there, its mode.
    sources: HashMap<String, (PathBuf, String, u32)>,
    pub linked: usize,
    pub copied: usize,
}

impl Cache {
    pub(crate) fn new(index_dir: &Path, repo: &Path) -> Cache {
        Cache {
            index_dir: index_dir.to_path_buf(),
            objects: repo.join("objects"),
            tmp: repo.join("tmp"),
        }
    }

    /// Reads every package's file list and finds its objects, storing the
    /// files of packages seen for the first time; then plans what is
    /// placed. `documentation`: whether `%doc` files are installed.
    pub(crate) fn plan(&self, inputs: &[Input<'_>], documentation: bool) -> Result<Plan> {
        std::fs::create_dir_all(&self.index_dir)
            .with_context(|| format!("creating {}", self.index_dir.display()))?;
        let mut loaded: Vec<Loaded> = inputs
            .par_iter()
            .map(|i| self.load(i, documentation))
            .collect::<Result<_>>()?;
        let mut plan = plan(&loaded)?;
        plan.new_indexes = NewIndexes(
            loaded
                .iter_mut()
                .filter_map(|l| l.new_index.take())
                .collect(),
        );
        Ok(plan)
    }

    fn index_path(&self, key: &str) -> PathBuf {
        self.index_dir.join(format!("{key}.json"))
    }

    /// The package's substitute: its headers, and its payload with zeros
    /// for the content of the files its index names.
    fn substitute_path(&self, key: &str) -> PathBuf {
        self.index_dir.join(format!("{key}.rpm"))
    }

    fn object_path(&self, checksum: &str) -> PathBuf {
        self.objects
            .join(&checksum[..2])
            .join(format!("{}.file", &checksum[2..]))
    }

    /// The package's entries; its files stored as objects unless an index
    /// says they are already (and they are).
    fn load(&self, input: &Input<'_>, documentation: bool) -> Result<Loaded> {
        let what = || format!("{} ({})", input.nevra, input.path.display());
        let (metadata, package) = open_package(input.path).with_context(what)?;
        let key = metadata
            .signature
            .get_entry_data_as_string(IndexSignatureTag::RPMSIGTAG_SHA256)
            .ok()
            .filter(|k| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_owned);
        let (mut entries, undocumented) = entries(&metadata, documentation).with_context(what)?;
        let mut new_index = None;
        let objects = match &key {
            Some(key) => match self.read_index(key) {
                Some(index) => Some(index.files),
                None => self
                    .import(input, Some(key), &metadata, package)
                    .with_context(what)?
                    .map(|index| {
                        let files = index.files.clone();
                        new_index = Some((key.clone(), index));
                        files
                    }),
            },
            None => None,
        };
        for e in entries.values_mut() {
            let keep = match e {
                Some(Entry {
                    kind: Kind::File,
                    path,
                    object,
                    ..
                }) => {
                    *object = objects.as_ref().and_then(|o| o.get(path.as_str()).cloned());
                    object.is_some()
                }
                _ => true,
            };
            if !keep {
                *e = None;
            }
        }
        // The substitute holds zeros for the stored files: librpm may read
        // it only when it installs none of them.
        let substitute = key
            .map(|k| self.substitute_path(&k))
            .filter(|p| p.exists())
            .map(|p| {
                let stored = objects.iter().flat_map(BTreeMap::keys);
                let required = stored.filter(|f| !undocumented.contains(*f)).cloned();
                (p, required.collect())
            });
        Ok(Loaded {
            nevra: input.nevra.to_string(),
            package: input.path.to_path_buf(),
            entries,
            new_index,
            substitute,
        })
    }

    /// Removes the indexes that name objects the repository no longer
    /// holds; returns how many.
    pub(crate) fn forget_pruned(&self) -> Result<usize> {
        let entries = match std::fs::read_dir(&self.index_dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => {
                return Err(e).with_context(|| format!("reading {}", self.index_dir.display()))
            }
        };
        let mut paths = entries
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<Vec<_>>>()?;
        // Indexes first (`json` before `rpm`): a substitute goes with its
        // index.
        paths.sort_by(|a, b| a.extension().cmp(&b.extension()));
        let mut removed = 0;
        for path in paths {
            let Some(key) = path.file_stem().and_then(|k| k.to_str()) else {
                continue;
            };
            let stale = match path.extension().and_then(|e| e.to_str()) {
                Some("json") => self.read_index(key).is_none(),
                // A substitute is read only beside its index.
                Some("rpm") => !self.index_path(key).exists(),
                _ => false,
            };
            if stale {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
                removed += usize::from(path.extension().is_some_and(|e| e == "json"));
            }
        }
        Ok(removed)
    }

    /// The index `key`, when every object it names is in the repository.
    fn read_index(&self, key: &str) -> Option<Index> {
        let path = self.index_path(key);
        let index: Index = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
        let whole = index.version == INDEX_VERSION
            && index
                .files
                .values()
                .all(|c| valid_checksum(c) && self.object_path(c).exists());
        if !whole {
            tracing::debug!(index = %path.display(), "package cache: index stale, reading the package again");
        }
        whole.then_some(index)
    }

    /// Stores the package's cacheable regular files as objects; returns its
    /// index (written by [`Cache::remember`]), or `None` when its payload
    /// cannot be read here (librpm installs it as usual). With `key`, also
    /// writes the package's substitute ([`crate::payload`]). `package` is
    /// the package file read up to its payload ([`open_package`]).
    fn import(
        &self,
        input: &Input<'_>,
        key: Option<&str>,
        metadata: &rpm::PackageMetadata,
        mut package: std::io::BufReader<std::fs::File>,
    ) -> Result<Option<Index>> {
        let headers = std::io::Seek::stream_position(&mut package)?;
        let listed = metadata
            .get_file_entries()
            .map_err(|e| anyhow!("reading the file list: {e}"))?;
        let linked_inside = hardlinked_inodes(metadata, &listed);
        let by_path: HashMap<String, &rpm::FileEntry<'_>> = listed
            .iter()
            .map(|e| (e.path().to_string_lossy().into_owned(), e))
            .collect();
        let substitute = tempfile::NamedTempFile::new_in(&self.index_dir)
            .with_context(|| format!("creating a file in {}", self.index_dir.display()))?;
        let mut head = std::fs::File::open(input.path)?.take(headers);
        let out = substitute.as_file().try_clone()?;
        let Some(mut split) = payload::Split::open(metadata, package, &mut head, out)? else {
            tracing::debug!(
                package = input.nevra,
                "package cache: payload not readable here; librpm installs it"
            );
            return Ok(None);
        };
        let mut files = BTreeMap::new();
        let mut buf = Vec::new();
        let empty = commit::no_xattrs();
        while let Some((path, size)) = split.next()? {
            let Some(e) = by_path.get(&path) else {
                bail!("the payload holds {path}, which the package's file list does not name");
            };
            // A member of a hard-link set whose content is elsewhere has
            // another size.
            let cacheable = cacheable(&path, e) == Some(Kind::File)
                && !linked_inside.contains(&path)
                && size == e.size() as u64;
            if !cacheable {
                continue;
            }
            split.take(&mut buf)?;
            let mode = u32::from(e.mode().raw_mode());
            let mut sha = Sha256::new();
            sha.update(strata_oscontainer::file_header(0, 0, mode, "", &empty));
            sha.update(&buf);
            let checksum = hex::encode(sha.finalize());
            self.write_object(&checksum, mode, &buf, &empty)
                .with_context(|| format!("storing {path} of {}", input.nevra))?;
            files.insert(path, checksum);
        }
        split.finish()?;
        if let Some(key) = key {
            let path = self.substitute_path(key);
            substitute
                .persist(&path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(Some(Index {
            version: INDEX_VERSION,
            nevra: input.nevra.to_string(),
            files,
        }))
    }

    /// Writes the indexes of the packages stored by this compose. Called
    /// once the commit is durable (libostree syncs the filesystem when it
    /// commits the transaction), so that no index outlives a crash that
    /// lost the content of its objects.
    pub(crate) fn remember(&self, indexes: NewIndexes) -> Result<()> {
        for (key, index) in indexes.0 {
            let path = self.index_path(&key);
            let mut tmp = tempfile::NamedTempFile::new_in(&self.index_dir)
                .with_context(|| format!("creating a file in {}", self.index_dir.display()))?;
            tmp.write_all(&serde_json::to_vec(&index)?)?;
            tmp.persist(&path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// Writes `content` as the bare-user object `checksum` (as libostree's
    /// writer would: `user.ostreemeta`, an object's mode, mtime 0), unless
    /// it is there.
    fn write_object(
        &self,
        checksum: &str,
        mode: u32,
        content: &[u8],
        xattrs: &glib::Variant,
    ) -> Result<()> {
        let object = self.object_path(checksum);
        if object.exists() {
            return Ok(());
        }
        let mut tmp = tempfile::NamedTempFile::new_in(&self.tmp)
            .with_context(|| format!("creating a file in {}", self.tmp.display()))?;
        tmp.write_all(content)?;
        let fd = tmp.as_file();
        rustix::fs::fsetxattr(
            fd,
            "user.ostreemeta",
            &commit::ostreemeta(0, 0, mode, xattrs),
            XattrFlags::empty(),
        )?;
        fd.set_permissions(std::fs::Permissions::from_mode(commit::object_mode(mode)))?;
        rustix::fs::futimens(fd, &commit::mtime_zero())?;
        let dir = object.parent().expect("sharded");
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
        match rustix::fs::linkat(CWD, tmp.path(), CWD, &object, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("linking {}", object.display())),
        }
    }

    /// Places the plan's entries under `root` (which holds nothing of
    /// theirs yet): directories, then each object hard-linked once (a
    /// second path with the same content gets a copy), then symlinks.
    pub(crate) fn place(&self, root: &Path, plan: &Plan) -> Result<Placed> {
        let at = |p: &str| root.join(p.trim_start_matches('/'));
        // Every directory needed, parents first; those no package lists
        // get 0755, as librpm gives them.
        let mut needed: BTreeSet<&str> = BTreeSet::new();
        let leaves = plan.dirs.iter().map(|(p, _)| p.as_str());
        let leaves = leaves.chain(plan.symlinks.iter().map(|(p, _)| parent(p)));
        for p in leaves.chain(plan.files.iter().map(|f| parent(&f.path))) {
            let mut p = p;
            while p != "/" && needed.insert(p) {
                p = parent(p);
            }
        }
        let mut modes: Vec<(&str, u32)> = Vec::new();
        for dir in &needed {
            match std::fs::create_dir(at(dir)) {
                Ok(()) => std::fs::set_permissions(at(dir), std::fs::Permissions::from_mode(0o755))
                    .with_context(|| format!("setting the mode of {dir}"))?,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e).with_context(|| format!("creating {dir}")),
            }
            if let Some(mode) = plan.parent_modes.get(*dir) {
                modes.push((dir, *mode));
            }
        }
        modes.extend(plan.dirs.iter().map(|(d, m)| (d.as_str(), *m)));
        modes.sort();
        let mut first: HashMap<&str, usize> = HashMap::new();
        let copy: Vec<bool> = plan
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| *first.entry(f.object.as_str()).or_insert(i) != i)
            .collect();
        let known: Vec<Option<((u64, u64), KnownFile)>> = plan
            .files
            .par_iter()
            .zip(copy.par_iter())
            .map(|(f, &copy)| {
                let (path, checksum, mode) = (&f.path, &f.object, &f.mode);
                let dest = at(path);
                let object = self.object_path(checksum);
                let copy_it = || -> Result<()> {
                    std::fs::copy(&object, &dest)
                        .with_context(|| format!("copying {path} from its object"))?;
                    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(*mode & 0o7777))
                        .with_context(|| format!("setting the mode of {path}"))
                };
                if copy {
                    copy_it()?;
                    return Ok(None);
                }
                match std::fs::hard_link(&object, &dest) {
                    Ok(()) => {}
                    // Another filesystem, too many links, no permission:
                    // a copy, which the commit reads like any file.
                    Err(e)
                        if matches!(
                            rustix::io::Errno::from_io_error(&e),
                            Some(
                                rustix::io::Errno::XDEV
                                    | rustix::io::Errno::MLINK
                                    | rustix::io::Errno::PERM
                            )
                        ) =>
                    {
                        copy_it()?;
                        return Ok(None);
                    }
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("linking {path} from its object {checksum}"))
                    }
                }
                let m = std::fs::symlink_metadata(&dest)
                    .with_context(|| format!("reading {}", dest.display()))?;
                Ok(Some((
                    (m.dev(), m.ino()),
                    KnownFile {
                        checksum: checksum.clone(),
                        mode: *mode,
                        ctime: (m.ctime(), m.ctime_nsec()),
                    },
                )))
            })
            .collect::<Result<_>>()?;
        // Symlinks after everything else: no path above stays a symlink
        // while something is placed below it (a package's symlink to an
        // absolute target must never lead a later write out of the root).
        // One where a directory is already fails, as a conflict would.
        for (path, target) in &plan.symlinks {
            std::os::unix::fs::symlink(target, at(path))
                .with_context(|| format!("creating the symlink {path}"))?;
        }
        // Modes last: a directory without write permission still gets its
        // entries first.
        for (dir, mode) in modes.iter().rev() {
            std::fs::set_permissions(at(dir), std::fs::Permissions::from_mode(mode & 0o7777))
                .with_context(|| format!("setting the mode of {dir}"))?;
        }
        let known: Known = known.into_iter().flatten().collect();
        let sources = plan
            .files
            .iter()
            .map(|f| {
                let source = (f.package.clone(), f.path.clone(), f.mode);
                (f.object.clone(), source)
            })
            .collect();
        Ok(Placed {
            linked: known.len(),
            copied: plan.files.len() - known.len(),
            known,
            sources,
        })
    }

    /// Puts back the objects the commit reported as touched (a file linked
    /// from them was changed in place after it was placed): their metadata
    /// when only that changed, else their content, read again from the
    /// package. Earlier commits hold these objects. Returns how many were
    /// written again.
    pub(crate) fn repair(&self, placed: &Placed, touched: &[String]) -> Result<usize> {
        let mut rewritten = 0;
        let empty = commit::no_xattrs();
        for checksum in touched.iter().collect::<BTreeSet<_>>() {
            let Some((package, path, mode)) = placed.sources.get(checksum.as_str()) else {
                bail!("the commit reported the object {checksum}, which no placed file came from");
            };
            let object = self.object_path(checksum);
            let header = strata_oscontainer::file_header(0, 0, *mode, "", &empty);
            if commit::file_checksum(&header, &object).is_ok_and(|c| c == **checksum) {
                self.set_object_metadata(&object, *mode, &empty)
                    .with_context(|| format!("restoring the metadata of the object {checksum}"))?;
                continue;
            }
            tracing::warn!(
                "{path} was changed in place after the package cache placed it; its object {checksum} is written again from {}",
                package.display()
            );
            std::fs::remove_file(&object)
                .with_context(|| format!("removing the changed object {}", object.display()))?;
            // Storing the package again writes the objects it lacks.
            let name = package.display().to_string();
            let input = Input {
                nevra: &name,
                path: package,
            };
            open_package(package)
                .and_then(|(metadata, reader)| self.import(&input, None, &metadata, reader))
                .with_context(|| format!("reading {name} again"))?;
            if !object.exists() {
                bail!("the object {checksum} ({path}) was changed in place and {name} no longer holds it");
            }
            rewritten += 1;
        }
        Ok(rewritten)
    }

    /// An object's metadata as [`Cache::write_object`] gives it.
    fn set_object_metadata(&self, object: &Path, mode: u32, xattrs: &glib::Variant) -> Result<()> {
        let owner = std::fs::metadata(&self.objects)?;
        std::os::unix::fs::lchown(object, Some(owner.uid()), Some(owner.gid()))?;
        rustix::fs::lsetxattr(
            object,
            "user.ostreemeta",
            &commit::ostreemeta(0, 0, mode, xattrs),
            XattrFlags::empty(),
        )?;
        std::fs::set_permissions(
            object,
            std::fs::Permissions::from_mode(commit::object_mode(mode)),
        )?;
        rustix::fs::utimensat(
            CWD,
            object,
            &commit::mtime_zero(),
            AtFlags::SYMLINK_NOFOLLOW,
        )?;
        Ok(())
    }
}

/// A package file's headers, and the file read up to its payload.
fn open_package(path: &Path) -> Result<(rpm::PackageMetadata, std::io::BufReader<std::fs::File>)> {
    let mut reader = std::io::BufReader::new(std::fs::File::open(path)?);
    let metadata = rpm::PackageMetadata::parse(&mut reader).map_err(|e| anyhow!("{e}"))?;
    Ok((metadata, reader))
}

fn valid_checksum(c: &str) -> bool {
    c.len() == 64 && c.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The paths of a package's regular files that share an inode with
/// another of its files (rpm's hard-link sets): librpm installs those.
fn hardlinked_inodes(
    metadata: &rpm::PackageMetadata,
    entries: &[rpm::FileEntry<'_>],
) -> BTreeSet<String> {
    let inodes = metadata
        .header
        .get_entry_data_as_u32_array(IndexTag::RPMTAG_FILEINODES)
        .unwrap_or_default();
    if inodes.len() != entries.len() {
        // Without inode numbers nothing can be told apart: none is cached.
        return entries
            .iter()
            .map(|e| e.path().to_string_lossy().into_owned())
            .collect();
    }
    let mut count: HashMap<u32, usize> = HashMap::new();
    for (e, ino) in entries.iter().zip(&inodes) {
        if e.file_type() == FileType::Regular {
            *count.entry(*ino).or_default() += 1;
        }
    }
    entries
        .iter()
        .zip(&inodes)
        .filter(|(e, ino)| e.file_type() == FileType::Regular && count[ino] > 1)
        .map(|(e, _)| e.path().to_string_lossy().into_owned())
        .collect()
}

/// Characters a placed path may hold: `%_netsharedpath` is macro-expanded
/// and split at `:`.
fn plain_path(p: &str) -> bool {
    p.starts_with("/usr/")
        && !p.contains("/../")
        && !p.contains("/./")
        && !p.ends_with('/')
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._+-@,=~".contains(&b))
}

/// What the entry is, when it may be placed at all.
fn cacheable(path: &str, e: &rpm::FileEntry<'_>) -> Option<Kind> {
    let flags = e.flags();
    if !plain_path(path)
        || e.user() != "root"
        || e.group() != "root"
        || e.caps().is_some_and(|c| !c.is_empty())
        || flags.contains(FileFlags::CONFIG)
    {
        return None;
    }
    if flags.contains(FileFlags::GHOST) {
        return Some(Kind::Ghost);
    }
    match e.file_type() {
        FileType::Regular => Some(Kind::File),
        FileType::Dir => Some(Kind::Dir),
        FileType::SymbolicLink => e
            .linkto()
            .filter(|t| !t.is_empty())
            .map(|t| Kind::Symlink(t.to_string())),
        _ => None,
    }
}

/// The package's file list: placeable entries and the others; and the
/// documentation librpm leaves out.
fn entries(
    metadata: &rpm::PackageMetadata,
    documentation: bool,
) -> Result<(Entries, BTreeSet<String>)> {
    let listed = metadata
        .get_file_entries()
        .map_err(|e| anyhow!("reading the file list: {e}"))?;
    let linked_inside = hardlinked_inodes(metadata, &listed);
    let mut out = BTreeMap::new();
    let mut undocumented = BTreeSet::new();
    for e in listed {
        let path = e.path().to_string_lossy().into_owned();
        if !documentation && e.flags().contains(FileFlags::DOC) {
            undocumented.insert(path.clone());
        }
        let kind = cacheable(&path, &e)
            .filter(|_| documentation || !e.flags().contains(FileFlags::DOC))
            .filter(|k| *k != Kind::File || !linked_inside.contains(&path));
        let entry = kind.map(|kind| Entry {
            path: path.clone(),
            kind,
            mode: u32::from(e.mode().raw_mode()),
            object: None,
        });
        out.insert(path, entry);
    }
    Ok((out, undocumented))
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

/// What is placed: the paths every package agrees on, where nothing
/// librpm installs lies below a placed directory.
fn plan(loaded: &[Loaded]) -> Result<Plan> {
    // Every package's say on each path.
    let mut by_path: BTreeMap<&str, Vec<(&Loaded, Option<&Entry>)>> = BTreeMap::new();
    for l in loaded {
        for (path, e) in &l.entries {
            by_path
                .entry(path.as_str())
                .or_default()
                .push((l, e.as_ref()));
        }
    }
    let mut placeable: BTreeMap<&str, (&Loaded, &Entry)> = BTreeMap::new();
    let mut blocked: BTreeSet<&str> = BTreeSet::new();
    blocked.insert("/");
    for (path, says) in &by_path {
        let solid: Vec<(&Loaded, &Entry)> = says
            .iter()
            .filter_map(|(n, e)| e.map(|e| (*n, e)))
            .filter(|(_, e)| e.kind != Kind::Ghost)
            .collect();
        let all = says.iter().all(|(_, e)| e.is_some());
        let agree = solid.windows(2).all(|w| {
            let (a, b) = (w[0].1, w[1].1);
            a.kind == b.kind && a.mode == b.mode && a.object == b.object
        });
        if all && !agree && solid.iter().all(|(_, e)| e.kind != Kind::Dir) {
            let (a, b) = (&solid[0].0.nevra, &solid[1].0.nevra);
            bail!("file {path} conflicts between attempted installs of {a} and {b}");
        }
        if all && agree {
            if let Some(first) = solid.first() {
                placeable.insert(path, *first);
            }
            continue;
        }
        // librpm installs this path: no directory at or above it is placed
        // whole.
        blocked.insert(path);
        let mut p = *path;
        while p != "/" {
            p = parent(p);
            if !blocked.insert(p) {
                break;
            }
        }
    }
    // A placed entry is listed by its highest ancestor placed whole.
    let mut covering: BTreeMap<&str, usize> = BTreeMap::new();
    let mut dirs = Vec::new();
    let mut parent_modes = BTreeMap::new();
    let mut symlinks = Vec::new();
    let mut files = Vec::new();
    for (path, (from, e)) in &placeable {
        // A directory librpm installs something below is not skipped.
        if e.kind == Kind::Dir && blocked.contains(path) {
            parent_modes.insert(path.to_string(), e.mode);
            continue;
        }
        let mut top = *path;
        while !blocked.contains(parent(top)) {
            top = parent(top);
        }
        *covering.entry(top).or_default() += 1;
        match &e.kind {
            Kind::Dir => dirs.push((path.to_string(), e.mode)),
            Kind::Symlink(t) => symlinks.push((path.to_string(), t.clone())),
            Kind::File => files.push(PlannedFile {
                path: path.to_string(),
                object: e.object.clone().expect("placeable files have objects"),
                mode: e.mode,
                package: from.package.clone(),
            }),
            Kind::Ghost => {}
        }
    }
    let mut netshared: Vec<(&str, usize)> = covering.into_iter().collect();
    netshared.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let substitutes = loaded
        .iter()
        .filter_map(|l| {
            let (path, required) = l.substitute.as_ref()?;
            let all_placed = required.iter().all(|f| placeable.contains_key(f.as_str()));
            all_placed.then(|| (l.nevra.clone(), path.clone()))
        })
        .collect();
    Ok(Plan {
        netshared: netshared.into_iter().map(|(p, _)| p.to_string()).collect(),
        dirs,
        parent_modes,
        symlinks,
        files,
        new_indexes: NewIndexes::default(),
        substitutes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: Kind, mode: u32, object: Option<&str>) -> (String, Option<Entry>) {
        (
            path.to_string(),
            Some(Entry {
                path: path.to_string(),
                kind,
                mode,
                object: object.map(str::to_string),
            }),
        )
    }

    fn loaded<const N: usize>(nevra: &str, entries: [(String, Option<Entry>); N]) -> Loaded {
        Loaded {
            nevra: nevra.to_string(),
            package: PathBuf::new(),
            new_index: None,
            entries: entries.into_iter().collect(),
            substitute: None,
        }
    }

    #[test]
    fn directories_are_listed_whole_unless_librpm_installs_something_below() {
        let a = loaded(
            "a-1-1.x86_64",
            [
                entry("/usr/bin", Kind::Dir, 0o40555, None),
                entry("/usr/bin/a", Kind::File, 0o100755, Some("aa")),
                entry("/usr/share/a", Kind::Dir, 0o40755, None),
                entry("/usr/share/a/x", Kind::File, 0o100644, Some("bb")),
                ("/usr/bin/ping".to_string(), None),
            ],
        );
        let plan = plan(&[a]).unwrap();
        assert_eq!(plan.netshared, ["/usr/share", "/usr/bin/a"]);
        assert_eq!(plan.dirs, [("/usr/share/a".to_string(), 0o40755)]);
        assert_eq!(plan.parent_modes["/usr/bin"], 0o40555);
        assert_eq!(plan.files.len(), 2);
    }

    #[test]
    fn a_package_reads_its_substitute_only_when_every_file_it_stored_is_placed() {
        let with = |l: Loaded, required: &[&str]| Loaded {
            substitute: Some((
                PathBuf::from(format!("/cache/{}.rpm", l.nevra)),
                required.iter().map(|f| f.to_string()).collect(),
            )),
            ..l
        };
        let a = loaded(
            "a-1-1.x86_64",
            [
                entry("/usr/lib/f", Kind::File, 0o100644, Some("aa")),
                entry("/usr/lib/g", Kind::File, 0o100644, Some("bb")),
            ],
        );
        // b ships /usr/lib/g as librpm's (as %config, say): librpm
        // installs it, so a must give librpm its whole payload.
        let b = loaded("b-1-1.x86_64", [("/usr/lib/g".to_string(), None)]);
        let c = loaded(
            "c-1-1.x86_64",
            [entry("/usr/lib/h", Kind::File, 0o100644, Some("cc"))],
        );
        let p = plan(&[
            with(a, &["/usr/lib/f", "/usr/lib/g"]),
            with(b, &[]),
            with(c, &["/usr/lib/h"]),
        ])
        .unwrap();
        let substituted: Vec<&str> = p.substitutes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(substituted, ["b-1-1.x86_64", "c-1-1.x86_64"]);
        assert_eq!(p.substitutes[1].1, Path::new("/cache/c-1-1.x86_64.rpm"));
    }

    #[test]
    fn differing_files_conflict_and_differing_directories_go_to_librpm() {
        let a = loaded(
            "a-1-1.x86_64",
            [
                entry("/usr/lib/d", Kind::Dir, 0o40755, None),
                entry("/usr/lib/f", Kind::File, 0o100644, Some("aa")),
            ],
        );
        let b = loaded(
            "b-1-1.x86_64",
            [entry("/usr/lib/d", Kind::Dir, 0o40700, None)],
        );
        let p = plan(&[a, b]).unwrap();
        assert_eq!(p.netshared, ["/usr/lib/f"]);
        let c = loaded(
            "c-1-1.x86_64",
            [entry("/usr/lib/f", Kind::File, 0o100644, Some("cc"))],
        );
        let a = loaded(
            "a-1-1.x86_64",
            [entry("/usr/lib/f", Kind::File, 0o100644, Some("aa"))],
        );
        let e = plan(&[a, c]).err().unwrap().to_string();
        assert_eq!(
            e,
            "file /usr/lib/f conflicts between attempted installs of a-1-1.x86_64 and c-1-1.x86_64"
        );
    }

    #[test]
    fn a_packaged_symlink_never_leads_a_placed_file_out_of_the_root() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let cache = Cache::new(&t.path().join("index"), &t.path().join("repo"));
        let checksum = "ab".repeat(32);
        let object = cache.object_path(&checksum);
        std::fs::create_dir_all(object.parent().unwrap()).unwrap();
        std::fs::write(&object, b"x").unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let plan = Plan {
            netshared: Vec::new(),
            dirs: Vec::new(),
            parent_modes: BTreeMap::new(),
            symlinks: vec![("/usr/share/x".into(), outside.display().to_string())],
            files: vec![PlannedFile {
                path: "/usr/share/x/file".into(),
                object: checksum,
                mode: 0o100644,
                package: PathBuf::new(),
            }],
            new_indexes: NewIndexes::default(),
            substitutes: Vec::new(),
        };
        let e = format!("{:#}", cache.place(&root, &plan).err().unwrap());
        assert!(e.contains("creating the symlink /usr/share/x"), "{e}");
        assert!(!outside.join("file").exists());
        assert!(root.join("usr/share/x/file").is_file());
    }
}
