//! What the fixture distribution contains.
//!
//! A small RHEL lookalike (8.6, 9.6 or CentOS Stream 9: see `flavour`):
//! the packages an RHCOS base needs to boot, carrying Debian's real
//! programs under RHEL's names and paths (`base`: glibc, bash, coreutils,
//! shadow-utils, setup, filesystem, SELinux's packages; `boot`: the
//! kernel, systemd as the init, dracut with ostree's module, shim and
//! GRUB), ordinary packages for realistic chunking, the OpenShift node
//! packages of two releases (`node`), an EPEL lookalike the RHEL-only
//! policy must refuse, and a z-stream snapshot that updates a few packages.
//! Scriptlets exercise what real ones do: %pre creating system users (fixed
//! and dynamically allocated ids), %post writing under /var and /etc, a
//! %post that fails. This module holds the repositories and the helpers
//! the three package modules share.

use std::collections::BTreeMap;

use crate::debian::{self, Debian};
use crate::flavour::Flavour;
use crate::kernel::KernelFiles;
use crate::spec::{Dep, FileKind, FileSpec, PkgSpec};
use crate::synth;

mod base;
mod boot;
mod node;
mod rhcos;

pub use rhcos::{RhcosScale, RHCOS_BYTES, RHCOS_FILES, RHCOS_PACKAGES};

use base::*;
use boot::*;
use node::*;

/// Which key signs a repository's packages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signer {
    /// The distribution's own key (Red Hat's, or CentOS's).
    Release,
    Epel,
    /// Red Hat's release key where the distribution is CentOS (OKD takes
    /// the kubelet from Red Hat's repo).
    RedHat,
    /// The CentOS Cloud SIG's key (OKD's cri-o).
    CloudSig,
    /// The CentOS NFV SIG's key (Open vSwitch).
    NfvSig,
}

impl Signer {
    /// The name fixture.json lists its key under.
    pub fn name(self) -> &'static str {
        match self {
            Signer::Release => "release",
            Signer::Epel => "epel",
            Signer::RedHat => "redhat",
            Signer::CloudSig => "cloud-sig",
            Signer::NfvSig => "nfv-sig",
        }
    }
}

/// One repository of the fixture, at one point in time.
pub struct RepoSpec {
    pub id: String,
    pub name: String,
    /// Directory relative to the fixture root.
    pub dir: String,
    pub signer: Signer,
    pub packages: Vec<PkgSpec>,
}

/// Inputs that do not come from this file: the real binaries.
pub struct Ingredients {
    pub flavour: Flavour,
    /// Debian's packages, unpacked: the real programs.
    pub debian: Debian,
    /// The fixture's own NSS module (`native/nss_altfiles.c`, compiled).
    pub nss_altfiles: Vec<u8>,
    pub kernel: KernelFiles,
    /// The z-stream kernel's files (same binaries, new `<kver>`).
    pub kernel_z: KernelFiles,
    pub grub_efi: Vec<u8>,
    /// GRUB's i386-pc directory (Debian's grub-pc-bin), at RHEL's paths.
    pub grub_pc_files: Vec<FileSpec>,
    /// The targeted policy's module store (`crate::selinux`).
    pub selinux_store: Vec<FileSpec>,
    pub release_key_asc: String,
    /// The CentOS SIGs' keys (file name in `/etc/pki/rpm-gpg`, armored
    /// key), which centos-gpg-keys ships beside CentOS's own.
    pub sig_keys: Vec<(&'static str, String)>,
    pub scale: usize,
    /// RHCOS-sized synthetic packages (`rhcos`), beside `scale`'s.
    pub rhcos: Option<RhcosScale>,
}

pub const SNAPSHOTS: [&str; 2] = ["20261101", "20261115"];
pub const KERNEL_VERSION: &str = "6.1.0";
/// The default flavour's kernel releases (`Flavour::kernel_release`).
pub const KERNEL_RELEASE: &str = "57.el8_6";
pub const KERNEL_RELEASE_Z: &str = "57.1.el8_6";

/// 2026-10-15T00:00:00Z: build time of the 8.6 GA-snapshot packages.
const BASE_TIME: u32 = 1_792_022_400;
/// 2026-11-10T00:00:00Z: build time of the z-stream updates.
const ZSTREAM_TIME: u32 = 1_794_268_800;
/// 2026-10-20T00:00:00Z: build time of the OpenShift packages.
const OCP_TIME: u32 = 1_792_454_400;

const FILE_DATA: &[(&str, &[u8])] = &[
    (
        "strata-boot-check",
        include_bytes!("../files/strata-boot-check"),
    ),
    (
        "strata-boot-check.service",
        include_bytes!("../files/strata-boot-check.service"),
    ),
];

fn data(name: &str) -> Vec<u8> {
    FILE_DATA
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| d.to_vec())
        .expect("fixture data file exists")
}

