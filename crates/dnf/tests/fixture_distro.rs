//! The wrapper on the project's fixture distribution (`strata-testdistro`):
//! a CoreOS-style base package set from a RHEL snapshot installed into an
//! empty root, then an OpenShift release's node packages layered on top of
//! it using the root's rpmdb as the installed set — the compose and derive
//! paths, cross-checked with `rpm -qa`.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use common::{require_root, rpm_qa};
use strata_dnf::{DepsolveRequest, Dnf, DnfOptions, RepoConfig};
use strata_testdistro::Fixture;

const BASE: &[&str] = &[
    "kernel",
    "kernel-core",
    "kernel-modules",
    "systemd",
    "dracut",
    "bash",
    "coreutils",
    "setup",
    "filesystem",
    "basesystem",
    "redhat-release",
    "glibc",
    "shadow-utils",
    "grub2-efi-x64",
    "grub2-pc",
    "openssh-server",
    "chrony",
];

const NODE: &[&str] = &[
    "cri-o",
    "cri-tools",
    "openshift-kubelet",
    "openvswitch",
    "conmon-rs",
    "NetworkManager-ovs",
];

#[test]
fn base_then_node_packages_on_the_fixture_distribution() {
    require_root();
    let fx = Fixture::for_tests().expect("generating the fixture distribution");
    let key = fx.path(&fx.info.release_key.path);
    let repo = |id: &str, snapshot: Option<&str>| {
        let info = fx
            .repo(id, snapshot)
            .unwrap_or_else(|| panic!("fixture repo {id}"));
        RepoConfig::new(id, format!("file://{}", fx.path(&info.dir).display())).with_gpgkey(&key)
    };
    let rhel = vec![
        repo("rhel-8.6-baseos", Some("20261101")),
        repo("rhel-8.6-appstream", Some("20261101")),
    ];

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("strata-dnf-fixture-distro");
    let _ = fs::remove_dir_all(&dir);
    let root = dir.join("root");
    let cache = dir.join("cache");

    let mut dnf = Dnf::new(DnfOptions::new(&root, &cache, "8"), rhel.clone()).unwrap();
    let start = Instant::now();
    let resolved = dnf
        .depsolve(&DepsolveRequest::install(BASE.iter().copied()))
        .unwrap();
    let depsolve = start.elapsed();
    let base: BTreeSet<String> = resolved
        .packages()
        .iter()
        .map(|p| p.nevra.clone())
        .collect();
    let bytes: u64 = resolved.packages().iter().map(|p| p.download_size).sum();
    for name in BASE {
        assert!(
            resolved.packages().iter().any(|p| &p.name == name),
            "{name} not in the transaction"
        );
    }
    assert!(resolved
        .packages()
        .iter()
        .all(|p| p.repo_id.starts_with("rhel-8.6-")));
    let report = resolved.install().unwrap();
    eprintln!(
        "base: {} packages, {} MiB; depsolve {depsolve:?}, download+verify {:?}, rpm transaction {:?}",
        base.len(),
        bytes >> 20,
        report.timings.download,
        report.timings.install
    );
    assert_eq!(rpm_qa(&root).into_iter().collect::<BTreeSet<_>>(), base);
    let passwd = fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(
        passwd.contains("sshd:"),
        "openssh-server's %pre creates its user:\n{passwd}"
    );
    drop(dnf);

    // Derive: the node packages of one OpenShift release on top of the base.
    let mut repos = rhel;
    repos.push(repo("rhocp-4.13-for-rhel-8", None));
    let mut dnf = Dnf::new(DnfOptions::new(&root, &cache, "8"), repos).unwrap();
    let report = dnf
        .install(&DepsolveRequest::install(NODE.iter().copied()))
        .unwrap();
    eprintln!(
        "node layer: {} packages; depsolve {:?}, download+verify {:?}, rpm transaction {:?}",
        report.packages.len(),
        report.timings.depsolve,
        report.timings.download,
        report.timings.install
    );
    let added: BTreeSet<String> = report.packages.iter().map(|p| p.nevra.clone()).collect();
    for name in NODE {
        assert!(
            report.packages.iter().any(|p| &p.name == name),
            "{name} not layered"
        );
    }
    let all: BTreeSet<String> = rpm_qa(&root).into_iter().collect();
    let replaced: BTreeSet<String> = report.removed.iter().cloned().collect();
    let expected: BTreeSet<String> = base.difference(&replaced).cloned().chain(added).collect();
    assert_eq!(all, expected);
}
