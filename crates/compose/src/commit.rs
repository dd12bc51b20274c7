//! Writes a prepared tree into the workdir's ostree repository.
//!
//! The commit carries what ostree clients and strata's later stages read:
//! `version`, `ostree.bootable`, `ostree.linux`, the package list in
//! rpm-ostree's `rpmostree.rpmdb.pkglist` shape, `strata.inputhash`, and
//! how the initramfs was made (`strata.initramfs-generator` and
//! rpm-ostree's `rpmostree.initramfs-args`: derive makes it again the same
//! way when a layer needs it).
//! Its timestamp is the build's SOURCE_DATE_EPOCH, never the clock, so the
//! same tree gives the same checksum. Extended attributes of the build
//! filesystem are not committed (they describe the builder, not the OS).

use std::path::Path;

mod objects;

pub(crate) use objects::{
    file_checksum, mtime_zero, no_xattrs, object_mode, ostreemeta, Known, KnownFile,
};

use anyhow::{Context, Result};
use ostree::gio;
use ostree::glib::{self, prelude::*};

/// One package in the commit's package list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkgEntry {
    pub name: String,
    pub epoch: u64,
    pub version: String,
    pub release: String,
    pub arch: String,
}

/// What to commit.
#[derive(Debug)]
pub struct CommitSpec<'a> {
    /// Scratch: its files may become the repository's objects (they share
    /// their inodes), so nothing may change it once committed.
    pub tree: &'a Path,
    pub version: &'a str,
    pub kver: &'a str,
    pub inputhash: &'a str,
    pub packages: &'a [PkgEntry],
    /// Seconds since the epoch.
    pub timestamp: u64,
    /// How the tree's initramfs was made.
    pub initramfs: &'a strata_rootfs::initramfs::Generator,
    /// The tree's files that are the repository's objects already.
    pub known: &'a Known,
}

/// Opens the repository at `path`, creating it (bare-user) when missing.
pub fn open_repo(path: &Path) -> Result<ostree::Repo> {
    let repo = ostree::Repo::new_for_path(path);
    if path.join("config").exists() {
        repo.open(gio::Cancellable::NONE)
            .with_context(|| format!("opening the ostree repository {}", path.display()))?;
    } else {
        std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
        repo.create(ostree::RepoMode::BareUser, gio::Cancellable::NONE)
            .with_context(|| format!("creating the ostree repository {}", path.display()))?;
    }
    Ok(repo)
}

/// Commits `spec.tree`; returns the checksum, and the objects of
/// `spec.known` files that were changed after they were linked (see
/// [`KnownFile`]). The branch is not moved: [`set_ref`] does that once the
/// build is recorded, so that an interrupted compose leaves the ref where
/// it was.
pub fn commit(repo: &ostree::Repo, spec: &CommitSpec<'_>) -> Result<(String, Vec<String>)> {
    let cancel = gio::Cancellable::NONE;
    repo.prepare_transaction(cancel)
        .context("starting an ostree transaction")?;
    let result = (|| -> Result<(String, Vec<String>)> {
        // The tree's own policy labels it (none: no labels).
        let dir = gio::File::for_path(spec.tree);
        let policy = ostree::SePolicy::new(&dir, cancel)
            .with_context(|| format!("loading the SELinux policy of {}", spec.tree.display()))?;
        let written = objects::write_tree(repo, spec.tree, spec.known, &mut |path, mode| {
            xattrs_of(spec.tree, &policy, path, mode)
        })?;
        let root = repo
            .write_mtree(&written.tree, cancel)
            .context("writing the tree")?;
        let root = root
            .downcast_ref::<ostree::RepoFile>()
            .context("ostree returned a non-repository root")?;
        let checksum = repo
            .write_commit_with_time(
                None,
                Some(spec.version),
                None,
                Some(&metadata(spec)),
                root,
                spec.timestamp,
                cancel,
            )
            .context("writing the commit")?;
        repo.commit_transaction(cancel)
            .context("committing the ostree transaction")?;
        Ok((checksum.to_string(), written.touched))
    })();
    if result.is_err() {
        let _ = repo.abort_transaction(cancel);
    }
    result
}

/// Points `branch` at `checksum`, the last step of a compose (and the
/// repair of a ref an interrupted one left behind).
pub fn set_ref(repo: &ostree::Repo, branch: &str, checksum: &str) -> Result<()> {
    repo.set_ref_immediate(None, branch, Some(checksum), gio::Cancellable::NONE)
        .with_context(|| format!("pointing {branch} at {checksum}"))
}

