//! The compose lines: the cold compose against dnf + dracut + `ostree
//! commit`, strata's encapsulation against ostree-ext's, the no-op
//! rebuild, and the compose after the z-stream with the download it
//! makes a client holding the first image pay.
//!
//! What it must not do: script the baselines (`baseline.rs` does), or
//! make compose's chunking input any other way than compose makes it (the
//! commit's rpmdb, the workdir's change history): both encapsulations are
//! given that same input, or the lines would compare different work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Result};
use strata_testdistro::{Fixture, SNAPSHOTS};

use crate::baseline::{dnf_and_ostree_commit, ostree_ext_encapsulate, OstreeExtInput};
use crate::bench::Bench;
use crate::fixture::{changed_packages, manifest_packages, Installed};
use crate::measure::{self, timed, Composed, Run};
use crate::table::{first_line, mib, Figure, Goal, Line};

/// The stream the demo manifest composes.
const STREAM: &str = "rhel-8.6";

impl Bench<'_> {
    /// The cold compose against its baselines, the encapsulation against
    /// ostree-ext's, the no-op rebuild. Returns the build, strata's whole
    /// compose and ostree-ext's image of it.
    pub fn cold(&mut self) -> Result<(Composed, Run, PathBuf)> {
        let dir = self.dir;
        eprintln!("bench: strata compose of snapshot {}", SNAPSHOTS[0]);
        let (strata_total, v1) =
            measure::compose(&self.workdir, &self.manifest, &self.vars(SNAPSHOTS[0]))?;
        self.installed = Some(Installed::of(self.fixture, &v1)?);
        let repo = self.workdir.join("repo");
        let content = content_map(
            self.fixture,
            &repo,
            &v1.ostree_commit,
            &self.workdir,
            0,
            dir,
        )?;
        let mut o = strata_oscontainer::EncapsulateOptions::default();
        o.content = Some(content.clone());
        o.labels = image_labels(&v1.image, &v1.inputhash)?;
        o.source_date_epoch = Some(source_date_epoch(&v1)?);
        let (strata_enc, enc) = timed(|| {
            Ok(strata_oscontainer::encapsulate(
                &repo,
                &v1.ostree_commit,
                &dir.join("strata-oci"),
                "v1",
                &o,
            )?)
        })?;
        ensure!(
            enc.manifest_digest == v1.digest,
            "encapsulating the commit again gave {} instead of compose's {}",
            enc.manifest_digest,
            v1.digest
        );
        crate::scratch::set_aside(&dir.join("strata-oci"))?;
        eprintln!("bench: ostree-ext encapsulate");
        let ostree_ext = strata_testdistro::peers::ostree_ext_client()?;
        let ext_oci = dir.join("ostree-ext-oci");
        let ext_input = OstreeExtInput::write(&repo, &v1.ostree_commit, &content, dir, "v1")?;
        let ext_enc = ostree_ext_encapsulate(
            ostree_ext,
            &repo,
            &v1.ostree_commit,
            &ext_oci,
            "v1",
            &ext_input,
            None,
        )?;
        eprintln!("bench: baseline dnf --installroot + dracut + ostree commit");
        let baseline = dnf_and_ostree_commit(self.fixture, dir, &manifest_packages(&v1)?)?;
        eprintln!("bench: strata no-op rebuild");
        let (noop, again) =
            measure::compose(&self.workdir, &self.manifest, &self.vars(SNAPSHOTS[0]))?;
        ensure!(!again.changed, "the second compose was not a no-op");

        let to_commit = Run {
            wall: strata_total.wall.saturating_sub(strata_enc),
            rss: strata_total.rss,
        };
        let ext_enc_run = ext_enc;
        self.lines.push(Line::faster(
            format!("compose cold to the commit ({} packages)", v1.packages),
            &to_commit,
            &baseline,
            Goal::AtLeast(2.0),
        ));
        self.lines.push(Line::faster(
            "compose cold to the chunked image (base: + ostree-ext encapsulate)",
            &strata_total,
            &baseline.then(ext_enc_run),
            Goal::None,
        ));
        self.lines.push(Line::faster(
            "encapsulation (base: ostree-ext 0.15.3; strata in-process, no RSS)",
            &Run {
                wall: strata_enc,
                rss: 0,
            },
            &ext_enc_run,
            Goal::None,
        ));
        let mut noop_line = Line::new("no-op rebuild (target: under 2 s)");
        noop_line.strata = Some(Figure::secs(&noop));
        noop_line.strata_rss = Some(noop.rss);
        self.lines.push(noop_line);
        Ok((v1, strata_total, ext_oci))
    }

    /// The z-stream: compose in the first build's workdir against a cold
    /// compose of the same set, and the download each image format makes
    /// a client holding the first image pay.
    pub fn zstream(&mut self, v1: &Composed, ext_oci: &Path) -> Result<()> {
        let dir = self.dir;
        let repo = self.workdir.join("repo");
        eprintln!(
            "bench: cold compose of snapshot {} in a fresh workdir",
            SNAPSHOTS[1]
        );
        let cold_workdir = dir.join("strata-work-z");
        let (cold, cold_v2) =
            measure::compose(&cold_workdir, &self.manifest, &self.vars(SNAPSHOTS[1]))?;
        eprintln!(
            "bench: strata compose of snapshot {} after {}",
            SNAPSHOTS[1], SNAPSHOTS[0]
        );
        let (v2, repo2, image2) = match measure::compose(
            &self.workdir,
            &self.manifest,
            &self.vars(SNAPSHOTS[1]),
        ) {
            Ok((incremental, v2)) => {
                ensure!(v2.changed, "the z-stream compose changed nothing");
                let line = "compose after the z-stream vs cold compose of that set";
                // What the update reused must not show in its result.
                self.lines
                    .push(if v2.ostree_commit == cold_v2.ostree_commit {
                        Line::faster(line, &incremental, &cold, Goal::AtLeast(4.0))
                    } else {
                        Line::failed(
                            line,
                            format!(
                                "commit {} differs from the cold compose's {}",
                                v2.ostree_commit, cold_v2.ostree_commit
                            ),
                            Goal::AtLeast(4.0),
                        )
                    });
                let image = strata_oscontainer::ImageRef::parse(&v2.image, None)?;
                (v2, repo.clone(), image)
            }
            Err(e) => {
                // Give the fresh workdir's commit the first build's
                // layer map, as compose would have, to still measure
                // the download.
                eprintln!("bench: the z-stream compose failed ({e:#}); encapsulating the cold compose with the first build's layer map");
                self.lines.push(Line::failed(
                    "compose after the z-stream vs cold compose of that set",
                    format!("failed: {}", first_line(&format!("{e:#}"))),
                    Goal::AtLeast(4.0),
                ));
                let repo2 = cold_workdir.join("repo");
                let prior = strata_oscontainer::LayerMap::from_json(&std::fs::read_to_string(
                    v1.build_dir.join("layer-map.json"),
                )?)?;
                let mut o = strata_oscontainer::EncapsulateOptions::default();
                o.content = Some(content_map(
                    self.fixture,
                    &repo2,
                    &cold_v2.ostree_commit,
                    &self.workdir,
                    1,
                    dir,
                )?);
                o.labels = image_labels(&cold_v2.image, &cold_v2.inputhash)?;
                o.source_date_epoch = Some(source_date_epoch(&cold_v2)?);
                o.prior = Some(prior);
                strata_oscontainer::encapsulate(
                    &repo2,
                    &cold_v2.ostree_commit,
                    &self.workdir.join("oci"),
                    "z",
                    &o,
                )?;
                (
                    cold_v2.clone(),
                    repo2,
                    strata_oscontainer::ImageRef::oci(&self.workdir.join("oci"), "z"),
                )
            }
        };
        let strata_diff = strata_oscontainer::diff(
            &strata_oscontainer::ImageRef::parse(&v1.image, None)?,
            &image2,
            &strata_oscontainer::TransportOptions::default(),
        )?;
        let content2 = content_map(
            self.fixture,
            &repo2,
            &v2.ostree_commit,
            &self.workdir,
            1,
            dir,
        )?;
        let ext_input2 = OstreeExtInput::write(&repo2, &v2.ostree_commit, &content2, dir, "v2")?;
        let prior = dir.join("ostree-ext-v1.manifest.json");
        std::fs::write(
            &prior,
            strata_process::stdout(
                Command::new("skopeo")
                    .arg("inspect")
                    .arg("--raw")
                    .arg(format!("oci:{}:v1", ext_oci.display())),
            )?,
        )?;
        ostree_ext_encapsulate(
            strata_testdistro::peers::ostree_ext_client()?,
            &repo2,
            &v2.ostree_commit,
            ext_oci,
            "v2",
            &ext_input2,
            Some(&prior),
        )?;
        let ext_diff = strata_oscontainer::diff(
            &strata_oscontainer::ImageRef::oci(ext_oci, "v1"),
            &strata_oscontainer::ImageRef::oci(ext_oci, "v2"),
            &strata_oscontainer::TransportOptions::default(),
        )?;
        let (changed_names, changed_bytes) = changed_packages(self.fixture, v1, &v2)?;
        eprintln!(
            "bench: z-stream: {} changed packages ({}), {:.2} MiB as RPMs; strata's changed layers:",
            changed_names.len(),
            changed_names.join(" "),
            mib(changed_bytes)
        );
        for l in &strata_diff.layers_added {
            eprintln!(
                "bench:   {:>8.2} MiB  {}",
                mib(l.size),
                describe(&l.components)
            );
        }
        let per_changed =
            |d: &strata_oscontainer::ImageDiff| d.download_bytes as f64 / changed_bytes as f64;
        let mut line = Line::new(format!(
            "z-stream download / changed RPMs ({:.0} MiB; base: ostree-ext)",
            mib(changed_bytes)
        ));
        line.strata = Some(Figure::of(mib(strata_diff.download_bytes), "MiB"));
        line.baseline = Some(Figure::of(mib(ext_diff.download_bytes), "MiB"));
        line.ratio = Some(per_changed(&strata_diff));
        line.ratio_of = "strata/RPMs";
        line.goal = Goal::AtMost(1.1);
        self.lines.push(line);
        let mut ext = Line::new("  (ostree-ext's download / changed RPMs)");
        ext.ratio = Some(per_changed(&ext_diff));
        ext.ratio_of = "ext/RPMs";
        self.lines.push(ext);
        // A new kernel means a new initramfs, which no RPM carries: what
        // the rest of the download weighs against the RPMs.
        let initramfs: u64 = strata_diff
            .layers_added
            .iter()
            .filter(|l| l.components == [strata_compose::INITRAMFS])
            .map(|l| l.size)
            .sum();
        let without = strata_diff.download_bytes - initramfs;
        let mut rest = Line::new("  (strata's download without the initramfs / changed RPMs)");
        rest.strata = Some(Figure::of(mib(without), "MiB"));
        rest.ratio = Some(without as f64 / changed_bytes as f64);
        rest.ratio_of = "strata/RPMs";
        self.lines.push(rest);
        crate::scratch::set_aside(&cold_workdir)?;
        Ok(())
    }
}

