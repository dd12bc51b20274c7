//! Package files librpm reads in place of the downloaded ones.
//!
//! Why it exists: a caller that placed a package's files before the
//! transaction (compose's package cache) tells librpm to skip them, but
//! librpm still decompresses the whole payload to skip past them: a third
//! of an install. A substitute has the package's lead and headers byte for
//! byte and the payload with zeros for the content of the files librpm
//! skips, so what librpm decompresses to get past them costs next to
//! nothing.
//!
//! How: libdnf opens each package at a path it derives from the package's
//! repository (a local repository's location and the package's href; a
//! remote one's packages directory and the file name), and offers no way
//! to name another file. For the commit only, each repository holding a
//! substituted package is pointed at a directory of symlinks, one per
//! package of that repository: to the substitute, or to the downloaded
//! file. Dropping the [`Redirect`] points the repositories back (their
//! location and packages directory; libdnf gives no way to read back the
//! keyring directory that moving the location also moves, which only a
//! metadata refresh uses) and removes the directory.
//!
//! What it must not do: take a substitute without
//! [`DnfOptions::payloads_verified`] (librpm would check the payload's
//! digests, which a substitute's payload no longer matches; with it,
//! librpm checks the headers and their signatures, which a substitute
//! keeps whole); follow a repository's href out of the directory.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::ffi::{PackageList, Repo, RepoPaths};
use crate::options::DnfOptions;
use crate::package::Package;

/// The repositories pointed at the directory of substitutes, until dropped.
pub(crate) struct Redirect<'a> {
    dir: PathBuf,
    /// Each repository moved, with its location and packages directory
    /// before.
    moved: Vec<(Repo<'a>, RepoPaths)>,
    /// The downloaded files of the moved remote repositories' packages:
    /// libdnf removes a downloaded package after the commit (unless told
    /// to keep its cache), but only at the path it opened.
    downloaded: Vec<PathBuf>,
    /// How many packages are read from a substitute.
    pub used: usize,
}

/// A package of a repository to move.
struct Entry<'p> {
    /// The path libdnf will derive for it below the directory; `None`: its
    /// href cannot be followed safely, and its repository is left alone.
    relative: Option<PathBuf>,
    downloaded: &'p Path,
    substitute: Option<&'p Path>,
}

impl<'a> Redirect<'a> {
    /// Points the repositories of the substituted packages of `list`
    /// (whose downloaded files `packages` names, in the same order) at a
    /// directory of symlinks, `dir`. `None` when no package is
    /// substituted.
    pub(crate) fn apply(
        options: &DnfOptions,
        dir: &Path,
        list: &'a PackageList<'_>,
        packages: &[Package],
    ) -> Result<Option<Redirect<'a>>> {
        if options.substitutes.is_empty() || !options.payloads_verified {
            return Ok(None);
        }
        let substitute: HashMap<&str, &Path> = options
            .substitutes
            .iter()
            .map(|(n, p)| (n.as_str(), p.as_path()))
            .collect();
        let mut by_repo: Vec<(Repo<'a>, Vec<Entry<'_>>)> = Vec::new();
        for (i, pkg) in packages.iter().enumerate() {
            let (Some((repo, href)), Some(downloaded)) =
                (list.source(i), pkg.local_path.as_deref())
            else {
                continue;
            };
            let relative = if repo.is_local() {
                contained(&href)
            } else {
                href.rsplit('/').next().and_then(contained)
            };
            let entry = Entry {
                relative,
                downloaded,
                substitute: substitute.get(pkg.nevra.as_str()).copied(),
            };
            match by_repo.iter_mut().find(|(r, _)| *r == repo) {
                Some((_, entries)) => entries.push(entry),
                None => by_repo.push((repo, vec![entry])),
            }
        }
        remove_dir(dir)?;
        let mut redirect = Redirect {
            dir: dir.to_path_buf(),
            moved: Vec::new(),
            downloaded: Vec::new(),
            used: 0,
        };
        for (n, (repo, entries)) in by_repo.into_iter().enumerate() {
            let used = entries.iter().filter(|e| e.substitute.is_some()).count();
            if used == 0 || entries.iter().any(|e| e.relative.is_none()) {
                continue;
            }
            let root = dir.join(n.to_string());
            for e in &entries {
                let target = e.substitute.unwrap_or(e.downloaded);
                let link = root.join(e.relative.as_ref().expect("checked above"));
                let parent = link.parent().expect("below the repository's directory");
                fs::create_dir_all(parent)
                    .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
                std::os::unix::fs::symlink(target, &link)
                    .map_err(|e| Error::io(format!("linking {}", link.display()), e))?;
            }
            let root = root.to_str().ok_or_else(|| {
                Error::InvalidOptions(format!(
                    "a cache directory that is not UTF-8: {}",
                    root.display()
                ))
            })?;
            let before = repo.paths();
            if repo.is_local() {
                // Moving the location moves the packages directory too.
                repo.set_paths(Some(root), before.1.as_deref())?;
            } else {
                repo.set_paths(None, Some(root))?;
                redirect
                    .downloaded
                    .extend(entries.iter().map(|e| e.downloaded.to_path_buf()));
            }
            redirect.moved.push((repo, before));
            redirect.used += used;
        }
        Ok(Some(redirect))
    }

    /// After a commit: removes what libdnf would have removed had it opened
    /// the downloaded files (those below `downloads`, its cache directory,
    /// unless `keep`).
    pub(crate) fn committed(&self, downloads: &Path, keep: bool) {
        if keep {
            return;
        }
        for f in self.downloaded.iter().filter(|f| f.starts_with(downloads)) {
            if let Err(e) = fs::remove_file(f) {
                tracing::debug!(path = %f.display(), "removing a downloaded package: {e}");
            }
        }
    }
}

impl Drop for Redirect<'_> {
    fn drop(&mut self) {
        for (repo, (location, packages)) in self.moved.drain(..) {
            if let Err(e) = repo.set_paths(location.as_deref(), packages.as_deref()) {
                tracing::warn!("pointing a repository back at its files: {e}");
            }
        }
        if let Err(e) = remove_dir(&self.dir) {
            tracing::debug!("{e}");
        }
    }
}

/// `href` as a path below a directory: relative, with no `..`.
fn contained(href: &str) -> Option<PathBuf> {
    let p = Path::new(href);
    (!href.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_))))
        .then(|| p.to_path_buf())
}

fn remove_dir(dir: &Path) -> Result<()> {
    strata_workdir::remove_tree(dir)
        .map_err(|e| Error::io(format!("removing {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_href_is_followed_only_below_the_directory() {
        assert_eq!(
            contained("Packages/k/kernel-4.18.0.rpm"),
            Some(PathBuf::from("Packages/k/kernel-4.18.0.rpm"))
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x.rpm",
            "Packages/../../x.rpm",
            "./x.rpm",
        ] {
            assert_eq!(contained(bad), None, "{bad}");
        }
    }
}
