//! Generates the fixture RPM distribution every strata test, benchmark and
//! the demo build from.
//!
//! The fixture is an offline, signed, bootable RHEL lookalike (8.6 by
//! default; 9.6 or CentOS Stream 9 by [`Flavour`]): real
//! RPMs (built with the `rpm` crate), real repodata (createrepo_c), Debian's
//! real kernel and programs (docs/fixture.md), GRUB images from
//! grub-mkimage. Same inputs give byte-identical packages and repodata, and
//! a generated fixture is reused for as long as its inputs (this crate's
//! sources, the Debian packages, the compiler, GRUB) are unchanged.
//!
//! Modules:
//! - [`boot`]: booting under qemu for tests, waiting for the boot marker.
//! - [`initrd`]: listing an initramfs's files (what `lsinitrd` shows).
//! - [`scratch`]: test directories that do not outlive the run.
//! - [`spec`]: package descriptions and building them into signed RPMs.
//! - `distro`: what the fixture contains (packages, repos, snapshots).
//! - [`Flavour`]: which distribution it imitates.
//! - `kernel`: Debian's kernel split into kernel-core / kernel-modules.
//! - `grub`: GRUB EFI and BIOS images.
//! - `keys`: deterministic signing keys.
//! - `repo`: repository layout, createrepo_c, `.repo` files.
//! - `synth`: deterministic synthetic file content.

/// Fails the calling test unless it runs as root, saying why it needs root
/// (`why`): tests that install RPMs (chrooted scriptlets, device nodes) or
/// compose images call it first, so that an ordinary user sees the reason
/// instead of a failure deep inside rpm.
pub fn require_root(why: &str) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string));
    assert_eq!(
        uid.as_deref(),
        Some("0"),
        "this test needs root: {why} (run `make test` as root)"
    );
}

/// The tree's own rpm, run inside `tree` (a writable copy: rpm writes to
/// the database it opens), which finds its database where the tree's
/// macros say. The judge of an image's rpm database that is not strata's
/// host rpm: it reads and writes only the backend the tree's rpm has
/// (Berkeley DB on RHEL 8). Needs root (chroot).
pub fn tree_rpm(tree: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new("chroot");
    cmd.arg(tree).arg("/usr/bin/rpm");
    cmd
}

/// The account tests run strata as when they need an ordinary user with
/// subordinate ids (`/etc/subuid`, `/etc/subgid`; ci/install-deps creates
/// it): its uid and gid. Fails the calling test, naming the fix, when it
/// is missing.
pub fn subid_user() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = std::process::Command::new("id")
            .args([flag, SUBID_USER])
            .output()
            .expect("running id");
        assert!(
            out.status.success(),
            "the user {SUBID_USER} (an ordinary user with /etc/subuid and /etc/subgid ranges) \
             is missing: run ci/install-deps"
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

/// The name of [`subid_user`].
pub const SUBID_USER: &str = "strata-test";

/// `program` with `args`, to be run as [`subid_user`] (its own group, no
/// others), with `SOURCE_DATE_EPOCH` unset as the tests' own builds have
/// it.
pub fn as_subid_user(
    program: impl AsRef<std::ffi::OsStr>,
    args: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>,
) -> std::process::Command {
    let (uid, gid) = subid_user();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args(["--clear-groups", "--"])
        .arg(program)
        .args(args)
        .env_remove("SOURCE_DATE_EPOCH");
    cmd
}

/// Makes `dir` (a test's own, new directory) [`subid_user`]'s, and every
/// directory above it that it could not enter otherwise enterable.
pub fn give_to_subid_user(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let (uid, gid) = subid_user();
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown");
    for parent in dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(parent) else {
            continue;
        };
        let mode = meta.permissions().mode();
        if mode & 0o001 == 0 {
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode | 0o001))
                .expect("chmod");
        }
    }
}

