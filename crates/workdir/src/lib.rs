//! The working directory every strata command builds in.
//!
//! ```text
//! W/cache/   downloaded RPMs, dnf metadata        W/repo/  ostree repository (bare-user)
//! W/oci/     OCI layout shared by every image     W/tmp/   staging for builds in progress
//! W/history.json                                  every build and pipeline run, oldest first
//! W/builds/<stream>/                              a coreos-assembler builds directory per stream:
//!     builds.json, latest -> <version>, <version>/x86_64/{meta.json,strata.json,…}
//! W/runs/<pipeline>/<n>/                          one `strata build` run
//! ```
//!
//! This crate owns the rules that keep a workdir consistent: one writer at a
//! time (an exclusive lock, held by a whole `strata build` run: see
//! [`Workdir::lock`]), builds staged in `W/tmp` and renamed into place,
//! every metadata file written to a temporary name and renamed, so that an
//! interrupted build leaves the workdir as it was. It owns the build records
//! ([`record`]): strata's `strata.json` and the coreos-assembler `meta.json`
//! made from it, read and written here only.

pub mod record;
mod remove;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use strata_process::text::cut;

pub use record::{BuildMeta, PackageDiff};
pub use remove::remove_tree;

/// An open workdir.
#[derive(Debug, Clone)]
pub struct Workdir {
    root: PathBuf,
}

/// Held while a command writes to the workdir.
///
/// Re-entrant on its thread: while a thread holds the lock of a workdir,
/// its further [`Workdir::lock`]s of that workdir return at once. So
/// `strata build` holds the lock for its whole run and calls each stage's
/// own entry point, which takes the lock as when run alone. Not `Send`:
/// a thread's count of its locks must be dropped on that thread.
#[derive(Debug)]
pub struct Lock {
    /// None for a lock this thread held already.
    _file: Option<File>,
    root: PathBuf,
    _this_thread: PhantomData<std::rc::Rc<()>>,
}

thread_local! {
    /// The workdirs whose lock this thread holds, with how many [`Lock`]s
    /// of each are alive.
    static HELD: RefCell<BTreeMap<PathBuf, usize>> = const { RefCell::new(BTreeMap::new()) };
}

impl Drop for Lock {
    fn drop(&mut self) {
        HELD.with_borrow_mut(|held| {
            if let Some(n) = held.get_mut(&self.root) {
                *n -= 1;
                if *n == 0 {
                    held.remove(&self.root);
                }
            }
        });
        // The file, when this is the outermost lock, closes after this and
        // releases the flock.
    }
}

/// The lock file's content while held: who holds it, for a writer that
/// waits (`pid 4242: strata build pipeline.yaml`), one line, cut.
fn holder_note() -> String {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("pid {}: {}", std::process::id(), cut(&args.join(" "), 200))
}

/// Who holds the lock file `path`, as its holder wrote it (escaped, cut).
fn holder_of(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(f) = File::open(path) {
        use std::io::Read;
        let _ = f.take(256).read_to_end(&mut bytes);
    }
    let text = cut(String::from_utf8_lossy(&bytes).trim(), 240);
    if text.is_empty() {
        "another strata process".to_string()
    } else {
        text
    }
}

/// One build (or pipeline run) in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildEntry {
    /// e.g. `rhel-8.6` for a base, `ocp-4.13` for a derived image; a
    /// pipeline run's is the pipeline's name.
    pub stream: String,
    pub version: String,
    /// `<stream>/<version>`.
    pub id: String,
    /// A build, or a run of `strata build`.
    #[serde(default)]
    pub kind: EntryKind,
    pub inputhash: String,
    pub ostree_commit: String,
    /// The image's manifest digest, once encapsulated.
    pub image_digest: Option<String>,
    /// The image's tag in `W/oci`.
    pub image_tag: Option<String>,
}

impl BuildEntry {
    /// Whether `other` is the same build (or run): kind, stream, version.
    pub fn same_build(&self, other: &BuildEntry) -> bool {
        self.kind == other.kind && self.stream == other.stream && self.version == other.version
    }
}

/// What a history entry is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A composed or derived image: `W/builds/<stream>/<version>/x86_64`.
    #[default]
    Build,
    /// A pipeline run: `W/runs/<pipeline>/<n>`.
    Run,
}

/// `W/history.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct HistoryFile {
    /// Oldest first.
    builds: Vec<BuildEntry>,
    /// The builds and runs pruned from `builds`: their versions are never
    /// given again (see [`Workdir::versions_used`]). Absent from a history
    /// nothing was pruned from, and from one an older strata wrote.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    retired: BTreeSet<Retired>,
}

/// A build or run that was in the history once.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Retired {
    kind: EntryKind,
    stream: String,
    version: String,
}

