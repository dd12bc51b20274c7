//! A new version of the base, from the package set the probe fixed: the
//! packages installed into the staging root, the tree postprocessed into
//! an OS tree, committed, encapsulated as the base image and recorded;
//! then the image's tag and the ostree ref.
//!
//! Must not: move a tag or a ref before the build is recorded (a build
//! killed before then is built again by the next compose).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use strata_dnf::job::{run_in_child, InstallJob};
use strata_dnf::{DepsolveRequest, Dnf, Package};
use strata_manifest::{RpmdbBackend, UtcDateTime};
use strata_rootfs::{bootupd, files, initramfs, initramfs_cache, passwd, policy, sandbox, tree};
use strata_workdir::record::{Source, TreeMeta};
use strata_workdir::{BuildEntry, BuildMeta, EntryKind, Workdir};

use crate::lockfile::lockfile_for;
use crate::{
    commit, content_map, image_ref, pkgcache, sorted, Accounts, ChangeHistory, Compose,
    ComposeResult, LOCKFILE_NAME,
};

/// The previous build's layer assignment, kept so updates move few layers.
const LAYER_MAP: &str = "layer-map.json";

/// A new build: the compose's inputs as the probe fixed them, and the build
/// it follows.
pub(crate) struct Build<'a> {
    pub(crate) c: &'a Compose<'a>,
    pub(crate) request: DepsolveRequest,
    pub(crate) previous: Option<BuildEntry>,
    pub(crate) inputhash: String,
    /// Each override's package by name, as resolved (NEVRA).
    pub(crate) pinned: BTreeMap<String, String>,
    pub(crate) sde: u64,
}

/// The installed packages and the version they are composed as.
struct Installed {
    packages: Vec<Package>,
    version: String,
    report: strata_dnf::InstallReport,
    /// The files placed from the package cache.
    placed: pkgcache::Placed,
    /// The indexes of the packages the cache stored now.
    new_indexes: pkgcache::NewIndexes,
}

/// What postprocessing learned of the tree, for the commit and the record.
struct Postprocessed {
    kernel: tree::KernelInfo,
    generator: initramfs::Generator,
    accounts: Accounts,
    summary: String,
    bootloader: bootupd::Payload,
    rpmdb: strata_rpmdb::Backend,
}

