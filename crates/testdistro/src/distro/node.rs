//! The OpenShift node packages (the rhocp repos: cri-o, the kubelet, Open
//! vSwitch, NetworkManager-ovs) and Ignition with its dracut module.

use super::*;

/// Open vSwitch, with its %pre creating its user as the real one does.
pub(super) fn openvswitch(name: &str, version: &str, release: &str) -> PkgSpec {
    let mut p = ordinary(name, version, release, 5_000_000, &["glibc", "bash"]);
    if name != "openvswitch" {
        p.provides.push(Dep("openvswitch".into()));
    }
    p.requires_pre.push(Dep("shadow-utils".into()));
    p.requires_pre.push(Dep("glibc".into()));
    // Its %post runs mkdir: without this, a large transaction may order it
    // before coreutils ("mkdir: command not found", seen at RHCOS scale).
    p.requires_pre.push(Dep("coreutils".into()));
    p.pre = Some(
        "getent group openvswitch >/dev/null || groupadd -r openvswitch\n\
         getent passwd openvswitch >/dev/null || useradd -r -g openvswitch -d / -s /sbin/nologin openvswitch\n"
            .into(),
    );
    p.post = Some("mkdir -p /var/lib/openvswitch /etc/openvswitch\necho 'fixture' > /etc/openvswitch/system-id.conf\n".into());
    p.build_time = OCP_TIME;
    p
}

/// NetworkManager's Open vSwitch plugin: in RHEL 8's rhocp repos, in
/// RHEL 9's AppStream.
pub(super) fn network_manager_ovs() -> PkgSpec {
    ordinary(
        "NetworkManager-ovs",
        "1.36.0",
        "4.el8_6",
        150_000,
        &["NetworkManager = 1.36.0-4.el8_6", "openvswitch"],
    )
}

/// The OpenShift (or OKD) node packages of one release.
pub(super) fn rhocp_packages(ing: &Ingredients, release: &str) -> Vec<PkgSpec> {
    let fl = ing.flavour;
    let (crio, tools, ovs, conmon_rs) = match release {
        "4.12" => ("1.25.4", "1.25.0", "2.17.0", "0.4.0"),
        "4.13" => ("1.26.3", "1.26.0", "3.1.0", "0.5.1"),
        "4.19" => ("1.32.3", "1.32.0", "3.5.0", "0.6.6"),
        _ => ("1.33.2", "1.33.0", "3.5.0", "0.7.1"),
    };
    let tag = format!("rhaos{release}.el{}", fl.major());
    let ocp = format!("{release}.0");
    // RHEL's cri-o: the daemon is /usr/bin/crio, its configuration in
    // /etc/crio.
    let mut cri_o = ordinary(
        "cri-o",
        crio,
        &format!("4.{tag}"),
        9_000_000,
        &["conmon", "containers-common", "runc", "iptables"],
    );
    for f in &mut cri_o.files {
        match f.path.as_str() {
            "/usr/bin/cri-o" => f.path = "/usr/bin/crio".into(),
            "/etc/cri-o.conf" => f.path = "/etc/crio/crio.conf".into(),
            _ => {}
        }
    }
    cri_o.files.push(FileSpec::dir("/etc/crio", 0o755));
    let mut pkgs = vec![
        cri_o,
        ordinary(
            "cri-tools",
            tools,
            &format!("1.{tag}"),
            4_000_000,
            &["glibc"],
        ),
        ordinary(
            "conmon-rs",
            conmon_rs,
            &format!("1.{tag}"),
            1_500_000,
            &["glibc"],
        ),
        {
            let seed = format!("kubelet-{release}");
            pkg("openshift-kubelet", &ocp, &format!("202610200000.p0.{tag}"))
                .requires(&["cri-o", "cri-tools", "util-linux"])
                .files([
                    FileSpec::file("/usr/bin/kubelet", synth::binary(&seed, 6_000_000), 0o755),
                    FileSpec::file(
                        "/usr/lib/systemd/system/kubelet.service",
                        unit("Kubernetes Kubelet", "/usr/bin/kubelet"),
                        0o644,
                    ),
                    FileSpec::dir("/etc/kubernetes", 0o755),
                    FileSpec::dir("/etc/kubernetes/manifests", 0o755),
                ])
        },
    ];
    if fl.major() == 8 {
        // RHEL 8's rhocp repos carry Open vSwitch and NetworkManager's
        // plugin for it; on RHEL 9 they are Fast Datapath's and AppStream's.
        pkgs.push(openvswitch("openvswitch", ovs, &format!("1.{tag}")));
        pkgs.push(network_manager_ovs());
    }
    if release == "4.13" {
        // On RHEL 8, Ignition comes with the node layer (4.12's repo has it
        // too in reality; the fixture's 4.12 layer leaves the initramfs
        // alone, to test a release that touches nothing dracut reads).
        pkgs.extend(ignition(ing, &tag));
        // crun needs a newer libseccomp than the base has: the repo carries
        // it, so deriving crun needs allow-base-upgrade.
        pkgs.push(ordinary(
            "crun",
            "1.8.4",
            &format!("1.{tag}"),
            500_000,
            &["libseccomp >= 2.5.3"],
        ));
        let release = format!("1.{tag}");
        pkgs.push(rebuilt(
            real(ing, "libseccomp", "2.5.3", &release, &["libseccomp2"]),
            "/usr/lib64/libseccomp.so.2.5.4",
            &release,
        ));
    }
    for p in &mut pkgs {
        p.build_time = OCP_TIME;
    }
    pkgs
}

