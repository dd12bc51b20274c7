//! What bringing a base commit's own entries to the client's form changes,
//! remembered per base commit.
//!
//! A derived tree is fixed up as ostree-ext's client commits it (owner read
//! bits, labels by the policy: [`super::derived_tree`]). Over the base's
//! entries, that gives the same changes every time the base's policy
//! labels the tree: a handful at most (a mode-0000 `/etc/shadow`), found by
//! reading every file of the base — a second at RHCOS size, on every
//! kubelet override rebuild. They are found once, kept in the repository
//! (`extensions/strata/base-fixes/<commit>.json`: paths and the checksums
//! of the objects that replace them), and applied to the base's tree
//! before the layers; then only what the layers changed is walked.
//!
//! The record is the repository's own cache, written by strata after the
//! transaction that wrote its objects committed. It is still read as
//! untrusted: a record whose paths are not in the base as the kind it says,
//! whose checksums are malformed or whose objects are missing is not used
//! (the changes are found again).

use std::path::PathBuf;

use ostree::gio;
use ostree::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Context, Error, Result};
use crate::labels::is_sha256_hex;

/// Bumped whenever the fix-up's rules change: older records are not used.
const FORMAT: u32 = 1;

/// One change the fix-up makes at an absolute path of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum Fix {
    /// The file (or symlink) at `path` becomes the object `checksum`.
    File { path: String, checksum: String },
    /// The directory at `path` gets the dirmeta object `checksum`.
    Dir { path: String, checksum: String },
}

#[derive(Serialize, Deserialize)]
struct Record {
    format: u32,
    base: String,
    fixes: Vec<Fix>,
}

/// Where the record of `base` is kept; none for a name that is not a
/// commit checksum (it becomes a file name).
fn record_path(repo: &ostree::Repo, base: &str) -> Option<PathBuf> {
    if !is_sha256_hex(base) {
        return None;
    }
    let dir = repo.path().path()?;
    Some(
        dir.join("extensions/strata/base-fixes")
            .join(format!("{base}.json")),
    )
}

/// The fixes recorded for `base`, if a usable record exists (its objects in
/// the repository; the paths are checked when they are applied).
pub(super) fn load(repo: &ostree::Repo, base: &str) -> Option<Vec<Fix>> {
    let path = record_path(repo, base)?;
    let bytes = std::fs::read(&path).ok()?;
    let unusable = |why: &str| {
        tracing::debug!("{}: not used: {why}", path.display());
        None
    };
    let Ok(record) = serde_json::from_slice::<Record>(&bytes) else {
        return unusable("not a record");
    };
    if record.format != FORMAT || record.base != base {
        return unusable("another format or base");
    }
    for fix in &record.fixes {
        let (kind, checksum) = match fix {
            Fix::File { checksum, .. } => (ostree::ObjectType::File, checksum),
            Fix::Dir { checksum, .. } => (ostree::ObjectType::DirMeta, checksum),
        };
        if !is_sha256_hex(checksum) {
            return unusable("a malformed checksum");
        }
        if !matches!(
            repo.has_object(kind, checksum, gio::Cancellable::NONE),
            Ok(true)
        ) {
            return unusable("an object it names is gone");
        }
    }
    Some(record.fixes)
}

/// Keeps `fixes` as the record of `base` (written whole, then renamed).
pub(super) fn save(repo: &ostree::Repo, base: &str, fixes: &[Fix]) -> Result<()> {
    let path = record_path(repo, base).ok_or_else(|| {
        Error::InvalidOption("the repository has no local path for its records".into())
    })?;
    let dir = path.parent().expect("a record path has a parent");
    std::fs::create_dir_all(dir).context_with(|| format!("creating {}", dir.display()))?;
    let record = Record {
        format: FORMAT,
        base: base.to_string(),
        fixes: fixes.to_vec(),
    };
    let bytes = serde_json::to_vec_pretty(&record)
        .map_err(|e| Error::InvalidOption(format!("encoding a base-fixes record: {e}")))?;
    let tmp = dir.join(format!(".{base}.json.tmp"));
    std::fs::write(&tmp, bytes).context_with(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).context_with(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Removes the records of base commits the repository no longer holds
/// (after a prune); how many.
pub(crate) fn prune(repo: &ostree::Repo) -> usize {
    let Some(dir) = repo
        .path()
        .path()
        .map(|p| p.join("extensions/strata/base-fixes"))
    else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let held = name.strip_suffix(".json").is_some_and(|commit| {
            matches!(
                repo.has_object(ostree::ObjectType::Commit, commit, gio::Cancellable::NONE),
                Ok(true)
            )
        });
        if !held && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The directory at absolute `path` of `root` (`/` is the root).
fn dir_at(root: &ostree::MutableTree, path: &str) -> Option<ostree::MutableTree> {
    let mut cur = root.clone();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return None;
        }
        cur = match cur.lookup(part) {
            Ok((None, Some(sub))) => sub,
            _ => return None,
        };
    }
    Some(cur)
}

/// Applies `fixes` to the base's tree `root`, all or none: every path must
/// be in the tree as the kind of entry its fix is for; false (nothing
/// changed) when one is not.
pub(super) fn apply(root: &ostree::MutableTree, fixes: &[Fix]) -> bool {
    enum Target {
        File(ostree::MutableTree, String, String),
        Dir(ostree::MutableTree, String),
    }
    let mut targets = Vec::with_capacity(fixes.len());
    for fix in fixes {
        let target = match fix {
            Fix::File { path, checksum } => {
                let Some((parent, name)) = path.rsplit_once('/') else {
                    return false;
                };
                let Some(dir) = dir_at(root, parent) else {
                    return false;
                };
                match dir.lookup(name) {
                    Ok((Some(_), None)) => Target::File(dir, name.to_string(), checksum.clone()),
                    _ => return false,
                }
            }
            Fix::Dir { path, checksum } => match dir_at(root, path) {
                Some(dir) => Target::Dir(dir, checksum.clone()),
                None => return false,
            },
        };
        targets.push(target);
    }
    for t in targets {
        match t {
            Target::File(dir, name, checksum) => {
                if dir.replace_file(&name, &checksum).is_err() {
                    // Checked above to be a file of this directory.
                    unreachable!("replacing a file found a moment ago");
                }
            }
            Target::Dir(dir, checksum) => dir.set_metadata_checksum(&checksum),
        }
    }
    true
}

/// True when `dir` has not changed since it was loaded from a commit: it
/// still knows its dirtree checksum (libostree forgets it, up to the root,
/// on any change below). An FFI seam: the Rust binding of the getter
/// takes its NULL for a string and panics.
#[allow(unsafe_code)]
pub(super) fn unchanged(dir: &ostree::MutableTree) -> bool {
    use ostree::glib::translate::ToGlibPtr;
    // SAFETY: `dir` is a live MutableTree; the getter returns a pointer it
    // owns (or NULL), only compared with NULL here.
    unsafe {
        !ostree::ffi::ostree_mutable_tree_get_contents_checksum(dir.to_glib_none().0).is_null()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_as_tagged_json() {
        let fixes = vec![
            Fix::File {
                path: "/usr/etc/shadow".into(),
                checksum: "a".repeat(64),
            },
            Fix::Dir {
                path: "/".into(),
                checksum: "b".repeat(64),
            },
        ];
        let r = Record {
            format: FORMAT,
            base: "c".repeat(64),
            fixes: fixes.clone(),
        };
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""kind":"file""#), "{json}");
        let back: Record = serde_json::from_str(&json).unwrap();
        assert_eq!(back.fixes, fixes);
    }
}