impl Retired {
    fn of(e: &BuildEntry) -> Self {
        Retired {
            kind: e.kind,
            stream: e.stream.clone(),
            version: e.version.clone(),
        }
    }
}

/// The history's file, relative to the workdir.
const HISTORY: &str = "history.json";

/// coreos-assembler's `builds/builds.json` (`src/cosalib/builds.py`):
/// newest first, each build with the architectures it has.
#[derive(Debug, Serialize, Deserialize)]
struct CosaBuilds {
    #[serde(rename = "schema-version")]
    schema_version: String,
    builds: Vec<CosaBuild>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CosaBuild {
    id: String,
    arches: Vec<String>,
}

/// Asks the filesystem to place each directory made in `dir` as if at
/// the top of the filesystem (`FS_TOPDIR_FL`, which ext2/3/4 read): a new
/// staging tree then starts in a block group of its own instead of beside
/// the last one.
///
/// Why: ext4 without a journal (strata's build machines) will not reuse an
/// inode freed in the last minutes, and finds that out one freed inode at
/// a time, from the start of the group, for every inode it allocates. A
/// compose removes its staging tree (53,000 files at RHCOS size) as it
/// ends, and the next one unpacks as many files. Writing that tree into a
/// directory right after it was removed from there took 16.5 s instead of
/// 5.6; with the flag, 5.6 s. Only a hint: on any other filesystem, or
/// refused, nothing changes.
fn spread_below(dir: &Path) {
    use rustix::fs::{ioctl_getflags, ioctl_setflags, IFlags, Mode, OFlags};
    let set = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .and_then(|fd| {
        let flags = ioctl_getflags(&fd)?;
        if flags.contains(IFlags::TOPDIR) {
            Ok(())
        } else {
            ioctl_setflags(&fd, flags | IFlags::TOPDIR)
        }
    });
    if let Err(e) = set {
        tracing::debug!("{}: not marked as a top directory: {e}", dir.display());
    }
}

impl Workdir {
    /// Opens `root`, creating its layout when missing.
    pub fn open(root: &Path) -> Result<Self> {
        let old = root.join("history.json");
        if old.exists() && !root.join(HISTORY).exists() {
            bail!(
                "{} was made by an earlier strata (its history is {}, builds have no per-architecture directory): build into a new workdir",
                root.display(),
                old.display()
            );
        }
        for dir in ["cache", "oci", "builds", "tmp"] {
            let p = root.join(dir);
            std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        }
        spread_below(&root.join("tmp"));
        let root =
            std::fs::canonicalize(root).with_context(|| format!("resolving {}", root.display()))?;
        Ok(Self { root })
    }

    /// Opens the workdir at `root` to read it, creating nothing: `root`
    /// must be a directory, and each part of a workdir it has must be what
    /// strata made (its directories directories, its history a file). A
    /// damaged workdir is one error naming the part that is wrong, where
    /// [`Workdir::open`] would try to create a directory over it.
    pub fn open_existing(root: &Path) -> Result<Self> {
        let what = |p: &Path| match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => "a directory",
            Ok(m) if m.is_file() => "a regular file",
            Ok(_) => "a special file",
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "missing",
            Err(_) => "unreadable",
        };
        match what(root) {
            "a directory" => {}
            "missing" => bail!("no workdir at {}", root.display()),
            other => bail!("{} is {other}, not a strata workdir", root.display()),
        }
        for (part, want) in [
            ("cache", "a directory"),
            ("oci", "a directory"),
            ("builds", "a directory"),
            ("runs", "a directory"),
            ("tmp", "a directory"),
            ("repo", "a directory"),
            (HISTORY, "a regular file"),
        ] {
            let p = root.join(part);
            let is = what(&p);
            if is != want && is != "missing" {
                bail!(
                    "the workdir {} is damaged: {} is {is}, not {want}",
                    root.display(),
                    p.display()
                );
            }
        }
        let root =
            std::fs::canonicalize(root).with_context(|| format!("resolving {}", root.display()))?;
        Ok(Self { root })
    }

    /// The workdir's ostree repository (bare-user), created when missing.
    /// Points the ref `name` of the workdir's repository at `commit`: the
    /// last step of a build, after its record.
    pub fn set_ref(&self, name: &str, commit: &str) -> Result<()> {
        self.ostree_repo()?
            .set_ref_immediate(None, name, Some(commit), ostree::gio::Cancellable::NONE)
            .with_context(|| format!("pointing {name} at {commit}"))
    }