fn os_release(fl: Flavour) -> &'static str {
    match fl {
        Flavour::Rhel86 => {
            "NAME=\"Red Hat Enterprise Linux\"\n\
             VERSION=\"8.6 (Ootpa)\"\n\
             ID=\"rhel\"\n\
             ID_LIKE=\"fedora\"\n\
             VERSION_ID=\"8.6\"\n\
             PLATFORM_ID=\"platform:el8\"\n\
             PRETTY_NAME=\"Red Hat Enterprise Linux 8.6 (Ootpa)\"\n\
             ANSI_COLOR=\"0;31\"\n\
             CPE_NAME=\"cpe:/o:redhat:enterprise_linux:8::baseos\"\n\
             HOME_URL=\"https://www.redhat.com/\"\n\
             REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux 8\"\n\
             REDHAT_SUPPORT_PRODUCT_VERSION=\"8.6\"\n"
        }
        Flavour::Rhel96 => {
            "NAME=\"Red Hat Enterprise Linux\"\n\
             VERSION=\"9.6 (Plow)\"\n\
             ID=\"rhel\"\n\
             ID_LIKE=\"fedora\"\n\
             VERSION_ID=\"9.6\"\n\
             PLATFORM_ID=\"platform:el9\"\n\
             PRETTY_NAME=\"Red Hat Enterprise Linux 9.6 (Plow)\"\n\
             ANSI_COLOR=\"0;31\"\n\
             LOGO=\"fedora-logo-icon\"\n\
             CPE_NAME=\"cpe:/o:redhat:enterprise_linux:9::baseos\"\n\
             HOME_URL=\"https://www.redhat.com/\"\n\
             DOCUMENTATION_URL=\"https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9\"\n\
             BUG_REPORT_URL=\"https://issues.redhat.com/\"\n\
             REDHAT_BUGZILLA_PRODUCT=\"Red Hat Enterprise Linux 9\"\n\
             REDHAT_BUGZILLA_PRODUCT_VERSION=9.6\n\
             REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux\"\n\
             REDHAT_SUPPORT_PRODUCT_VERSION=\"9.6\"\n"
        }
        Flavour::C9s => {
            "NAME=\"CentOS Stream\"\n\
             VERSION=\"9\"\n\
             ID=\"centos\"\n\
             ID_LIKE=\"rhel fedora\"\n\
             VERSION_ID=\"9\"\n\
             PLATFORM_ID=\"platform:el9\"\n\
             PRETTY_NAME=\"CentOS Stream 9\"\n\
             ANSI_COLOR=\"0;31\"\n\
             LOGO=\"fedora-logo-icon\"\n\
             CPE_NAME=\"cpe:/o:centos:centos:9\"\n\
             HOME_URL=\"https://centos.org/\"\n\
             BUG_REPORT_URL=\"https://issues.redhat.com/\"\n\
             REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux 9\"\n\
             REDHAT_SUPPORT_PRODUCT_VERSION=\"CentOS Stream\"\n"
        }
    }
}

