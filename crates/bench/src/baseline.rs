//! What the compose lines measure strata against, scripted as a release
//! engineer would without strata: `dnf --installroot` + dracut in the
//! tree + `ostree commit`, and ostree-ext's encapsulation given the same
//! objects -> component assignment strata chunks by.
//!
//! What it must not do: run strata for a measured step. Each step timed
//! here is the other tools' work, a process of its own (`measure::run`);
//! strata's code only writes ostree-ext's input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use strata_testdistro::Fixture;

use crate::measure::{self, Run};

/// What ostree-ext is given: the same objects -> component assignment and
/// change frequencies strata chunks by.
pub struct OstreeExtInput {
    components: PathBuf,
    objects: PathBuf,
}

impl OstreeExtInput {
    pub fn write(
        repo: &Path,
        commit: &str,
        content: &strata_oscontainer::ContentMap,
        dir: &Path,
        name: &str,
    ) -> Result<Self> {
        let owners = strata_oscontainer::object_components(repo, commit, content)?;
        let mut objects = String::new();
        let mut components: BTreeMap<&str, u32> = BTreeMap::new();
        for (csum, owner) in &owners {
            objects.push_str(&format!("{csum}\t{owner}\n"));
            components.insert(owner, content.change_frequency(owner));
        }
        let components: String = components
            .iter()
            .map(|(c, f)| format!("{c}\t{f}\n"))
            .collect();
        let input = OstreeExtInput {
            components: dir.join(format!("ostree-ext-{name}.components")),
            objects: dir.join(format!("ostree-ext-{name}.objects")),
        };
        std::fs::write(&input.components, components)?;
        std::fs::write(&input.objects, objects)?;
        Ok(input)
    }
}

/// Builds tests/ostree-ext-compat (its own workspace: ostree-ext pulls
/// ostree 0.19 / glib 0.18) and returns its binary.
pub fn ostree_ext_encapsulate(
    bin: &Path,
    repo: &Path,
    commit: &str,
    oci: &Path,
    tag: &str,
    input: &OstreeExtInput,
    prior: Option<&Path>,
) -> Result<Run> {
    std::fs::create_dir_all(oci)?;
    let mut cmd = Command::new(bin);
    cmd.arg("encapsulate")
        .arg(repo)
        .arg(commit)
        .arg(format!("oci:{}:{tag}", oci.display()))
        .arg(&input.components)
        .arg(&input.objects);
    if let Some(p) = prior {
        cmd.arg(p);
    }
    Ok(measure::run(&mut cmd)?.0)
}

/// What a release engineer would script without strata (its tree and
/// repo are removed afterwards).
pub fn dnf_and_ostree_commit(fixture: &Fixture, dir: &Path, packages: &[String]) -> Result<Run> {
    let reposdir = dir.join("baseline-repos.d");
    std::fs::create_dir_all(&reposdir)?;
    for file in ["rhel-8.6-20261101.repo", "scale.repo"] {
        std::fs::copy(fixture.path(&format!("repos/{file}")), reposdir.join(file))?;
    }
    let root = dir.join("baseline-root");
    let (install, _) = measure::run(
        Command::new("dnf")
            .arg("-y")
            .arg("-q")
            .arg(format!("--installroot={}", root.display()))
            .arg(format!("--setopt=reposdir={}", reposdir.display()))
            .arg(format!(
                "--setopt=cachedir={}",
                dir.join("baseline-cache").display()
            ))
            .args([
                "--releasever=8",
                "--setopt=install_weak_deps=False",
                "install",
            ])
            .args(packages),
    )?;
    // The initramfs. RHEL's kernel-core makes it from its %posttrans
    // (kernel-install runs dracut); the fixture's kernel leaves it to the
    // compose, as rpm-ostree does. Either way the tree to commit has one:
    // dracut with the demo manifest's arguments, in the tree, as one would
    // script it.
    let modules = root.join("usr/lib/modules");
    let kver = std::fs::read_dir(&modules)
        .with_context(|| format!("reading {}", modules.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .context("the baseline tree has no kernel")?;
    let (dracut, _) = measure::run(
        Command::new("bwrap")
            .arg("--bind")
            .arg(&root)
            .args(["/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
            .args(["--setenv", "SOURCE_DATE_EPOCH", "1790000000"])
            .args([
                "/usr/bin/dracut",
                "--no-hostonly",
                "--reproducible",
                "--kver",
            ])
            .arg(&kver)
            .arg("-f")
            .arg(format!("/usr/lib/modules/{kver}/initramfs.img")),
    )?;
    let repo = dir.join("baseline-ostree");
    strata_process::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["init", "--mode=bare-user"]),
    )?;
    let (commit, _) = measure::run(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["commit", "-b", "baseline", "--no-xattrs"])
            .arg(format!("--tree=dir={}", root.display())),
    )?;
    for d in [&root, &repo, &dir.join("baseline-cache")] {
        crate::scratch::set_aside(d)?;
    }
    Ok(install.then(dracut).then(commit))
}
