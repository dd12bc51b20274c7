//! Writes repositories: signed RPMs, repodata from createrepo_c, `.repo`
//! files and the public keys beside them.
//!
//! Reproducibility is this module's job: RPM file mtimes and createrepo_c's
//! revision/timestamps come from the packages' build times, sqlite databases
//! (which embed nondeterministic page layouts) are not generated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use rayon::prelude::*;

use crate::spec::PkgSpec;

/// Builds every distinct package once into `pool` (named by NEVRA), in
/// parallel, signing with the signer `sign` picks for each.
pub fn build_pool<'a>(
    pool: &Path,
    packages: &[(&'a PkgSpec, Option<&'a rpm::signature::pgp::Signer>)],
) -> Result<BTreeMap<String, PathBuf>> {
    std::fs::create_dir_all(pool).with_context(|| format!("creating {}", pool.display()))?;
    let mut unique: BTreeMap<String, (&PkgSpec, Option<&rpm::signature::pgp::Signer>)> =
        BTreeMap::new();
    for (spec, signer) in packages {
        // Same NEVRA in two snapshots is the same package, built once.
        unique
            .entry(pool_key(spec, *signer))
            .or_insert((spec, *signer));
    }
    // Largest first, so the long builds do not end up last on one core.
    let mut jobs: Vec<_> = unique.into_iter().collect();
    jobs.sort_by_key(|(_, (s, _))| std::cmp::Reverse(s.payload_size()));
    jobs.par_iter()
        .map(|(key, (spec, signer))| {
            let path = pool.join(format!("{key}.rpm"));
            spec.build(*signer, &path)?;
            set_mtime(&path, spec.build_time)?;
            Ok((key.clone(), path))
        })
        .collect()
}

/// Pool file name: NEVRA plus which key signed it (epel's bash and RHEL's
/// differ in version anyway, but an unsigned rebuild must not collide).
pub fn pool_key(spec: &PkgSpec, signer: Option<&rpm::signature::pgp::Signer>) -> String {
    let suffix = if signer.is_some() { "" } else { ".unsigned" };
    format!("{}{suffix}", spec.nevra().replace(':', "_"))
}

/// Lays out one repository at `dir` from pooled packages and runs
/// createrepo_c on it. `revision` is a Unix time, the repo's snapshot time.
pub fn write_repo(dir: &Path, packages: &[(PathBuf, String)], revision: u32) -> Result<()> {
    let pkgdir = dir.join("Packages");
    std::fs::create_dir_all(&pkgdir).with_context(|| format!("creating {}", pkgdir.display()))?;
    for (pooled, file_name) in packages {
        let dest = pkgdir.join(file_name);
        std::fs::hard_link(pooled, &dest)
            .or_else(|_| std::fs::copy(pooled, &dest).map(|_| ()))
            .with_context(|| format!("placing {}", dest.display()))?;
    }
    strata_process::require("createrepo_c")?;
    strata_process::run(
        Command::new("createrepo_c")
            .arg("--no-database")
            .arg("--workers=2")
            .arg(format!("--revision={revision}"))
            .arg("--set-timestamp-to-revision")
            .arg("--distro=cpe:/o:redhat:enterprise_linux:8,Red Hat Enterprise Linux 8")
            .arg("--quiet")
            .arg(dir),
    )?;
    Ok(())
}

/// A dnf `.repo` file section.
pub struct RepoFileEntry<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub baseurl: String,
    pub gpgkey: String,
}

pub fn repo_file(entries: &[RepoFileEntry<'_>]) -> String {
    let mut out = String::new();
    for e in entries {
        out.push_str(&format!(
            "[{}]\nname={}\nbaseurl={}\nenabled=1\ngpgcheck=1\ngpgkey={}\n\n",
            e.id, e.name, e.baseurl, e.gpgkey
        ));
    }
    out
}

pub fn set_mtime(path: &Path, secs: u32) -> Result<()> {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.into());
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(time))
        .with_context(|| format!("setting the mtime of {}", path.display()))
}
