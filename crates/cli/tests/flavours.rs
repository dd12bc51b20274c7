//! The lines real clusters run, on the fixture's flavours: the RHEL 9.6
//! base with OpenShift 4.19, and CentOS Stream 9 (SCOS) with OKD 4.19,
//! composed, derived, made into disks and booted with the `strata` binary;
//! and the policy refusing the other distribution's packages by name.
//!
//! Needs root (compose installs into a tree with device nodes).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use strata_testdistro::boot::{BootSpec, Firmware};
use strata_testdistro::spec::{FileSpec, PkgSpec};
use strata_testdistro::{Fixture, Flavour, Signing};

fn require_root() {
    strata_testdistro::require_root("these tests compose and derive images");
}

fn demo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../manifests/demo")
        .join(name)
}

/// Runs `strata ARGS --workdir W --json`, and for the commands that read
/// manifests `--var fixture=<f>`.
fn strata(w: &Path, f: &Fixture, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.args(args).arg("--workdir").arg(w).arg("--json");
    if matches!(args.first(), Some(&"compose" | &"derive")) {
        cmd.arg("--var")
            .arg(format!("fixture={}", f.root.display()));
    }
    let out = cmd.output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn ok(out: Output) -> Value {
    assert!(out.status.success(), "{:?}", out.status);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a string"))
}

/// Composes `base` and derives `release` on it; the derived image's tag and
/// version.
fn base_and_release(w: &Path, f: &Fixture, base: &str, release: &str) -> (Value, Value) {
    let composed = ok(strata(w, f, &["compose", demo(base).to_str().unwrap()]));
    assert_eq!(composed["changed"], true, "{composed}");
    let tag = format!("{}-{}", s(&composed["stream"]), s(&composed["version"]));
    let derived = ok(strata(
        w,
        f,
        &["derive", "--base", &tag, demo(release).to_str().unwrap()],
    ));
    (composed, derived["releases"][0].clone())
}

fn os_release_of(w: &Path, commit: &str) -> String {
    let out = Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["cat", commit, "/usr/lib/os-release"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn boot(w: &Path, f: &Fixture, image: &str, firmware: Firmware) -> String {
    let disks = ok(strata(
        w,
        f,
        &["disk", "--image", image, "--platform", "qemu"],
    ));
    let disk = s(&disks["artifacts"][0]["path"]).to_string();
    let mut spec = BootSpec::new(firmware, disk);
    spec.disk_format = "qcow2".into();
    spec.timeout = Duration::from_secs(300);
    let booted = strata_testdistro::boot::boot(&spec).unwrap();
    eprintln!("booted in {:?}: {}", booted.elapsed, booted.marker);
    booted.marker
}

#[test]
fn rhel_9_6_line_composes_derives_and_boots() {
    require_root();
    let f = Fixture::for_tests_flavour(Flavour::Rhel96).unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    let (base, release) = base_and_release(&w, &f, "rhel-9.6.yaml", "ocp-4.19.yaml");

    // The base: RHEL 9.6's packages, named as RHCOS's base is.
    let base_version = s(&base["version"]);
    assert!(base_version.starts_with("9.6.20261015-"), "{base}");
    let lock: Value =
        serde_json::from_slice(&std::fs::read(s(&base["lockfile"])).unwrap()).unwrap();
    for (name, evra) in [
        ("kernel-modules-core", "6.1.0-570.12.1.el9_6.x86_64"),
        ("redhat-release", "9.6-0.1.el9.x86_64"),
        ("systemd", "252-51.el9.x86_64"),
        ("ignition", "2.20.0-1.el9.x86_64"),
    ] {
        assert_eq!(lock["packages"][name]["evra"], evra, "{name}");
    }

    // RHEL 9's rpm database: sqlite, where rpm-ostree keeps it, with the
    // /usr/lib/sysimage/rpm link RHEL 9's tools look for.
    let listing = Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args([
            "ls",
            s(&base["ostree_commit"]),
            "/usr/share/rpm",
            "/usr/lib/sysimage/rpm",
        ])
        .output()
        .unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    assert!(listing.contains("/usr/share/rpm/rpmdb.sqlite"), "{listing}");
    assert!(
        listing.contains("/usr/lib/sysimage/rpm -> ../../share/rpm"),
        "{listing}"
    );
    // The tree's own rpm (RHEL 9's reads and writes sqlite) finds it.
    let co = d.path().join("checkout");
    let checked_out = Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["checkout", "-U", "--force-copy", s(&base["ostree_commit"])])
        .arg(&co)
        .status()
        .unwrap();
    assert!(checked_out.success());
    let own = strata_testdistro::tree_rpm(&co)
        .args(["-q", "systemd", "redhat-release"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&own.stdout),
        "systemd-252-51.el9.x86_64\nredhat-release-9.6-0.1.el9.x86_64\n",
        "{own:?}"
    );

    // The release: the RHCOS scheme for 4.x on RHEL 9, and the label the
    // cluster-version operator reads.
    let version = s(&release["version"]);
    assert_eq!(version, "419.96.202610150000-0", "{release}");
    let os_release = os_release_of(&w, s(&release["ostree_commit"]));
    for line in [
        "ID=\"rhcos\"",
        "RHEL_VERSION=\"9.6\"",
        "OPENSHIFT_VERSION=\"4.19\"",
    ] {
        assert!(os_release.contains(line), "{line} in {os_release}");
    }
    let inspect = ok(strata(&w, &f, &["inspect", &format!("ocp-4.19-{version}")]));
    assert_eq!(
        s(&inspect["labels"]["io.openshift.build.versions"]),
        format!("machine-os={version}")
    );
    assert_eq!(os_from_labels(&inspect["labels"]), ("rhcos", "96".into()));

    // BIOS: GRUB from grub2-pc-modules; Ignition from the base's initramfs.
    let marker = boot(&w, &f, &format!("ocp-4.19-{version}"), Firmware::Bios);
    assert_eq!(
        marker,
        format!(
            "STRATA-BOOT-OK version={version} openshift=4.19 init=systemd kubelet=yes crio=yes firstboot=yes var=stateroot"
        )
    );
}

#[test]
fn okd_line_on_centos_stream_composes_derives_and_boots() {
    require_root();
    let f = Fixture::for_tests_flavour(Flavour::C9s).unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    let (base, release) = base_and_release(&w, &f, "c9s.yaml", "okd-4.19.yaml");
    assert!(
        s(&base["version"]).starts_with("9.0.20261015-"),
        "SCOS's base version: {base}"
    );
    let version = s(&release["version"]);
    assert_eq!(version, "419.9.202610150000-0", "{release}");
    let os_release = os_release_of(&w, s(&release["ostree_commit"]));
    for line in ["NAME=\"CentOS Stream CoreOS\"", "ID=\"scos\""] {
        assert!(os_release.contains(line), "{line} in {os_release}");
    }
    // The node packages came from three repos under three keys.
    let packages: Vec<&str> = release["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    for want in [
        "openshift-kubelet-4.19.0-202610200000.p0.rhaos4.19.el9.x86_64",
        "cri-o-1.32.3-4.rhaos4.19.el9.x86_64",
        "openvswitch3.5-3.5.0-19.el9s.x86_64",
    ] {
        assert!(packages.contains(&want), "{want} not in {packages:?}");
    }
    // UEFI: shim and GRUB from CentOS's vendor directory, EFI/centos.
    // OKD's releases are streams of their own.
    assert_eq!(s(&release["stream"]), "okd-4.19");
    let inspect = ok(strata(&w, &f, &["inspect", &format!("okd-4.19-{version}")]));
    assert_eq!(os_from_labels(&inspect["labels"]), ("scos", "9".into()));
    let marker = boot(&w, &f, &format!("okd-4.19-{version}"), Firmware::Uefi);
    assert_eq!(
        marker,
        format!(
            "STRATA-BOOT-OK version={version} openshift=4.19 init=systemd kubelet=yes crio=yes firstboot=yes var=stateroot"
        )
    );
}

/// The OS a node image's labels say it is, by the rules of the Machine
/// Config Operator's osrelease package (`newOperatingSystemFromImageLabels`):
/// a coreos-assembler label marks a CoreOS image, `version` is required,
/// `io.openshift.build.version-display-names` names SCOS (the version's
/// middle field is the OS version), otherwise a middle field starting with
/// 8 or 9 is RHCOS.
fn os_from_labels(labels: &Value) -> (&'static str, String) {
    let coreos = [
        "coreos-assembler.image-input-checksum",
        "coreos-assembler.image-config-checksum",
    ]
    .iter()
    .any(|l| labels.get(l).is_some());
    assert!(coreos, "no CoreOS label: {labels}");
    let version = s(&labels["version"]);
    let middle = version.split('.').nth(1).unwrap_or_default().to_string();
    match labels
        .get("io.openshift.build.version-display-names")
        .and_then(Value::as_str)
        .map(|n| n.replace("machine-os=", ""))
        .as_deref()
    {
        Some("CentOS Stream CoreOS") => ("scos", middle),
        _ if middle.starts_with('8') || middle.starts_with('9') => ("rhcos", middle),
        other => panic!("the MCO infers no OS from {labels} ({other:?})"),
    }
}

/// A wrapper around a demo base manifest adding one repo, allowed as an
/// input repo; its key is not among the manifest's `inputs.keys`.
fn with_repo(dir: &Path, base: &str, id: &str, baseurl: &Path, gpgkey: &Path) -> PathBuf {
    let path = dir.join(format!("with-{id}.yaml"));
    std::fs::write(
        &path,
        format!(
            "edition: 1\ninclude: {base}\nrepos:\n  - id: {id}\n    baseurl: file://{url}\n    gpgkey: file://{key}\ninputs:\n  repos: [{id}]\n",
            base = demo(base).display(),
            url = baseurl.display(),
            key = gpgkey.display(),
        ),
    )
    .unwrap();
    path
}

/// The policy error of a failed `--json` run: one message naming each
/// refused package, its repo and the rule.
fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "the compose must fail");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = s(&v["error"]).to_string();
    assert!(e.contains("break the input policy"), "{e}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("error: {e}")), "{stderr}");
    e
}

#[test]
fn each_distribution_refuses_the_others_packages_by_name() {
    require_root();
    let rhel = Fixture::for_tests_flavour(Flavour::Rhel96).unwrap();
    let c9s = Fixture::for_tests_flavour(Flavour::C9s).unwrap();
    let d = tempfile::tempdir().unwrap();

    // A CentOS Stream base that lets RHEL's BaseOS in as a repo: its
    // packages are newer (el9_6 sorts after el9), so they win the
    // depsolve, and each is refused for its Red Hat signature.
    let m = with_repo(
        d.path(),
        "c9s.yaml",
        "rhel-9.6-baseos",
        &rhel.path("snapshots/20261101/rhel-9.6-baseos"),
        &rhel.path(&rhel.info.release_key.path),
    );
    let out = strata(
        &d.path().join("w1"),
        &c9s,
        &["compose", m.to_str().unwrap()],
    );
    let e = refused(&out);
    let fingerprint = &rhel.info.release_key.fingerprint;
    assert!(
        e.contains(&format!(
            "glibc-2.34-168.el9_6.x86_64 from repo rhel-9.6-baseos: it is signed by key {fingerprint}, which inputs.keys does not allow"
        )),
        "{e}"
    );
    // Only RHEL's packages: CentOS's own pass.
    assert_eq!(
        e.matches(" from repo ").count(),
        e.matches(" from repo rhel-9.6-baseos: ").count(),
        "{e}"
    );

    // A RHEL base that lets a CentOS-signed repo in: its newer bash is
    // refused for CentOS's signature.
    let mut bash = PkgSpec::new("bash", "5.1.8", "10.el9")
        .provides(&["/bin/sh", "/bin/bash"])
        .files([FileSpec::file(
            "/usr/bin/bash",
            "#!/usr/bin/sh\necho 'centos bash'\n",
            0o755,
        )]);
    bash.build_time = 1_792_022_400;
    let extra = d.path().join("centos-extra");
    Fixture::build_repo(&extra, &[bash], Signing::Centos).unwrap();
    let m = with_repo(
        d.path(),
        "rhel-9.6.yaml",
        "centos-extra",
        &extra,
        &c9s.path(&c9s.info.release_key.path),
    );
    let out = strata(
        &d.path().join("w2"),
        &rhel,
        &["compose", m.to_str().unwrap()],
    );
    let e = refused(&out);
    assert!(
        e.starts_with(&format!(
            "1 package(s) break the input policy: bash-5.1.8-10.el9.x86_64 from repo centos-extra: it is signed by key {}, which inputs.keys does not allow",
            c9s.info.release_key.fingerprint
        )),
        "{e}"
    );
}