    pub fn ostree_repo(&self) -> Result<ostree::Repo> {
        let path = self.repo();
        let repo = ostree::Repo::new_for_path(&path);
        if path.join("config").exists() {
            repo.open(ostree::gio::Cancellable::NONE)
                .with_context(|| format!("opening the ostree repository {}", path.display()))?;
        } else {
            std::fs::create_dir_all(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            repo.create(ostree::RepoMode::BareUser, ostree::gio::Cancellable::NONE)
                .with_context(|| format!("creating the ostree repository {}", path.display()))?;
        }
        Ok(repo)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn cache(&self) -> PathBuf {
        self.root.join("cache")
    }
    /// The chunk layers already written into [`Workdir::oci`], by content
    /// (see `strata_oscontainer::EncapsulateOptions::layer_cache`).
    pub fn layer_cache(&self) -> PathBuf {
        self.cache().join("layers")
    }
    /// The gzip blocks of the derived layers in [`Workdir::oci`], by input
    /// (see `strata_oscontainer::DeriveOptions::gzip_blocks`).
    pub fn gzip_blocks(&self) -> PathBuf {
        self.cache().join("gzip-blocks")
    }
    /// Initramfs images made here before, with what their generator read
    /// (see `strata_rootfs::initramfs_cache`).
    pub fn initramfs_cache(&self) -> PathBuf {
        self.cache().join("initramfs")
    }
    /// Which of the repository's objects hold each package's files
    /// (see `strata_compose`'s package cache).
    pub fn package_cache(&self) -> PathBuf {
        self.cache().join("packages")
    }
    pub fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }
    pub fn oci(&self) -> PathBuf {
        self.root.join("oci")
    }
    pub fn builds(&self) -> PathBuf {
        self.root.join("builds")
    }

    /// Takes the exclusive write lock, waiting for another process (or
    /// thread) that holds it and saying which one it waits for. A thread
    /// that holds it already gets it again at once (see [`Lock`]).
    pub fn lock(&self) -> Result<Lock> {
        let nested = HELD.with_borrow_mut(|held| match held.get_mut(&self.root) {
            Some(n) => {
                *n += 1;
                true
            }
            None => false,
        });
        if nested {
            return Ok(Lock {
                _file: None,
                root: self.root.clone(),
                _this_thread: PhantomData,
            });
        }
        let path = self.root.join(".lock");
        // Not truncated on open: the holder's note is for the waiters.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::info!(
                    "waiting for {} to release the workdir {} (lock {})",
                    holder_of(&path),
                    self.root.display(),
                    path.display()
                );
                file.lock()
                    .with_context(|| format!("locking {}", path.display()))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
        {
            use std::io::{Seek, Write};
            let note = holder_note();
            let written = file
                .set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| writeln!(file, "{note}"));
            if let Err(e) = written {
                tracing::debug!("{}: holder not written: {e}", path.display());
            }
        }
        HELD.with_borrow_mut(|held| held.insert(self.root.clone(), 1));
        let lock = Lock {
            _file: Some(file),
            root: self.root.clone(),
            _this_thread: PhantomData,
        };
        // Staging left by a build that was killed: nobody else writes
        // while we hold the lock, so whatever is in tmp/ is abandoned, and
        // so are the ostree repository's own staging directories (an
        // import killed or failed before its transaction ended).
        let repo_tmp = self.repo().join("tmp");
        if let Ok(entries) = std::fs::read_dir(&repo_tmp) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with("staging-") {
                    tracing::debug!("removing abandoned {}", entry.path().display());
                    let _ = remove_tree(&entry.path());
                }
            }
        }
        let tmp = self.root.join("tmp");
        for entry in
            std::fs::read_dir(&tmp).with_context(|| format!("reading {}", tmp.display()))?
        {
            let path = entry?.path();
            tracing::debug!("removing abandoned staging {}", path.display());
            let _ = remove_tree(&path);
        }
        Ok(lock)
    }

    /// A fresh staging directory inside the workdir (same filesystem, so
    /// results can be renamed into place). Removed when dropped.
    pub fn staging(&self, what: &str) -> Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix(&format!("{what}-"))
            .tempdir_in(self.root.join("tmp"))
            .context("creating a staging directory in the workdir")
    }

    /// Every build, oldest first.
    pub fn history(&self) -> Result<Vec<BuildEntry>> {
        history_of(&self.root)
    }

    fn history_file(&self) -> Result<HistoryFile> {
        read_history(&self.root)
    }

    /// The newest build of `stream`.
    pub fn latest(&self, stream: &str) -> Result<Option<BuildEntry>> {
        Ok(self
            .history()?
            .into_iter()
            .rev()
            .find(|b| b.stream == stream))
    }

    /// The builds of `stream` whose inputs hashed to `inputhash`, newest
    /// first: the no-op check's candidates. An earlier build counts as much
    /// as the newest (building A, then B, then A's inputs again gives A
    /// back), once the caller has found what it names still whole.
    pub fn builds_with_inputs(&self, stream: &str, inputhash: &str) -> Result<Vec<BuildEntry>> {
        Ok(self
            .history()?
            .into_iter()
            .rev()
            .filter(|b| {
                b.kind == EntryKind::Build && b.stream == stream && b.inputhash == inputhash
            })
            .collect())
    }

    /// The build of `stream` a no-op hands back for inputs that hashed to
    /// `inputhash`: the newest build with those inputs whose record, whole
    /// commit and image are all still in the workdir. Not only the
    /// stream's newest build counts (after A, B and A's inputs again, A is
    /// the build), and an older one is checked as closely as the newest: a
    /// prune may have taken its image's blobs or its commit, a killed
    /// build may have left a record without its image.
    ///
    /// `image_digest(tag)` is the manifest digest of the image tagged `tag`
    /// in [`Workdir::oci`] once its blobs are all there, an error otherwise
    /// (`strata_oscontainer::check_present`: the workdir does not read
    /// images itself).
    pub fn reusable_build(
        &self,
        stream: &str,
        inputhash: &str,
        image_digest: impl Fn(&str) -> Result<String>,
    ) -> Result<Option<BuildEntry>> {
        let candidates = self.builds_with_inputs(stream, inputhash)?;
        if candidates.is_empty() {
            return Ok(None);
        }
        let repo = self.ostree_repo()?;
        for b in candidates {
            match self.missing_part(&repo, &b, &image_digest) {
                None => return Ok(Some(b)),
                Some(why) => tracing::info!("{}: the same inputs, but {why}: not reused", b.id),
            }
        }
        Ok(None)
    }

    /// What of the recorded build `b` is no longer whole in the workdir.
    fn missing_part(
        &self,
        repo: &ostree::Repo,
        b: &BuildEntry,
        image_digest: &impl Fn(&str) -> Result<String>,
    ) -> Option<String> {
        match self.read_meta(&b.stream, &b.version) {
            Ok(Some(_)) => {}
            Ok(None) => return Some("its record is gone".into()),
            Err(e) => return Some(format!("its record is unreadable: {e:#}")),
        }
        match repo.load_commit(&b.ostree_commit) {
            Ok((_, state)) if state.contains(ostree::RepoCommitState::PARTIAL) => {
                return Some(format!("its commit {} is partial", b.ostree_commit))
            }
            Ok(_) => {}
            Err(_) => return Some(format!("its commit {} is gone", b.ostree_commit)),
        }
        let (Some(tag), Some(digest)) = (&b.image_tag, &b.image_digest) else {
            return Some("it recorded no image".into());
        };
        match image_digest(tag) {
            Ok(found) if &found == digest => None,
            Ok(found) => Some(format!("its tag {tag} names {found}, not {digest}")),
            Err(e) => Some(format!("its image {tag} is not whole: {e:#}")),
        }
    }

    /// Makes the recorded build `entry` its stream's newest again (its
    /// inputs came back): its entry moves to the end of the history (left
    /// as it is when it is the newest already), then the stream's
    /// builds.json and `latest` are written from the history, always: a
    /// writer killed between the history and them left them naming another
    /// build, and a no-op is what puts them right. Its files stay as they
    /// are.
    pub fn make_latest(&self, entry: &BuildEntry) -> Result<()> {
        let mut file = self.history_file()?;
        let newest = file
            .builds
            .iter()
            .rev()
            .find(|b| b.kind == entry.kind && b.stream == entry.stream);
        if !newest.is_some_and(|b| b.same_build(entry)) {
            let Some(at) = file.builds.iter().position(|b| b.same_build(entry)) else {
                bail!(
                    "{} is not in the history of {}",
                    entry.id,
                    self.root.display()
                );
            };
            let moved = file.builds.remove(at);
            file.builds.push(moved);
            self.write_history(&file)?;
        }
        if entry.kind == EntryKind::Build {
            self.write_cosa_builds(&entry.stream, &file.builds)?;
        }
        Ok(())
    }

    /// Every version `stream` has given entries of `kind`: those in the
    /// history and those pruned from it. A version is never given twice,
    /// so that a pruned build's tag and directory name never come back
    /// naming other bytes (a no-op's reuse reorders the history, so the
    /// newest builds a prune keeps need not hold the highest serial).
    pub fn versions_used(&self, kind: EntryKind, stream: &str) -> Result<BTreeSet<String>> {
        let file = self.history_file()?;
        let in_history = file
            .builds
            .into_iter()
            .filter(|b| b.kind == kind && b.stream == stream)
            .map(|b| b.version);
        let retired = file
            .retired
            .into_iter()
            .filter(|r| r.kind == kind && r.stream == stream)
            .map(|r| r.version);
        Ok(in_history.chain(retired).collect())
    }

    /// The next serial for versions of `stream` starting with `prefix`
    /// (`8.6.20261202` -> 0, 1, …): one past the highest that day's builds
    /// used, pruned ones included.
    pub fn next_serial(&self, stream: &str, prefix: &str) -> Result<u32> {
        let dash = format!("{prefix}-");
        Ok(self
            .versions_used(EntryKind::Build, stream)?
            .iter()
            .filter_map(|v| v.strip_prefix(&dash)?.parse::<u32>().ok())
            .map(|s| s + 1)
            .max()
            .unwrap_or(0))
    }

    /// The directory holding a build's meta.json, strata.json and
    /// artifacts: `W/builds/<stream>/<version>/x86_64`, as coreos-assembler
    /// lays out a build.
    pub fn build_dir(&self, stream: &str, version: &str) -> PathBuf {
        self.builds().join(stream).join(version).join(record::ARCH)
    }

    /// The directory of a pipeline run: `W/runs/<pipeline>/<n>`.
    pub fn run_dir(&self, pipeline: &str, n: &str) -> PathBuf {
        self.root.join("runs").join(pipeline).join(n)
    }

    /// Where the files of a history entry are.
    pub fn entry_dir(&self, entry: &BuildEntry) -> PathBuf {
        match entry.kind {
            EntryKind::Build => self.build_dir(&entry.stream, &entry.version),
            EntryKind::Run => self.run_dir(&entry.stream, &entry.version),
        }
    }

    /// strata's record of a build, if it has one.
    pub fn read_meta(&self, stream: &str, version: &str) -> Result<Option<BuildMeta>> {
        record::read(&self.build_dir(stream, version))
    }

    /// Writes a build's records: strata.json, then the meta.json made from
    /// it.
    pub fn write_meta(&self, meta: &BuildMeta) -> Result<()> {
        let dir = self.build_dir(&meta.stream, &meta.version);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        write_atomic(&dir.join(record::RECORD_FILE), &pretty(meta)?)?;
        write_atomic(
            &dir.join(record::META_FILE),
            &pretty(&record::CosaMeta::of(meta))?,
        )
    }

    /// `packages` (NEVRAs) against those of `previous`'s record.
    pub fn package_diff(&self, previous: Option<&BuildEntry>, packages: &[String]) -> PackageDiff {
        let Some(prev) = previous else {
            return PackageDiff::default();
        };
        match self.read_meta(&prev.stream, &prev.version) {
            Ok(Some(old)) => PackageDiff::between(&prev.version, &old.packages, packages),
            _ => PackageDiff {
                previous: Some(prev.version.clone()),
                ..PackageDiff::default()
            },
        }
    }

    /// Records a finished build or run: its record (`meta`, for a build)
    /// and `files` (name, content) go into its directory, then the history
    /// gains `entry`, then the stream's coreos-assembler builds.json and
    /// `latest` follow. The history is written after the files, so a build
    /// is either recorded whole or not at all.
    pub fn record(
        &self,
        entry: &BuildEntry,
        meta: Option<&BuildMeta>,
        files: &[(&str, Vec<u8>)],
    ) -> Result<()> {
        let dir = self.entry_dir(entry);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, content) in files {
            write_atomic(&dir.join(name), content)?;
        }
        if let Some(meta) = meta {
            self.write_meta(meta)?;
        }
        let mut file = self.history_file()?;
        file.builds.retain(|b| !b.same_build(entry));
        file.builds.push(entry.clone());
        self.write_history(&file)?;
        if entry.kind == EntryKind::Build {
            self.write_cosa_builds(&entry.stream, &file.builds)?;
        }
        Ok(())
    }

    /// Removes `entries` from the history (their versions stay used: see
    /// [`Workdir::versions_used`]), then rewrites the builds.json and
    /// `latest` of each stream they were in (removed, with the stream's
    /// directory when it is empty, once a stream has no build left). Their
    /// files stay: the caller removes them after this.
    pub fn forget(&self, entries: &[BuildEntry]) -> Result<()> {
        let mut file = self.history_file()?;
        let (gone, kept): (Vec<BuildEntry>, Vec<BuildEntry>) = std::mem::take(&mut file.builds)
            .into_iter()
            .partition(|b| entries.iter().any(|e| e.same_build(b)));
        file.builds = kept;
        file.retired.extend(gone.iter().map(Retired::of));
        self.write_history(&file)?;
        let history = &file.builds;
        let streams: BTreeSet<&str> = entries
            .iter()
            .filter(|e| e.kind == EntryKind::Build)
            .map(|e| e.stream.as_str())
            .collect();
        for stream in streams {
            if history
                .iter()
                .any(|b| b.kind == EntryKind::Build && b.stream == stream)
            {
                self.write_cosa_builds(stream, history)?;
            } else {
                let dir = self.builds().join(stream);
                for f in ["builds.json", "latest"] {
                    let _ = std::fs::remove_file(dir.join(f));
                }
            }
        }
        Ok(())
    }

    fn write_history(&self, file: &HistoryFile) -> Result<()> {
        write_atomic(&self.root.join(HISTORY), &pretty(file)?)
    }

    /// `W/builds/<stream>/builds.json` and `latest` from the history; its
    /// `timestamp` is the newest build's SOURCE_DATE_EPOCH (coreos-assembler
    /// writes the time it ran; a record's time keeps the file reproducible).
    fn write_cosa_builds(&self, stream: &str, history: &[BuildEntry]) -> Result<()> {
        let builds: Vec<CosaBuild> = history
            .iter()
            .rev()
            .filter(|b| b.kind == EntryKind::Build && b.stream == stream)
            .map(|b| CosaBuild {
                id: b.version.clone(),
                arches: vec![record::ARCH.to_string()],
            })
            .collect();
        let Some(latest) = builds.first().map(|b| b.id.clone()) else {
            return Ok(());
        };
        let timestamp = self
            .read_meta(stream, &latest)?
            .map(|m| record::rfc3339(m.source_date_epoch as i64));
        let dir = self.builds().join(stream);
        // Each written only when it says something else: a no-op finds
        // them right, and leaves them (and whoever copies the workdir) be.
        let json = dir.join("builds.json");
        let content = pretty(&CosaBuilds {
            schema_version: "1.0.0".into(),
            builds,
            timestamp,
        })?;
        if std::fs::read(&json).ok().as_deref() != Some(content.as_slice()) {
            write_atomic(&json, &content)?;
        }
        let link = dir.join("latest");
        if std::fs::read_link(&link).is_ok_and(|at| at == Path::new(&latest)) {
            return Ok(());
        }
        let tmp = dir.join(".latest.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&latest, &tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        std::fs::rename(&tmp, &link).with_context(|| format!("renaming into {}", link.display()))
    }
}