impl Build<'_> {
    /// The stages: install, postprocess, commit, encapsulate, record; then
    /// the tag and the ref.
    pub(crate) fn run(self) -> Result<ComposeResult> {
        let c = self.c;
        // Scriptlets, the initramfs generator and postprocess scripts write
        // to /dev/null; gone before the tree becomes an OS tree.
        let nodes = files::DeviceNodes::make(&c.root)?;
        let repo = commit::open_repo(&c.wd.repo())?;
        let cache = pkgcache::Cache::new(&c.wd.package_cache(), &c.wd.repo());
        let mut installed = self.install(&cache)?;
        let tree = self.postprocess(&installed.version, nodes)?;
        // Which package each file is (for the layers), read from a copy of
        // the rpmdb beside the commit: both take about a second, and the
        // commit of a z-stream's tree is mostly one thread.
        let rpmdb = tempfile::tempdir_in(c.root.parent().unwrap_or(&c.root))
            .context("creating a directory for a copy of the rpmdb")?;
        copy_files(&c.root.join("usr/share/rpm"), rpmdb.path())?;
        let history = ChangeHistory::load(&c.opts.workdir, &c.stream)?;
        let (checksum, content) = std::thread::scope(|s| {
            let content = s.spawn(|| content_map(rpmdb.path(), &tree.kernel.kver, &history));
            let checksum = self.commit(&repo, &cache, &installed, &tree);
            (checksum, content.join())
        });
        let checksum = checksum?;
        let content =
            content.map_err(|_| anyhow::anyhow!("reading the packages' files panicked"))??;
        // The commit synced the objects: the indexes naming them may follow.
        cache.remember(std::mem::take(&mut installed.new_indexes))?;
        let tag = format!("{}-{}", c.stream, installed.version);
        let mut image = self.encapsulate(&checksum, &tag, content)?;
        self.record(&installed, tree, &checksum, &tag, &image)?;
        // Last: the tag and the ref follow the record. Killed before them, the
        // next compose finds the record's image or commit missing and builds
        // again.
        if let Some(t) = image.pending_tag.take() {
            t.apply().context("tagging the base image")?;
        }
        commit::set_ref(&repo, &c.ostree_ref, &checksum)?;
        let build_dir = c.wd.build_dir(&c.stream, &installed.version);
        Ok(ComposeResult {
            changed: true,
            stream: c.stream.clone(),
            version: installed.version,
            ostree_commit: checksum,
            inputhash: self.inputhash,
            ostree_ref: c.ostree_ref.clone(),
            image: image_ref(c.wd, &tag),
            digest: image.manifest_digest,
            lockfile: build_dir.join(LOCKFILE_NAME),
            build_dir,
            packages: installed.packages.len(),
        })
    }

    /// Resolves again, downloads, enforces the policy on every package,
    /// then installs exactly those into the staging root, in a child
    /// ([`crate::ComposeOptions::installer`]): librpm's chroot and its
    /// SOURCE_DATE_EPOCH stay out of this process.
    fn install(&self, cache: &pkgcache::Cache) -> Result<Installed> {
        let c = self.c;
        let packages = {
            let mut dnf = Dnf::new(c.dnf_opts.clone(), c.repo_configs.clone())?;
            let mut resolved = dnf
                .depsolve(&self.request)
                .context("resolving the manifest's packages")?;
            resolved.download().context("downloading packages")?;
            sorted(resolved.packages())
        };
        c.policy
            .clone()
            .remembering(&c.wd.cache().join("verified"))
            .check(
                &packages
                    .iter()
                    .map(|p| policy::Candidate {
                        nevra: p.nevra.clone(),
                        repo: p.repo_id.clone(),
                        path: p.local_path.clone().unwrap_or_default(),
                    })
                    .collect::<Vec<_>>(),
            )
            .map_err(anyhow::Error::new)?;

        let date = UtcDateTime::from_unix_seconds(self.sde as i64);
        let prefix = c.manifest().version_prefix.render(&date);
        let version = format!("{prefix}-{}", c.wd.next_serial(&c.stream, &prefix)?);
        tracing::info!(
            "composing {} {version} ({} packages)",
            c.stream,
            packages.len()
        );

        let previous_accounts = self
            .previous
            .as_ref()
            .and_then(|p| read_accounts(c.wd, &c.stream, &p.version));
        if let Some(acc) = &previous_accounts {
            passwd::seed(&c.root, acc)?;
        }
        // The files under /usr from the package cache; librpm skips them.
        let started = std::time::Instant::now();
        let inputs: Vec<pkgcache::Input<'_>> = packages
            .iter()
            .filter_map(|p| {
                p.local_path.as_deref().map(|path| pkgcache::Input {
                    nevra: &p.nevra,
                    path,
                })
            })
            .collect();
        let mut plan = cache
            .plan(&inputs, !c.dnf_opts.nodocs)
            .context("reading the packages into the package cache")?;
        let placed = cache
            .place(&c.root, &plan)
            .context("placing files from the package cache")?;
        tracing::debug!(
            linked = placed.linked,
            copied = placed.copied,
            prefixes = plan.netshared.len(),
            elapsed = ?started.elapsed(),
            "package cache: files placed"
        );
        let mut options = c.dnf_opts.clone();
        options.substitutes = std::mem::take(&mut plan.substitutes);
        if !plan.netshared.is_empty() {
            options
                .rpm_macros
                .push(("_netsharedpath".to_string(), plan.netshared.join(":")));
        }
        // librpm stamps installed headers with the install time unless
        // SOURCE_DATE_EPOCH says otherwise: the rpmdb must not record "now".
        let job = InstallJob::new(options, c.repo_configs.clone(), self.request.clone())
            .expecting(packages.iter().map(|p| p.nevra.clone()))
            .source_date_epoch(self.sde);
        // The job's files in the workdir: a killed compose leaves them to
        // the next writer, which removes abandoned staging.
        let scratch = c.wd.staging("dnf-job")?;
        let report =
            run_in_child(&c.opts.installer, scratch.path(), &job).context("installing packages")?;
        // The child's own warnings are not shown: say them here.
        for f in &report.ignored_scriptlet_failures {
            tracing::warn!("{}: ignored (ignore-scripts): {f}", c.stream);
        }
        Ok(Installed {
            packages,
            version,
            report,
            placed,
            new_indexes: std::mem::take(&mut plan.new_indexes),
        })
    }

    /// The initramfs, the manifest's files, scripts and units, accounts,
    /// os-release, the bootloader payload, the ostree conventions and the
    /// rpmdb as the target's rpm reads it.
    fn postprocess(&self, version: &str, nodes: files::DeviceNodes) -> Result<Postprocessed> {
        let (root, manifest, sde) = (&self.c.root, self.c.manifest(), self.sde);
        let kernel = tree::find_kernel(root)?;
        let generator = initramfs::Generator::from_manifest(&manifest.initramfs)?;
        let cache = initramfs_cache::Cache::new(&self.c.wd.initramfs_cache());
        let layout = sandbox::Layout::default();
        let call = generator.invocation(root, &layout, &kernel.kver);
        // The image's epoch is the kernel package's build time (or the
        // build's epoch when that is older): a z-stream that leaves the
        // kernel and what the generator reads alone reuses the image.
        let vmlinuz = format!("/usr/lib/modules/{}/vmlinuz", kernel.kver);
        let kernel_built = bootupd::rpm_owners(root, "/var/lib/rpm")(&[vmlinuz])?
            .into_iter()
            .flatten()
            .next()
            .and_then(|o| u64::try_from(o.buildtime).ok());
        let epoch = kernel_built.map_or(sde, |t| t.min(sde));
        let made = generator.run(root, &layout, &call, epoch, Some(&cache))?;
        tracing::info!(
            "initramfs: {}",
            match made {
                initramfs::Made::Reused => "the image made before from the same inputs",
                initramfs::Made::Generated(_) => "generated",
            }
        );

        files::add_and_remove(root, &manifest.add_files, &manifest.remove_files)?;
        for (i, script) in manifest.postprocess.iter().enumerate() {
            sandbox::run_script(root, sde, i, script)?;
        }
        files::enable_units(root, &manifest.units)?;
        let accounts = passwd::split(root)?;
        files::normalize_os_release(root)?;
        let mut os_release = files::COREOS_VARIANT.to_vec();
        os_release.push(("OSTREE_VERSION", version));
        files::set_os_release(root, &os_release)?;
        let summary = format!(
            "{} CoreOS base",
            files::os_release_value(root, "PRETTY_NAME").unwrap_or_else(|| self.c.stream.clone())
        );
        let bootloader =
            bootupd::generate_update_metadata(root, &bootupd::rpm_owners(root, "/var/lib/rpm"))?;
        nodes.remove()?;
        tree::apply(root)?;
        // Installed with the host's rpm (sqlite); stored as the target's rpm
        // reads it, the files placed from the package cache as installed.
        let rpmdb = match manifest.rpmdb {
            RpmdbBackend::Bdb => strata_rpmdb::Backend::Bdb,
            RpmdbBackend::Sqlite => strata_rpmdb::Backend::Sqlite,
        };
        strata_rpmdb::convert_placed(&root.join("usr/share/rpm"), rpmdb)
            .with_context(|| format!("writing the rpm database as {}", rpmdb.as_str()))?;
        Ok(Postprocessed {
            kernel,
            generator,
            accounts,
            summary,
            bootloader,
            rpmdb,
        })
    }

    /// The tree as an ostree commit with its metadata; its checksum.
    fn commit(
        &self,
        repo: &ostree::Repo,
        cache: &pkgcache::Cache,
        installed: &Installed,
        tree: &Postprocessed,
    ) -> Result<String> {
        let pkg_entries: Vec<commit::PkgEntry> = installed
            .packages
            .iter()
            .map(|p| commit::PkgEntry {
                name: p.name.clone(),
                epoch: p.epoch,
                version: p.version.clone(),
                release: p.release.clone(),
                arch: p.arch.clone(),
            })
            .collect();
        let (checksum, touched) = commit::commit(
            repo,
            &commit::CommitSpec {
                tree: &self.c.root,
                version: &installed.version,
                kver: &tree.kernel.kver,
                inputhash: &self.inputhash,
                packages: &pkg_entries,
                timestamp: self.sde,
                initramfs: &tree.generator,
                known: &installed.placed.known,
            },
        )?;
        cache.repair(&installed.placed, &touched)?;
        tracing::info!("committed {checksum}");
        Ok(checksum)
    }

    /// The commit as the base image under `tag`, its layers chunked by
    /// package and kept close to the previous build's; tagged only once the
    /// build is recorded.
    fn encapsulate(
        &self,
        checksum: &str,
        tag: &str,
        content: strata_oscontainer::ContentMap,
    ) -> Result<strata_oscontainer::Encapsulated> {
        let c = self.c;
        let wd = c.wd;
        let prior_map = self
            .previous
            .as_ref()
            .and_then(|p| std::fs::read(wd.build_dir(&p.stream, &p.version).join(LAYER_MAP)).ok())
            .and_then(|b| serde_json::from_slice::<strata_oscontainer::LayerMap>(&b).ok());
        let mut enc = strata_oscontainer::EncapsulateOptions::default();
        enc.labels = [
            ("com.coreos.osname".to_string(), c.manifest().osname.clone()),
            ("strata.inputhash".to_string(), self.inputhash.clone()),
        ]
        .into();
        enc.source_date_epoch = Some(self.sde);
        enc.content = Some(content);
        enc.prior = prior_map;
        // Chunks unchanged since an earlier build keep their blobs.
        enc.layer_cache = Some(wd.layer_cache());
        // Tagged only once the build is recorded.
        enc.defer_tag = true;
        // The staging tree is done with: its files are the commit's
        // objects by now (adopted, or linked from the package cache), or
        // copies of objects an earlier build made, whose blocks are freed.
        // That can take seconds, so it goes on beside the layers instead of
        // after them.
        let image = std::thread::scope(|s| {
            s.spawn(|| {
                let start = std::time::Instant::now();
                match strata_workdir::remove_tree(&c.root) {
                    Ok(()) => {
                        tracing::debug!(elapsed = ?start.elapsed(), "removed the staging tree")
                    }
                    // Dropping the staging directory tries again.
                    Err(e) => tracing::debug!("{e}"),
                }
            });
            strata_oscontainer::encapsulate(&wd.repo(), checksum, &wd.oci(), tag, &enc)
        })
        .context("encapsulating the commit into the base image")?;
        tracing::info!("base image {} ({})", image.image, image.manifest_digest);
        Ok(image)
    }

    /// The build's record: its entry in the history, strata.json, the
    /// lockfile, the accounts and the layer map.
    fn record(
        &self,
        installed: &Installed,
        tree: Postprocessed,
        checksum: &str,
        tag: &str,
        image: &strata_oscontainer::Encapsulated,
    ) -> Result<()> {
        let c = self.c;
        let (wd, manifest, stream, version) = (c.wd, c.manifest(), &c.stream, &installed.version);
        let packages = &installed.packages;
        let lock = lockfile_for(packages, &c.allowed, &wd.cache().join("dnf"), self.sde);
        let nevras: Vec<String> = packages.iter().map(|p| p.nevra.clone()).collect();
        let package_diff = wd.package_diff(self.previous.as_ref(), &nevras);
        let files: Vec<(&Path, &str)> = c
            .loaded
            .files
            .iter()
            .map(|f| (f.path.as_path(), f.sha256.as_str()))
            .collect();
        let meta = BuildMeta {
            stream: stream.clone(),
            version: version.clone(),
            name: manifest.osname.clone(),
            summary: tree.summary,
            inputhash: self.inputhash.clone(),
            ostree_commit: checksum.to_string(),
            ostree_ref: Some(c.ostree_ref.clone()),
            source_date_epoch: self.sde,
            image_digest: Some(image.manifest_digest.clone()),
            image_tag: Some(tag.to_string()),
            source: Some(Source::describe(&c.opts.manifest, &files)),
            packages: nevras,
            package_diff,
            ignored_scriptlet_failures: installed.report.ignored_scriptlet_failures.clone(),
            tree: Some(TreeMeta {
                overrides: self.pinned.clone(),
                kernel: tree.kernel.kver.clone(),
                rpmdb: tree.rpmdb.as_str().to_string(),
                bootloader: [("EFI", tree.bootloader.efi), ("BIOS", tree.bootloader.bios)]
                    .into_iter()
                    .filter_map(|(k, m)| Some((k.to_string(), m?.version)))
                    .collect(),
            }),
            derived: None,
            disks: None,
        };
        let entry = BuildEntry {
            stream: stream.clone(),
            version: version.clone(),
            id: format!("{stream}/{version}"),
            kind: EntryKind::Build,
            inputhash: self.inputhash.clone(),
            ostree_commit: checksum.to_string(),
            image_digest: Some(image.manifest_digest.clone()),
            image_tag: Some(tag.to_string()),
        };
        wd.record(
            &entry,
            Some(&meta),
            &[
                (LOCKFILE_NAME, lock.to_json()),
                ("accounts.json", pretty(&tree.accounts)),
                (LAYER_MAP, pretty(&image.layer_map)),
            ],
        )
    }
}

fn pretty<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).expect("serializes");
    out.push(b'\n');
    out
}

fn read_accounts(wd: &Workdir, stream: &str, version: &str) -> Option<Accounts> {
    let text = std::fs::read(wd.build_dir(stream, version).join("accounts.json")).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Copies the regular files of `from` into `to` (a database directory).
fn copy_files(from: &Path, to: &Path) -> Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry.with_context(|| format!("reading {}", from.display()))?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}