pub mod boot;
mod debian;
mod distro;
mod flavour;
mod grub;
pub mod initrd;
pub mod iso;
mod kernel;
mod keys;
mod native;
pub mod peers;
mod repo;
pub mod scratch;
mod selinux;
pub mod spec;
mod synth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use distro::{
    RhcosScale, KERNEL_RELEASE, KERNEL_RELEASE_Z, RHCOS_BYTES, RHCOS_FILES, RHCOS_PACKAGES,
    SNAPSHOTS,
};
pub use flavour::Flavour;
pub use keys::FixtureKey;

/// Bumped by hand only when the layout changes in a way the source hash
/// below would not see (it sees every source and data file of this crate).
const FORMAT: u32 = 1;

const SOURCES: &[&[u8]] = &[
    include_bytes!("lib.rs"),
    include_bytes!("distro.rs"),
    include_bytes!("distro/base.rs"),
    include_bytes!("distro/boot.rs"),
    include_bytes!("distro/node.rs"),
    include_bytes!("distro/rhcos.rs"),
    include_bytes!("flavour.rs"),
    include_bytes!("grub.rs"),
    include_bytes!("kernel.rs"),
    include_bytes!("keys.rs"),
    include_bytes!("repo.rs"),
    include_bytes!("spec.rs"),
    include_bytes!("synth.rs"),
    include_bytes!("../files/kernel-core-modules"),
    include_bytes!("../files/strata-boot-check"),
    include_bytes!("../files/strata-boot-check.service"),
    include_bytes!("debian.rs"),
    include_bytes!("../debian/packages"),
    include_bytes!("../native/nss_altfiles.c"),
];

const RELEASE_KEY_FILE: &str = "RPM-GPG-KEY-strata-fixture-release";
const CENTOS_KEY_FILE: &str = "RPM-GPG-KEY-strata-fixture-centos";
const CLOUD_SIG_KEY_FILE: &str = "RPM-GPG-KEY-strata-fixture-centos-sig-cloud";
const NFV_SIG_KEY_FILE: &str = "RPM-GPG-KEY-strata-fixture-centos-sig-nfv";
const EPEL_KEY_FILE: &str = "RPM-GPG-KEY-strata-fixture-epel";
const INFO_FILE: &str = "fixture.json";

/// How to generate a fixture.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Which distribution to imitate (`--flavour`).
    pub flavour: Flavour,
    /// Synthetic packages to add for benchmarks (`--scale N`).
    pub scale: usize,
    /// Synthetic packages that make the base as large as a real RHCOS
    /// ([`Options::scale_rhcos`]), or a fraction of one.
    pub rhcos: Option<RhcosScale>,
    /// Where `ci/install-deps` put the Debian kernel package.
    pub kernel_cache: PathBuf,
    /// Where `ci/install-deps` put the Debian packages of `debian/packages`.
    pub deb_cache: PathBuf,
    /// Where `ci/install-deps` put GRUB 2.14 (see `grub`).
    pub grub_cache: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            flavour: Flavour::default(),
            scale: 0,
            rhcos: None,
            kernel_cache: std::env::var_os("STRATA_KERNEL_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| kernel::DEFAULT_KERNEL_CACHE.into()),
            deb_cache: std::env::var_os("STRATA_DEB_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| debian::DEFAULT_DEB_CACHE.into()),
            grub_cache: std::env::var_os("STRATA_GRUB_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| grub::DEFAULT_GRUB_CACHE.into()),
        }
    }
}

impl Options {
    pub fn scale(mut self, n: usize) -> Self {
        self.scale = n;
        self
    }

    /// Adds synthetic packages so that the composed base has a real RHCOS
    /// base's package count, installed bytes and file count
    /// (docs/fixture.md, "RHCOS-sized fixture").
    pub fn scale_rhcos(self) -> Self {
        self.rhcos(RhcosScale::FULL)
    }

    /// Half of [`Options::scale_rhcos`]: for measuring how costs grow.
    pub fn scale_rhcos_half(self) -> Self {
        self.rhcos(RhcosScale::HALF)
    }

    pub fn rhcos(mut self, scale: RhcosScale) -> Self {
        self.rhcos = Some(scale);
        self
    }