/// Pretty JSON with a final newline.
pub fn pretty<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(value)?;
    json.push(b'\n');
    Ok(json)
}

/// Writes `content` to a temporary file beside `path` and renames it over
/// `path`: readers see the old or the new file, never a torn one.
pub fn write_atomic(path: &Path, content: &[u8]) -> Result<()> {
    let dir = path.parent().context("path without parent")?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, content)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.as_file().sync_all().ok();
    tmp.persist(path)
        .with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}

/// Every build recorded in the workdir at `root`, oldest first, without
/// creating anything (none when it has no records).
pub fn history_of(root: &Path) -> Result<Vec<BuildEntry>> {
    Ok(read_history(root)?.builds)
}

/// The history file of the workdir at `root` (empty when it has none).
fn read_history(root: &Path) -> Result<HistoryFile> {
    let path = root.join(HISTORY);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<HistoryFile>(&bytes)
            .with_context(|| format!("parsing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HistoryFile::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On ext4 the staging directory is marked so that each staging tree
    /// starts in a block group of its own; elsewhere opening still works.
    #[test]
    fn staging_trees_are_spread_on_ext4() {
        let d = tempfile::tempdir().unwrap();
        let w = Workdir::open(d.path()).unwrap();
        let tmp = w.root().join("tmp");
        let fd = std::fs::File::open(&tmp).unwrap();
        let ext4 = rustix::fs::fstatfs(&fd).unwrap().f_type as i64 == 0xEF53;
        let flags = rustix::fs::ioctl_getflags(&fd);
        if ext4 {
            assert!(flags.unwrap().contains(rustix::fs::IFlags::TOPDIR));
        }
        // Opening again leaves the mark as it is.
        Workdir::open(d.path()).unwrap();
    }

    fn entry(stream: &str, version: &str) -> BuildEntry {
        BuildEntry {
            stream: stream.into(),
            version: version.into(),
            id: format!("{stream}/{version}"),
            kind: EntryKind::Build,
            inputhash: "h".into(),
            ostree_commit: "c".into(),
            image_digest: None,
            image_tag: None,
        }
    }

    #[test]
    fn history_and_serials() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 0);
        let meta = BuildMeta {
            stream: "rhel-8.6".into(),
            version: "8.6.20261202-0".into(),
            ..BuildMeta::default()
        };
        w.record(&entry("rhel-8.6", "8.6.20261202-0"), Some(&meta), &[])
            .unwrap();
        w.record(&entry("ocp-4.13", "413.86.202612020000-0"), None, &[])
            .unwrap();
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 1);
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261203").unwrap(), 0);
        assert_eq!(
            w.latest("rhel-8.6").unwrap().unwrap().version,
            "8.6.20261202-0"
        );
        assert!(w
            .build_dir("rhel-8.6", "8.6.20261202-0")
            .join("meta.json")
            .exists());
        w.record(&entry("rhel-8.6", "8.6.20261202-1"), Some(&meta), &[])
            .unwrap();
        let cosa: serde_json::Value = serde_json::from_slice(
            &std::fs::read(w.builds().join("rhel-8.6/builds.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(cosa["schema-version"], "1.0.0");
        assert_eq!(cosa["builds"][0]["id"], "8.6.20261202-1");
        assert_eq!(cosa["builds"][1]["arches"][0], "x86_64");
        assert_eq!(
            std::fs::read_link(w.builds().join("rhel-8.6/latest")).unwrap(),
            Path::new("8.6.20261202-1")
        );
        let _lock = w.lock().unwrap();
        let staging = w.staging("compose").unwrap();
        assert!(staging.path().starts_with(w.root().join("tmp")));
    }

    /// Building A, then B, then A's inputs again made a third build: the
    /// no-op check saw only the newest. Every build with the inputs is a
    /// candidate, newest first, and the one reused becomes the newest.
    #[test]
    fn an_earlier_build_with_the_same_inputs_is_found_and_made_latest_again() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        let a = recorded(&w, "rhel-8.6", "8.6.20261202-0", "a");
        recorded(&w, "rhel-8.6", "8.6.20261202-1", "b");
        w.record(&entry("ocp-4.13", "413.86.202612020000-0"), None, &[])
            .unwrap();
        let found = w.builds_with_inputs("rhel-8.6", "a").unwrap();
        assert_eq!(found, vec![a.clone()]);
        assert!(w.builds_with_inputs("rhel-8.6", "c").unwrap().is_empty());
        assert!(w.builds_with_inputs("ocp-4.13", "a").unwrap().is_empty());

        w.make_latest(&a).unwrap();
        assert_eq!(w.latest("rhel-8.6").unwrap(), Some(a.clone()));
        let cosa: serde_json::Value = serde_json::from_slice(
            &std::fs::read(w.builds().join("rhel-8.6/builds.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(cosa["builds"][0]["id"], "8.6.20261202-0");
        assert_eq!(cosa["builds"][1]["id"], "8.6.20261202-1");
        assert_eq!(
            std::fs::read_link(w.builds().join("rhel-8.6/latest")).unwrap(),
            Path::new("8.6.20261202-0")
        );
        // The serials go on from the highest.
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 2);
        // The newest already: the history is not written again.
        let before = std::fs::metadata(w.root().join(HISTORY))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        w.make_latest(&a).unwrap();
        let after = std::fs::metadata(w.root().join(HISTORY))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after);
        assert!(w.make_latest(&entry("rhel-8.6", "9")).is_err());
    }

    /// The stream's `latest` link and the first id of its builds.json.
    fn cosa_latest(w: &Workdir, stream: &str) -> (PathBuf, String) {
        let dir = w.builds().join(stream);
        let cosa: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("builds.json")).unwrap()).unwrap();
        (
            std::fs::read_link(dir.join("latest")).unwrap(),
            cosa["builds"][0]["id"].as_str().unwrap().to_string(),
        )
    }

    /// A build of `stream` recorded with its record.
    fn recorded(w: &Workdir, stream: &str, version: &str, hash: &str) -> BuildEntry {
        let mut e = entry(stream, version);
        e.inputhash = hash.into();
        let meta = BuildMeta {
            stream: e.stream.clone(),
            version: e.version.clone(),
            ..BuildMeta::default()
        };
        w.record(&e, Some(&meta), &[]).unwrap();
        e
    }

    /// make_latest wrote the history, then builds.json and `latest`: killed
    /// in between, the history said A was the newest while builds.json and
    /// `latest` said B, and the next no-op (A already the newest) returned
    /// before writing anything, so they stayed wrong. They are written from
    /// the history every time.
    #[test]
    fn a_no_op_repairs_builds_json_and_latest_left_behind_by_a_killed_writer() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        let a = recorded(&w, "rhel-8.6", "8.6.20261202-0", "a");
        let b = recorded(&w, "rhel-8.6", "8.6.20261202-1", "b");
        // The half-written state: the history moved, the rest not.
        let mut file = w.history_file().unwrap();
        file.builds.retain(|e| !e.same_build(&a));
        file.builds.push(a.clone());
        w.write_history(&file).unwrap();
        assert_eq!(
            cosa_latest(&w, "rhel-8.6"),
            (PathBuf::from(&b.version), b.version.clone())
        );

        w.make_latest(&a).unwrap();
        assert_eq!(
            cosa_latest(&w, "rhel-8.6"),
            (PathBuf::from(&a.version), a.version.clone())
        );
    }

    /// A no-op made an older build the newest, and a prune keeps the newest:
    /// after -0, -1 and -0 again, `prune --keep 1` dropped -1, and the next
    /// build with other inputs was given -1 again, the name (and tag) of a
    /// build that had other bytes. A pruned version stays used.
    #[test]
    fn a_pruned_builds_serial_is_never_given_again() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        let a = recorded(&w, "rhel-8.6", "8.6.20261202-0", "a");
        let b = recorded(&w, "rhel-8.6", "8.6.20261202-1", "b");
        w.make_latest(&a).unwrap();
        // What `strata prune --keep 1` removes: all but the newest.
        w.forget(std::slice::from_ref(&b)).unwrap();
        assert_eq!(w.history().unwrap(), vec![a.clone()]);
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 2);
        assert!(w
            .versions_used(EntryKind::Build, "rhel-8.6")
            .unwrap()
            .contains(&b.version));
        assert!(w
            .versions_used(EntryKind::Run, "rhel-8.6")
            .unwrap()
            .is_empty());
        // Recorded builds keep what was retired.
        let c = recorded(&w, "rhel-8.6", "8.6.20261202-2", "c");
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 3);
        w.forget(&[a, c]).unwrap();
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 3);
    }

    /// A history an older strata wrote (no retired versions) still loads,
    /// and one nothing was pruned from is written as before.
    #[test]
    fn a_history_without_retired_versions_loads() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        let e = entry("rhel-8.6", "8.6.20261202-0");
        let old = serde_json::json!({ "builds": [e] });
        std::fs::write(w.root().join(HISTORY), old.to_string()).unwrap();
        assert_eq!(w.history().unwrap(), vec![e.clone()]);
        assert_eq!(w.next_serial("rhel-8.6", "8.6.20261202").unwrap(), 1);
        w.record(&entry("rhel-8.6", "8.6.20261202-1"), None, &[])
            .unwrap();
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(w.root().join(HISTORY)).unwrap()).unwrap();
        assert!(written.get("retired").is_none(), "{written}");
    }

    /// A candidate whose record, commit or image is gone is not handed
    /// back; with nothing whole, nothing is.
    #[test]
    fn a_build_missing_a_part_is_not_reusable() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        let mut e = entry("rhel-8.6", "8.6.20261202-0");
        e.image_tag = Some("rhel-8.6-8.6.20261202-0".into());
        e.image_digest = Some("sha256:aa".into());
        w.record(&e, None, &[]).unwrap();
        let image = |_: &str| Ok("sha256:aa".to_string());
        // No record, and no commit "c" in the repository.
        assert_eq!(w.reusable_build("rhel-8.6", "h", image).unwrap(), None);
        assert_eq!(w.reusable_build("rhel-8.6", "x", image).unwrap(), None);
        // An unreadable history is an error, not "nothing to reuse".
        std::fs::write(w.root().join(HISTORY), "{").unwrap();
        assert!(w.reusable_build("rhel-8.6", "h", image).is_err());
    }

    /// What a lock file holds is whatever its writer (or anyone) put
    /// there: shown escaped and cut by the one escaper, on one line.
    #[test]
    fn a_lock_holder_with_control_characters_or_a_long_note_is_shown_on_one_line() {
        let t = tempfile::tempdir().unwrap();
        let lock = t.path().join(".lock");
        std::fs::write(&lock, "pid 1: strata\nerror: forged\x1b[2J\n").unwrap();
        assert_eq!(holder_of(&lock), "pid 1: strata\\nerror: forged\\u{1b}[2J");
        std::fs::write(&lock, "x".repeat(1000)).unwrap();
        assert_eq!(holder_of(&lock), format!("{}…", "x".repeat(240)));
        std::fs::write(&lock, "").unwrap();
        assert_eq!(holder_of(&lock), "another strata process");
    }

    /// `strata build` released the lock between its stages, and a prune
    /// ran in the gaps. The run holds it throughout: the stages' own locks
    /// nest on its thread, and another writer waits for the outermost
    /// lock, knowing whose it is.
    #[test]
    fn a_lock_nests_on_its_thread_and_another_writer_waits_for_the_outermost() {
        let t = tempfile::tempdir().unwrap();
        let w = Workdir::open(t.path()).unwrap();
        let outer = w.lock().unwrap();
        let note = std::fs::read_to_string(w.root().join(".lock")).unwrap();
        assert!(
            note.starts_with(&format!("pid {}: ", std::process::id())),
            "{note}"
        );
        assert_eq!(holder_of(&w.root().join(".lock")), note.trim());
        // A stage's own lock, taken and released inside the run; its
        // staging survives (only the outermost lock clears tmp/).
        let staging = w.staging("compose").unwrap();
        drop(w.lock().unwrap());
        assert!(staging.path().exists());
        let inner = w.lock().unwrap();

        let (tx, rx) = std::sync::mpsc::channel();
        let other = {
            let w = w.clone();
            std::thread::spawn(move || {
                let _l = w.lock().unwrap();
                tx.send(()).unwrap();
            })
        };
        let wait = std::time::Duration::from_millis(300);
        assert!(rx.recv_timeout(wait).is_err(), "locked while held");
        drop(inner);
        assert!(
            rx.recv_timeout(wait).is_err(),
            "locked while the run holds it"
        );
        drop(outer);
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the lock once the run let it go");
        other.join().unwrap();
    }
}
