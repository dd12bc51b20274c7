//! The working directory every strata command builds in.
//!
//! ```text
//! W/cache/   downloaded RPMs, dnf metadata        W/repo/  ostree repository (bare-user)
//! W/oci/     OCI layout shared by every image     W/tmp/   staging for builds in progress
//! W/builds/builds.json, W/builds/<stream>/<version>/meta.json
//! ```
//!
//! This crate owns the rules that keep a workdir consistent: one writer at a
//! time (an exclusive lock), builds staged in `W/tmp` and renamed into place,
//! every metadata file written to a temporary name and renamed, so that an
//! interrupted build leaves the workdir as it was. It knows nothing about
//! what a build contains beyond the history entries.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// An open workdir.
#[derive(Debug, Clone)]
pub struct Workdir {
    root: PathBuf,
}

/// Held while a command writes to the workdir.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// One build in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildEntry {
    /// e.g. `rhel-8.6` for a base, `ocp-4.13` for a derived image.
    pub stream: String,
    pub version: String,
    /// `<stream>/<version>`: where its meta.json lives under `W/builds`.
    pub id: String,
    pub inputhash: String,
    pub ostree_commit: String,
    /// The image's manifest digest, once encapsulated.
    pub image_digest: Option<String>,
    /// The image's tag in `W/oci`.
    pub image_tag: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct BuildsFile {
    /// Oldest first.
    builds: Vec<BuildEntry>,
}

impl Workdir {
    /// Opens `root`, creating its layout when missing.
    pub fn open(root: &Path) -> Result<Self> {
        for dir in ["cache", "oci", "builds", "tmp"] {
            let p = root.join(dir);
            std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
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
    pub fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }
    pub fn oci(&self) -> PathBuf {
        self.root.join("oci")
    }
    pub fn builds(&self) -> PathBuf {
        self.root.join("builds")
    }

    /// Takes the exclusive write lock, waiting for another strata process
    /// that holds it.
    pub fn lock(&self) -> Result<Lock> {
        let path = self.root.join(".lock");
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::info!(
                    "waiting for another strata process to release {}",
                    path.display()
                );
                file.lock()
                    .with_context(|| format!("locking {}", path.display()))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
        // Staging left by a build that was killed: nobody else writes
        // while we hold the lock, so whatever is in tmp/ is abandoned, and
        // so are the ostree repository's own staging directories (an
        // import killed or failed before its transaction ended).
        let repo_tmp = self.repo().join("tmp");
        if let Ok(entries) = std::fs::read_dir(&repo_tmp) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with("staging-") {
                    tracing::debug!("removing abandoned {}", entry.path().display());
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let tmp = self.root.join("tmp");
        for entry in
            std::fs::read_dir(&tmp).with_context(|| format!("reading {}", tmp.display()))?
        {
            let path = entry?.path();
            tracing::debug!("removing abandoned staging {}", path.display());
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
        Ok(Lock { _file: file })
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

    /// The newest build of `stream`.
    pub fn latest(&self, stream: &str) -> Result<Option<BuildEntry>> {
        Ok(self
            .history()?
            .into_iter()
            .rev()
            .find(|b| b.stream == stream))
    }

    /// The next serial for versions of `stream` starting with `prefix`
    /// (`8.6.20261202` -> 0, 1, …): counts that day's builds.
    pub fn next_serial(&self, stream: &str, prefix: &str) -> Result<u32> {
        let dash = format!("{prefix}-");
        Ok(self
            .history()?
            .iter()
            .filter(|b| b.stream == stream)
            .filter_map(|b| b.version.strip_prefix(&dash)?.parse::<u32>().ok())
            .map(|s| s + 1)
            .max()
            .unwrap_or(0))
    }

    /// The directory holding a build's meta.json and other records.
    pub fn build_dir(&self, stream: &str, version: &str) -> PathBuf {
        self.builds().join(stream).join(version)
    }

    /// Records a finished build: `files` (name, content) go into its build
    /// directory, then the history gains `entry`. The history is written
    /// last, so a build is either recorded whole or not at all.
    pub fn record(&self, entry: &BuildEntry, files: &[(&str, Vec<u8>)]) -> Result<()> {
        let dir = self.build_dir(&entry.stream, &entry.version);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, content) in files {
            write_atomic(&dir.join(name), content)?;
        }
        let mut history = self.history()?;
        history.retain(|b| !(b.stream == entry.stream && b.version == entry.version));
        history.push(entry.clone());
        let mut json = serde_json::to_vec_pretty(&BuildsFile { builds: history })?;
        json.push(b'\n');
        write_atomic(&self.builds().join("builds.json"), &json)
    }
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
    let path = root.join("builds/builds.json");
    match std::fs::read(&path) {
        Ok(bytes) => Ok(serde_json::from_slice::<BuildsFile>(&bytes)
            .with_context(|| format!("parsing {}", path.display()))?
            .builds),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(stream: &str, version: &str) -> BuildEntry {
        BuildEntry {
            stream: stream.into(),
            version: version.into(),
            id: format!("{stream}/{version}"),
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
        w.record(
            &entry("rhel-8.6", "8.6.20261202-0"),
            &[("meta.json", b"{}".to_vec())],
        )
        .unwrap();
        w.record(&entry("ocp-4.13", "413.86.202612020000-0"), &[])
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
        let _lock = w.lock().unwrap();
        let staging = w.staging("compose").unwrap();
        assert!(staging.path().starts_with(w.root().join("tmp")));
    }
}