fn describe(components: &[String]) -> String {
    match components {
        [] => "(commit layer)".into(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}

/// The chunking input compose used for `commit`: its rpmdb checked out,
/// the workdir's history as it was before that build.
fn content_map(
    fixture: &Fixture,
    repo: &Path,
    commit: &str,
    workdir: &Path,
    snapshot: usize,
    dir: &Path,
) -> Result<strata_oscontainer::ContentMap> {
    let rpmdb = dir.join(format!("rpmdb-{commit}"));
    if !rpmdb.exists() {
        strata_process::run(
            Command::new("ostree")
                .arg(format!("--repo={}", repo.display()))
                .args(["checkout", "-U", "--subpath=/usr/share/rpm", commit])
                .arg(&rpmdb),
        )?;
    }
    let mut history = strata_compose::ChangeHistory::load(workdir, STREAM)?;
    if snapshot == 0 {
        history = strata_compose::ChangeHistory::default();
    }
    strata_compose::content_map(&rpmdb, &fixture.info.kernel_kvers[snapshot], &history)
}

/// The labels compose gives the image (besides those from the commit).
fn image_labels(image: &str, inputhash: &str) -> Result<BTreeMap<String, String>> {
    let info = strata_oscontainer::inspect(
        &strata_oscontainer::ImageRef::parse(image, None)?,
        &strata_oscontainer::TransportOptions::default(),
    )?;
    let osname = info
        .labels
        .get("com.coreos.osname")
        .cloned()
        .unwrap_or_default();
    Ok([
        ("com.coreos.osname".to_string(), osname),
        ("strata.inputhash".to_string(), inputhash.to_string()),
    ]
    .into())
}

fn source_date_epoch(r: &Composed) -> Result<u64> {
    let meta: strata_compose::BuildMeta =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("strata.json"))?)?;
    Ok(meta.source_date_epoch)
}