/// Where RHEL's ignition package keeps Ignition's dracut module; the
/// `ignition` binary lives inside it, and the module installs it into the
/// initramfs as `/usr/bin/ignition` (the root filesystem has no Ignition).
pub(super) const IGNITION_MODULE: &str = "/usr/lib/dracut/modules.d/30ignition";

/// The module's dependencies as Ignition 2.14 ships them, and as the
/// fixture has them: `url-lib` and `network` (dracut-network, curl, a
/// network stack in the initramfs) only serve configs fetched over the
/// network, and the fixture has no real curl or network stack.
pub(super) const IGNITION_DEPENDS: (&str, &str) =
    ("echo qemu systemd url-lib network", "echo qemu systemd");

/// Ignition as RHEL 8's rhocp repos ship it: Debian's ignition 2.14 with
/// the layout of RHEL's package, the dracut module `30ignition` (units,
/// generator, `module-setup.sh`, and the `ignition` binary itself) in
/// `ignition`, and `/usr/bin/ignition-validate` in `ignition-validate`.
/// The module has no `check()`, so a `--no-hostonly` dracut includes it
/// once it is in the tree: the node layer that adds it must regenerate the
/// initramfs. Its generator only queues Ignition's stages with
/// `ignition.firstboot` on the kernel command line.
pub(super) fn ignition(ing: &Ingredients, tag: &str) -> Vec<PkgSpec> {
    let release = format!("1.{tag}");
    let mut all = real(ing, "ignition", "2.14.0", &release, &["ignition"]);
    let validate_files = split_off(&mut all, &["/usr/bin/ignition-validate"]);
    let mut main = all;
    main.files.retain(|f| f.path.starts_with(IGNITION_MODULE));
    let setup = format!("{IGNITION_MODULE}/module-setup.sh");
    for f in &mut main.files {
        if let (true, FileKind::File(content)) = (f.path == setup, &mut f.kind) {
            let text = String::from_utf8(content.clone()).expect("module-setup.sh is text");
            let (from, to) = IGNITION_DEPENDS;
            assert!(
                text.contains(from),
                "Debian's {setup} changed: {from:?} is gone"
            );
            *content = text.replace(from, to).into_bytes();
        }
    }
    for d in ["/usr/lib/dracut", "/usr/lib/dracut/modules.d"] {
        main.files.retain(|f| f.path != d);
    }
    let (provides, requires) = debian::elf_deps(&main.files);
    main.provides = provides.into_iter().map(Dep).collect();
    main.requires = requires.into_iter().map(Dep).collect();
    main = main.requires(&["dracut", "systemd", "util-linux", "bash"]);
    main.summary = "First boot installer and configuration tool (Debian's ignition)".into();
    let (provides, requires) = debian::elf_deps(&validate_files);
    let mut validate = pkg("ignition-validate", "2.14.0", &release).files(validate_files);
    validate.provides.extend(provides.into_iter().map(Dep));
    validate.requires.extend(requires.into_iter().map(Dep));
    validate.summary = "Validation tool for Ignition configs (Debian's ignition)".into();
    vec![main, validate]
}