    pub fn flavour(mut self, flavour: Flavour) -> Self {
        self.flavour = flavour;
        self
    }
}

/// A generated fixture on disk.
#[derive(Clone, Debug)]
pub struct Fixture {
    pub root: PathBuf,
    pub info: FixtureInfo,
}

/// `fixture.json`: what the fixture holds, with paths relative to its root.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FixtureInfo {
    pub cache_key: String,
    /// `rhel-8.6`, `rhel-9.6` or `c9s` ([`Flavour::name`]).
    pub flavour: String,
    /// The distribution's key: Red Hat's release key, or CentOS's.
    pub release_key: KeyInfo,
    pub epel_key: KeyInfo,
    /// Every key that signs packages of the fixture, by role: `release`
    /// (the distribution's), `epel`, and on CentOS `redhat` (the kubelet
    /// OKD takes from Red Hat), `cloud-sig` and `nfv-sig`.
    pub keys: BTreeMap<String, KeyInfo>,
    /// Debian package -> version, of every package whose programs the
    /// fixture carries (`debian/packages`).
    pub debian: BTreeMap<String, String>,
    /// Debian package -> version, of the GRUB cache (Debian unstable's
    /// GRUB 2.14 and what its tools ran with).
    #[serde(default)]
    pub grub: BTreeMap<String, String>,
    /// The kernel binary's own release (`uname -r`).
    pub kernel_uname: String,
    /// `/usr/lib/modules/<kver>` of each snapshot, oldest first.
    pub kernel_kvers: Vec<String>,
    pub snapshots: Vec<String>,
    pub repos: Vec<RepoInfo>,
    pub scale: usize,
    /// Per mille of a real RHCOS base that the RHCOS-sized packages make
    /// up (`Options::rhcos`), when there are any.
    #[serde(default)]
    pub rhcos_permille: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct KeyInfo {
    pub fingerprint: String,
    /// Public key, relative to the fixture root.
    pub path: String,
    pub user_id: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RepoInfo {
    pub id: String,
    pub name: String,
    pub dir: String,
    /// The dated snapshot this repo belongs to, for the RHEL repos.
    pub snapshot: Option<String>,
    pub signed_by: String,
    pub packages: Vec<PackageInfo>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PackageInfo {
    pub name: String,
    pub nevra: String,
    pub file: String,
    pub build_time: u32,
}

impl Fixture {
    /// Generates the fixture into `out`, or reuses what is there when it was
    /// generated from the same inputs. Safe to call from several processes
    /// at once: one generates, the others wait and reuse.
    pub fn generate(out: &Path, opts: &Options) -> Result<Fixture> {
        let deb = kernel::find_deb(&opts.kernel_cache)?;
        let debs = debian::DebCache::find(&opts.deb_cache)?;
        let compiler = native::compiler_version()?;
        let grub = grub::GrubImages::build(&opts.grub_cache, opts.flavour.efi_vendor())?;
        let key = cache_key(
            opts.flavour,
            &deb,
            &debs,
            &compiler,
            &grub.versions,
            opts.scale,
            opts.rhcos,
        )?;

        let parent = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let lock_path = out.with_extension("lock");
        let lock = std::fs::File::create(&lock_path)
            .with_context(|| format!("creating {}", lock_path.display()))?;
        lock.lock()
            .with_context(|| format!("locking {}", lock_path.display()))?;

        // A fixture.json this version cannot read is an outdated fixture.
        if let Ok(Some(existing)) = Self::open(out) {
            if existing.info.cache_key == key {
                tracing::info!("fixture at {} is current", out.display());
                return Ok(existing);
            }
        }
        tracing::info!("generating the fixture distribution into {}", out.display());
        let staging = tempfile::Builder::new()
            .prefix(".fixture-")
            .tempdir_in(parent)
            .with_context(|| format!("creating a staging directory in {}", parent.display()))?;
        let info = build(
            staging.path(),
            opts.flavour,
            &deb,
            &debs,
            grub,
            key,
            opts.scale,
            opts.rhcos,
        )?;
        if out.exists() {
            std::fs::remove_dir_all(out)
                .with_context(|| format!("removing the outdated fixture {}", out.display()))?;
        }
        let staged = staging.keep();
        std::fs::rename(&staged, out)
            .with_context(|| format!("moving the fixture into {}", out.display()))?;
        let root = std::fs::canonicalize(out)?;
        write_repo_files(&root, &info)?;
        Ok(Fixture { root, info })
    }

    /// The fixture at `root`, if one was generated there.
    pub fn open(root: &Path) -> Result<Option<Fixture>> {
        let path = root.join(INFO_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let info =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(Some(Fixture {
            root: std::fs::canonicalize(root)?,
            info,
        }))
    }

    /// The fixture shared by every test of the workspace, generated once
    /// into `target/strata-fixture` (or `$STRATA_FIXTURE_DIR`).
    pub fn for_tests() -> Result<Fixture> {
        Self::for_tests_flavour(Flavour::default())
    }

    /// The shared fixture of `flavour`: the default's directory, or that
    /// directory's name with `-<flavour>` appended.
    pub fn for_tests_flavour(flavour: Flavour) -> Result<Fixture> {
        static CELLS: std::sync::Mutex<BTreeMap<Flavour, Fixture>> =
            std::sync::Mutex::new(BTreeMap::new());
        let mut cells = CELLS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = cells.get(&flavour) {
            return Ok(f.clone());
        }
        let mut dir = std::env::var_os("STRATA_FIXTURE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/strata-fixture")
            })
            .into_os_string();
        if flavour != Flavour::default() {
            dir.push(format!("-{flavour}"));
        }
        let f = Self::generate(Path::new(&dir), &Options::default().flavour(flavour))?;
        cells.insert(flavour, f.clone());
        Ok(f)
    }

    pub fn flavour(&self) -> Flavour {
        Flavour::parse(&self.info.flavour).unwrap_or_default()
    }

    pub fn repo(&self, id: &str, snapshot: Option<&str>) -> Option<&RepoInfo> {
        self.info
            .repos
            .iter()
            .find(|r| r.id == id && (snapshot.is_none() || r.snapshot.as_deref() == snapshot))
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes an extra repository at `dir` holding `packages`, signed as
    /// `signing` says: for tests of policies and updates that need packages
    /// the fixture does not carry (unsigned, wrongly signed, rebuilt).
    pub fn build_repo(dir: &Path, packages: &[spec::PkgSpec], signing: Signing) -> Result<()> {
        let key = match signing {
            Signing::Release => Some(release_key()?),
            Signing::Centos => Some(centos_key()?),
            Signing::Epel => Some(epel_key()?),
            Signing::Unsigned => None,
        };
        let signer = key
            .map(|k| rpm::signature::pgp::Signer::from_asc(&k.secret_asc))
            .transpose()?;
        let staging = tempfile::tempdir()?;
        let pool = repo::build_pool(
            staging.path(),
            &packages
                .iter()
                .map(|p| (p, signer.as_ref()))
                .collect::<Vec<_>>(),
        )?;
        let files: Vec<(PathBuf, String)> = packages
            .iter()
            .map(|p| {
                (
                    pool[&repo::pool_key(p, signer.as_ref())].clone(),
                    p.file_name(),
                )
            })
            .collect();
        let revision = packages.iter().map(|p| p.build_time).max().unwrap_or(0);
        repo::write_repo(dir, &files, revision)
    }

    /// The `.repo` file for the OS repos (baseos, appstream) of `snapshot`.
    pub fn rhel_repo_file(&self, snapshot: &str) -> PathBuf {
        self.root
            .join(format!("repos/{}-{snapshot}.repo", self.info.flavour))
    }
}

/// How [`Fixture::build_repo`] signs packages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signing {
    /// Red Hat's release key (RHEL's packages and the rhocp repos).
    Release,
    /// CentOS's key (CentOS Stream's packages).
    Centos,
    Epel,
    Unsigned,
}

/// Red Hat's release key: it signs RHEL 8 and RHEL 9 alike, as Red Hat's
/// does.
fn release_key() -> Result<FixtureKey> {
    FixtureKey::derive(
        "strata fixture RHEL release key",
        "strata fixture RHEL release key <release@fixture.strata.invalid>",
    )
}

fn centos_key() -> Result<FixtureKey> {
    FixtureKey::derive(
        "strata fixture CentOS key",
        "strata fixture CentOS key <security@fixture-centos.strata.invalid>",
    )
}

fn nfv_sig_key() -> Result<FixtureKey> {
    FixtureKey::derive(
        "strata fixture CentOS NFV SIG key",
        "strata fixture CentOS NFV SIG key <nfv-sig@fixture-centos.strata.invalid>",
    )
}

fn cloud_sig_key() -> Result<FixtureKey> {
    FixtureKey::derive(
        "strata fixture CentOS Cloud SIG key",
        "strata fixture CentOS Cloud SIG key <cloud-sig@fixture-centos.strata.invalid>",
    )
}

fn epel_key() -> Result<FixtureKey> {
    FixtureKey::derive(
        "strata fixture EPEL key",
        "strata fixture EPEL key <epel@fixture.strata.invalid>",
    )
}

fn cache_key(
    flavour: Flavour,
    deb: &Path,
    debs: &debian::DebCache,
    compiler: &str,
    grub_versions: &BTreeMap<String, String>,
    scale: usize,
    rhcos: Option<RhcosScale>,
) -> Result<String> {
    let mut h = Sha256::new();
    h.update(FORMAT.to_le_bytes());
    h.update(flavour.name().as_bytes());
    for s in SOURCES {
        h.update(Sha256::digest(s));
    }
    let meta = std::fs::metadata(deb).with_context(|| format!("reading {}", deb.display()))?;
    h.update(deb.file_name().unwrap_or_default().as_encoded_bytes());
    h.update(meta.len().to_le_bytes());
    for (name, path) in &debs.debs {
        let meta =
            std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
        h.update(name.as_bytes());
        h.update(path.file_name().unwrap_or_default().as_encoded_bytes());
        h.update(meta.len().to_le_bytes());
    }
    h.update(compiler.as_bytes());
    for (name, version) in grub_versions {
        h.update(name.as_bytes());
        h.update(version.as_bytes());
    }
    h.update(scale.to_le_bytes());
    if let Some(r) = rhcos {
        h.update(b"rhcos");
        h.update(r.permille.to_le_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

#[allow(clippy::too_many_arguments)]
fn build(
    root: &Path,
    flavour: Flavour,
    deb: &Path,
    debs: &debian::DebCache,
    grub: grub::GrubImages,
    cache_key: String,
    scale: usize,
    rhcos: Option<RhcosScale>,
) -> Result<FixtureInfo> {
    // Each signer's key and the file it is published as under keys/.
    let mut keys: Vec<(distro::Signer, FixtureKey, &str)> = if flavour.is_centos() {
        vec![
            (distro::Signer::Release, centos_key()?, CENTOS_KEY_FILE),
            (distro::Signer::RedHat, release_key()?, RELEASE_KEY_FILE),
            (
                distro::Signer::CloudSig,
                cloud_sig_key()?,
                CLOUD_SIG_KEY_FILE,
            ),
            (distro::Signer::NfvSig, nfv_sig_key()?, NFV_SIG_KEY_FILE),
        ]
    } else {
        vec![(distro::Signer::Release, release_key()?, RELEASE_KEY_FILE)]
    };
    keys.push((distro::Signer::Epel, epel_key()?, EPEL_KEY_FILE));
    let key_of = |s: distro::Signer| {
        keys.iter()
            .find(|(signer, _, _)| *signer == s)
            .map(|(_, k, file)| (k, *file))
            .expect("every signer the flavour uses has a key")
    };
    let (release_key, release_file) = key_of(distro::Signer::Release);
    let (epel_key, _) = key_of(distro::Signer::Epel);
    let kernel = kernel::Kernel::unpack(deb)?;
    // The modules directory is the kernel's own `uname -r`, as on RHEL:
    // udev and modprobe look there. The fixture has one Debian kernel
    // build, so its z-stream update is that build again under the same
    // kver, rebuilt (its image changes, see distro.rs).
    let kvers = vec![kernel.uname.clone(), kernel.uname.clone()];
    let grub_versions = grub.versions.clone();
    let debian = debian::Debian::unpack(debs)?;
    let ingredients = distro::Ingredients {
        flavour,
        selinux_store: selinux::module_store(debs)?,
        debian,
        nss_altfiles: native::nss_altfiles()?,
        kernel: kernel.files(&kvers[0])?,
        kernel_z: {
            // The z-stream kernel: the same build, its image changed after
            // the bytes the loaders read (as `distro::rebuilt` does).
            let mut z = kernel.files(&kvers[1])?;
            for f in &mut z.core {
                if let (true, spec::FileKind::File(content)) =
                    (f.path.ends_with("/vmlinuz"), &mut f.kind)
                {
                    content.extend_from_slice(
                        format!("\0strata fixture rebuild {KERNEL_RELEASE_Z}\0").as_bytes(),
                    );
                }
            }
            z
        },
        grub_efi: grub.efi,
        grub_pc_files: grub.pc_files,
        release_key_asc: release_key.public_asc.clone(),
        sig_keys: keys
            .iter()
            .filter_map(|(s, k, _)| {
                let file = match s {
                    distro::Signer::CloudSig => "RPM-GPG-KEY-CentOS-SIG-Cloud",
                    distro::Signer::NfvSig => "RPM-GPG-KEY-CentOS-SIG-NFV",
                    _ => return None,
                };
                Some((file, k.public_asc.clone()))
            })
            .collect(),
        scale,
        rhcos,
    };
    let repos = distro::repos(&ingredients);
    check_libraries(&repos)?;

    let keys_dir = root.join("keys");
    std::fs::create_dir_all(&keys_dir)?;
    let mut signers = Vec::new();
    for (signer, key, file) in &keys {
        std::fs::write(keys_dir.join(file), &key.public_asc)?;
        signers.push((
            *signer,
            rpm::signature::pgp::Signer::from_asc(&key.secret_asc)?,
        ));
    }
    let signer_for = |s: distro::Signer| {
        signers
            .iter()
            .find(|(signer, _)| *signer == s)
            .map(|(_, k)| k)
            .expect("every signer the flavour uses has a key")
    };

    let all: Vec<_> = repos
        .iter()
        .flat_map(|r| r.packages.iter().map(|p| (p, Some(signer_for(r.signer)))))
        .collect();
    let pool_dir = root.join(".pool");
    let pool: BTreeMap<String, PathBuf> = repo::build_pool(&pool_dir, &all)?;

    let mut infos = Vec::new();
    for r in &repos {
        let snapshot = SNAPSHOTS
            .iter()
            .find(|s| r.dir.starts_with(&format!("snapshots/{s}/")))
            .map(|s| s.to_string());
        let files: Vec<(PathBuf, String)> = r
            .packages
            .iter()
            .map(|p| {
                let key = repo::pool_key(p, Some(signer_for(r.signer)));
                (pool[&key].clone(), p.file_name())
            })
            .collect();
        let revision = r.packages.iter().map(|p| p.build_time).max().unwrap_or(0);
        repo::write_repo(&root.join(&r.dir), &files, revision)?;
        let mut packages: Vec<PackageInfo> = r
            .packages
            .iter()
            .map(|p| PackageInfo {
                name: p.name.clone(),
                nevra: p.nevra(),
                file: format!("{}/Packages/{}", r.dir, p.file_name()),
                build_time: p.build_time,
            })
            .collect();
        packages.sort_by(|a, b| a.nevra.cmp(&b.nevra));
        infos.push(RepoInfo {
            id: r.id.clone(),
            name: r.name.clone(),
            dir: r.dir.clone(),
            snapshot,
            signed_by: key_of(r.signer).0.fingerprint.clone(),
            packages,
        });
    }
    std::fs::remove_dir_all(&pool_dir)?;

    let key_info = |k: &FixtureKey, file: &str| KeyInfo {
        fingerprint: k.fingerprint.clone(),
        path: format!("keys/{file}"),
        user_id: k.user_id.clone(),
    };
    let info = FixtureInfo {
        cache_key,
        flavour: flavour.name().into(),
        release_key: key_info(release_key, release_file),
        epel_key: key_info(epel_key, EPEL_KEY_FILE),
        keys: keys
            .iter()
            .map(|(s, k, file)| (s.name().to_string(), key_info(k, file)))
            .collect(),
        debian: debs.versions(),
        grub: grub_versions,
        kernel_uname: kernel.uname.clone(),
        kernel_kvers: kvers,
        snapshots: SNAPSHOTS.iter().map(|s| s.to_string()).collect(),
        repos: infos,
        scale,
        rhcos_permille: rhcos.map(|r| r.permille),
    };
    let mut json = serde_json::to_string_pretty(&info)?;
    json.push('\n');
    std::fs::write(root.join(INFO_FILE), json)?;
    Ok(info)
}

/// Every library a package needs is in its repository or one it is used
/// with (the RHEL repos of the same snapshot): a Debian package missing
/// from `debian/packages` fails here, not as a program that cannot start.
fn check_libraries(repos: &[distro::RepoSpec]) -> Result<()> {
    for r in repos {
        let snapshot = r.dir.split('/').take(2).collect::<Vec<_>>().join("/");
        let provided: std::collections::BTreeSet<&str> = repos
            .iter()
            // A snapshot's packages need their own snapshot; a layered
            // repo's (rhocp, epel) are installed with the RHEL repos.
            .filter(|o| {
                o.dir.starts_with(&snapshot)
                    || o.id == r.id
                    || (!r.dir.starts_with("snapshots/") && o.dir.starts_with("snapshots/"))
            })
            .flat_map(|o| o.packages.iter())
            .flat_map(|p| p.provides.iter().map(|d| d.0.as_str()))
            .collect();
        for p in &r.packages {
            for d in &p.requires {
                if d.0.ends_with("()(64bit)") && !provided.contains(d.0.as_str()) {
                    bail!(
                        "fixture package {} needs {}, which no package of {} provides: add the Debian package that has it to debian/packages",
                        p.name, d.0, r.id
                    );
                }
            }
        }
    }
    Ok(())
}

/// `.repo` files name absolute paths, so they are written for the final
/// location only (and are the one part of a fixture that depends on it).
fn write_repo_files(root: &Path, info: &FixtureInfo) -> Result<()> {
    let dir = root.join("repos");
    std::fs::create_dir_all(&dir)?;
    let url = |rel: &str| format!("file://{}/{rel}", root.display());
    let mut files: BTreeMap<String, Vec<repo::RepoFileEntry<'_>>> = BTreeMap::new();
    for r in &info.repos {
        let file = match (&r.snapshot, r.dir.as_str()) {
            (Some(s), _) => format!("{}-{s}", info.flavour),
            (None, "scale") => "scale".into(),
            (None, _) => r.id.split("-for-rhel-").next().unwrap_or(&r.id).to_string(),
        };
        let key = info
            .keys
            .values()
            .find(|k| k.fingerprint == r.signed_by)
            .map_or(&info.release_key.path, |k| &k.path);
        files.entry(file).or_default().push(repo::RepoFileEntry {
            id: &r.id,
            name: &r.name,
            baseurl: url(&r.dir),
            gpgkey: url(key),
        });
    }
    for (name, entries) in files {
        let path = dir.join(format!("{name}.repo"));
        std::fs::write(&path, repo::repo_file(&entries))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