fn unit(description: &str, exec: &str) -> Vec<u8> {
    format!(
        "[Unit]\nDescription={description}\n\n[Service]\nExecStart={exec}\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    .into_bytes()
}

/// `rel` is the release without the dist tag, e.g. `6.el8`.
fn pkg(name: &str, version: &str, rel: &str) -> PkgSpec {
    let mut p = PkgSpec::new(name, version, rel);
    p.build_time = BASE_TIME;
    p
}

/// A made-up but realistic package: a binary, a library, a config and docs,
/// `size` bytes in all.
fn ordinary(name: &str, version: &str, release: &str, size: usize, requires: &[&str]) -> PkgSpec {
    let seed = format!("{name}-{version}-{release}");
    let bin = size * 6 / 10;
    let lib = size * 3 / 10;
    let doc = size - bin - lib;
    let mut p = pkg(name, version, release).requires(requires).files([
        FileSpec::file(
            &format!("/usr/bin/{name}"),
            synth::binary(&seed, bin),
            0o755,
        ),
        FileSpec::file(
            &format!("/usr/lib64/lib{name}.so.1"),
            synth::binary(&format!("{seed}.so"), lib),
            0o755,
        ),
        FileSpec::file(
            &format!("/etc/{name}.conf"),
            synth::text(&format!("{seed}.conf"), 400),
            0o644,
        )
        .config(),
        FileSpec::dir(&format!("/usr/share/doc/{name}"), 0o755),
        FileSpec::file(
            &format!("/usr/share/doc/{name}/README"),
            synth::text(&format!("{seed}.doc"), doc.max(200)),
            0o644,
        )
        .doc(),
    ]);
    p.summary = format!("The {name} package (fixture)");
    p
}

/// A package made of Debian's real programs (see `debian.rs`): the files of
/// `debs` where RHEL keeps them, configuration under `/etc` marked
/// `%config(noreplace)`, and RPM's automatic library dependencies.
fn real(ing: &Ingredients, name: &str, version: &str, rel: &str, debs: &[&str]) -> PkgSpec {
    let files: Vec<FileSpec> = ing
        .debian
        .take(debs)
        .into_iter()
        .filter(|f| {
            !(matches!(f.kind, FileKind::Dir) && FILESYSTEM_DIRS.contains(&f.path.as_str()))
        })
        .map(|f| {
            if f.path.starts_with("/etc/") && matches!(f.kind, FileKind::File(_)) {
                f.config()
            } else {
                f
            }
        })
        .collect();
    let (provides, requires) = debian::elf_deps(&files);
    let mut p = pkg(name, version, rel).files(files);
    p.provides.extend(provides.into_iter().map(Dep));
    p.requires.extend(requires.into_iter().map(Dep));
    p.summary = format!("The {name} package (Debian's {})", debs.join(", "));
    p
}

/// Replaces (or adds) the file at `path`.
fn put(p: &mut PkgSpec, file: FileSpec) {
    p.files.retain(|f| f.path != file.path);
    p.files.push(file);
}

/// Takes the files at `paths` out of `p`.
fn split_off(p: &mut PkgSpec, paths: &[&str]) -> Vec<FileSpec> {
    let (out, keep) = std::mem::take(&mut p.files)
        .into_iter()
        .partition(|f| paths.contains(&f.path.as_str()));
    p.files = keep;
    out
}

/// A z-stream rebuild of a real package: the fixture has one Debian build
/// of each program, so the rebuild changes `path` the way a fix would,
/// with a trailer after the ELF data (which the loader never reads).
fn rebuilt(mut p: PkgSpec, path: &str, release: &str) -> PkgSpec {
    for f in &mut p.files {
        if let (true, FileKind::File(content)) = (f.path == path, &mut f.kind) {
            content.extend_from_slice(format!("\0strata fixture rebuild {release}\0").as_bytes());
            return p;
        }
    }
    panic!("{} has no {path}", p.name)
}

fn epel_packages() -> Vec<PkgSpec> {
    let mut pkgs = vec![
        // Shadows RHEL's bash with a higher version: must never win.
        pkg("bash", "5.2.15", "1.el8")
            .requires(&["coreutils"])
            .provides(&["/bin/sh", "/bin/bash"])
            .files([FileSpec::file(
                "/usr/bin/bash",
                "#!/usr/bin/sh\necho 'epel bash'\n",
                0o755,
            )]),
        ordinary("htop", "3.2.1", "1.el8", 300_000, &["glibc"]),
        ordinary("ripgrep", "13.0.0", "1.el8", 4_000_000, &["glibc"]),
    ];
    for p in &mut pkgs {
        p.build_time = OCP_TIME;
    }
    pkgs
}

/// `n` synthetic packages for benchmarks: most small, a few tens of MB.
fn scale_packages(n: usize) -> Vec<PkgSpec> {
    (0..n)
        .map(|i| {
            let size = if i % 100 == 99 {
                20_000_000 + (i % 7) * 2_000_000
            } else if i % 20 == 19 {
                2_000_000 + (i % 5) * 1_000_000
            } else {
                10_000 + (i * 7919) % 290_000
            };
            ordinary(
                &format!("strata-scale-{i:04}"),
                "1.0",
                "1.el8",
                size,
                &["glibc"],
            )
        })
        .collect()
}

/// The repositories of the OpenShift node packages. RHEL 8: one rhocp
/// repo per release with all of them. RHEL 9: Open vSwitch comes from Fast
/// Datapath. OKD on CentOS Stream 9: cri-o and its tools from the Cloud
/// SIG's OKD repo, Open vSwitch from the NFV SIG, and the kubelet from
/// Red Hat's rhocp repo (OKD builds take `openshift-*` from there).
fn node_repos(ing: &Ingredients) -> Vec<RepoSpec> {
    let fl = ing.flavour;
    let mut out = Vec::new();
    let repo = |id: String, name: String, signer: Signer, packages: Vec<PkgSpec>| RepoSpec {
        dir: id.clone(),
        id,
        name,
        signer,
        packages,
    };
    for release in fl.releases() {
        let mut packages = rhocp_packages(ing, release);
        let rhocp = format!("rhocp-{release}-for-rhel-{}", fl.major());
        let rhocp_name = format!(
            "Red Hat OpenShift Container Platform {release} for RHEL {} (fixture)",
            fl.major()
        );
        if fl.is_centos() {
            let kubelet = packages
                .iter()
                .position(|p| p.name == "openshift-kubelet")
                .map(|i| packages.remove(i))
                .into_iter()
                .collect();
            out.push(repo(rhocp, rhocp_name, Signer::RedHat, kubelet));
            out.push(repo(
                format!("c9s-sig-cloud-okd-{release}"),
                format!("CentOS Stream 9 - SIG Cloud OKD {release} (fixture)"),
                Signer::CloudSig,
                packages,
            ));
        } else {
            out.push(repo(rhocp, rhocp_name, Signer::Release, packages));
        }
    }
    if fl.major() >= 9 {
        let ovs = |release: &str| vec![openvswitch("openvswitch3.5", "3.5.0", release)];
        out.push(if fl.is_centos() {
            repo(
                "c9s-sig-nfv".into(),
                "CentOS Stream 9 - SIG NFV (fixture)".into(),
                Signer::NfvSig,
                ovs("19.el9s"),
            )
        } else {
            repo(
                "fast-datapath-for-rhel-9".into(),
                "Fast Datapath for RHEL 9 (fixture)".into(),
                Signer::Release,
                ovs("19.el9fdp"),
            )
        });
    }
    out
}

/// Every repository of the fixture.
pub fn repos(ing: &Ingredients) -> Vec<RepoSpec> {
    let fl = ing.flavour;
    let mut out = Vec::new();
    for (i, snap) in SNAPSHOTS.iter().enumerate() {
        let (baseos, appstream) = os_packages(ing, i == 1);
        for (kind, packages) in [("baseos", baseos), ("appstream", appstream)] {
            let id = format!("{}-{kind}", fl.name());
            out.push(RepoSpec {
                name: fl.os_repo_name(kind, snap),
                dir: format!("snapshots/{snap}/{id}"),
                id,
                signer: Signer::Release,
                packages,
            });
        }
    }
    out.extend(node_repos(ing));
    out.push(RepoSpec {
        id: fl.epel_id(),
        name: format!(
            "Extra Packages for Enterprise Linux {} (fixture)",
            fl.major()
        ),
        dir: fl.epel_id(),
        signer: Signer::Epel,
        packages: epel_packages(),
    });
    if ing.scale > 0 || ing.rhcos.is_some() {
        let mut packages = scale_packages(ing.scale);
        let mut name = format!("Synthetic packages for benchmarks ({})", ing.scale);
        if let Some(r) = ing.rhcos {
            packages.extend(rhcos::rhcos_packages(r));
            name = format!(
                "Synthetic packages for benchmarks ({}, RHCOS-sized at {}/1000)",
                ing.scale, r.permille
            );
        }
        out.push(RepoSpec {
            id: format!("{}-scale", fl.name()),
            name,
            dir: "scale".into(),
            signer: Signer::Release,
            packages,
        });
    }
    adapt(fl, &mut out);
    out
}

/// Gives the packages the flavour's versions (`Flavour::evr`): the OS
/// repositories' from RHEL 9's table, the others (node, EPEL, synthetic)
/// only the flavour's dist tag; then points the dependencies on an exact
/// version (`NetworkManager = …`) at the new one. The kernel's releases
/// are the flavour's already.
fn adapt(fl: Flavour, repos: &mut [RepoSpec]) {
    let mut renamed: BTreeMap<String, (String, String)> = BTreeMap::new();
    for r in repos.iter_mut() {
        let os = r.dir.starts_with("snapshots/");
        for p in r
            .packages
            .iter_mut()
            .filter(|p| !p.name.starts_with("kernel"))
        {
            let old = format!("{}-{}", p.version, p.release);
            if os {
                (p.version, p.release) = fl.evr(
                    &p.name,
                    &p.version,
                    &p.release,
                    p.build_time == ZSTREAM_TIME,
                );
            } else {
                p.release = fl.retag(&p.release);
            }
            let new = format!("{}-{}", p.version, p.release);
            if new != old {
                renamed.insert(p.name.clone(), (old, new));
            }
        }
    }
    for p in repos.iter_mut().flat_map(|r| r.packages.iter_mut()) {
        for d in p.requires.iter_mut() {
            let mut words = d.0.split(' ');
            if let (Some(name), Some("="), Some(evr), None) =
                (words.next(), words.next(), words.next(), words.next())
            {
                if let Some((_, new)) = renamed.get(name).filter(|(old, _)| old == evr) {
                    d.0 = format!("{name} = {new}");
                }
            }
        }
    }
}