/// The extended attributes a tree's files keep in its commit: file
/// capabilities (rpm's `%caps`: newuidmap's `cap_setuid`, …). Whatever else
/// the build host's filesystem put on the files (its own SELinux labels,
/// `user.*` of tools) stays out.
const KEPT_XATTRS: &[&std::ffi::CStr] = &[c"security.capability"];

/// The xattrs the file at `path` (commit-relative) under `tree` keeps in
/// the commit, as ostree's `a(ayay)` pairs (names end with a NUL): its
/// [`KEPT_XATTRS`], and the label `policy` gives it. `/usr/etc` is labeled
/// as the `/etc` it becomes on a node (a deployment copies it there,
/// labels included).
fn xattrs_of(
    tree: &Path,
    policy: &ostree::SePolicy,
    path: &str,
    mode: u32,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let file = tree.join(path.trim_start_matches('/'));
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for name in KEPT_XATTRS {
        if let Some(value) = strata_process::xattr::get(&file, name)? {
            pairs.push((name.to_bytes_with_nul().to_vec(), value));
        }
    }
    let as_deployed = match path.strip_prefix("/usr/etc") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("/etc{rest}"),
        _ => path.to_string(),
    };
    let label = policy
        .label(&as_deployed, mode, gio::Cancellable::NONE)
        .with_context(|| format!("labeling {path} with the tree's SELinux policy"))?;
    if let Some(label) = label {
        pairs.push((nul_terminated("security.selinux"), nul_terminated(&label)));
    }
    pairs.sort();
    Ok(pairs)
}

fn nul_terminated(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn metadata(spec: &CommitSpec<'_>) -> glib::Variant {
    let dict = glib::VariantDict::new(None);
    dict.insert_value("version", &spec.version.to_variant());
    dict.insert_value("ostree.bootable", &true.to_variant());
    dict.insert_value("ostree.linux", &spec.kver.to_variant());
    dict.insert_value("strata.inputhash", &spec.inputhash.to_variant());
    dict.insert_value(
        strata_rootfs::initramfs::GENERATOR_KEY,
        &spec.initramfs.name.to_variant(),
    );
    dict.insert_value(
        strata_rootfs::initramfs::ARGS_KEY,
        &spec.initramfs.args.to_variant(),
    );
    // rpm-ostree's shape, a(sssss): the epoch is a string too.
    let pkglist: Vec<(String, String, String, String, String)> = spec
        .packages
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.epoch.to_string(),
                p.version.clone(),
                p.release.clone(),
                p.arch.clone(),
            )
        })
        .collect();
    dict.insert_value("rpmostree.rpmdb.pkglist", &pkglist.to_variant());
    dict.end()
}

/// The string metadata `key` of `commit`, if set.
#[cfg(test)]
fn commit_meta_string(repo: &ostree::Repo, commit: &str, key: &str) -> Result<Option<String>> {
    let v = repo
        .load_variant(ostree::ObjectType::Commit, commit)
        .with_context(|| format!("loading commit {commit}"))?;
    let meta = glib::VariantDict::new(Some(&v.child_value(0)));
    Ok(meta.lookup::<String>(key).ok().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_tree_same_checksum_and_metadata_readable() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        std::fs::create_dir_all(tree.join("usr/bin")).unwrap();
        std::fs::write(tree.join("usr/bin/hello"), "hi").unwrap();
        let pkgs = [PkgEntry {
            name: "hello".into(),
            epoch: 0,
            version: "1".into(),
            release: "1.el8".into(),
            arch: "x86_64".into(),
        }];
        let mut sums = Vec::new();
        for i in 0..2 {
            let repo = open_repo(&t.path().join(format!("repo{i}"))).unwrap();
            let spec = CommitSpec {
                tree: &tree,
                version: "8.6.20261101-0",
                kver: "6.1.0-57.el8_6.x86_64",
                inputhash: "abc",
                packages: &pkgs,
                timestamp: 1_792_022_400,
                initramfs: &strata_rootfs::initramfs::Generator {
                    name: "dracut".into(),
                    args: strata_rootfs::initramfs::InitramfsArg::all("test", &["--reproducible"])
                        .unwrap(),
                },
                known: &Known::new(),
            };
            let (sum, touched) = commit(&repo, &spec).unwrap();
            assert!(touched.is_empty());
            assert_eq!(
                commit_meta_string(&repo, &sum, "version")
                    .unwrap()
                    .as_deref(),
                Some("8.6.20261101-0")
            );
            sums.push(sum);
        }
        assert_eq!(sums[0], sums[1]);
    }
}
