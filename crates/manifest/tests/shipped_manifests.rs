//! The manifests shipped in manifests/ load, and flatten to what the demo
//! and the docs promise.

use std::path::{Path, PathBuf};

use strata_manifest::{
    BaseManifest, Fingerprint, InputKind, KeyRef, ManifestError, OcpRelease, ReleaseManifest, Vars,
};

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests")
}

fn fixture_vars() -> Vars {
    Vars::new().with("fixture", "/tmp/x").unwrap()
}

fn entitled_vars() -> Vars {
    Vars::new()
        .with("entitlement", "/etc/pki/entitlement/1234")
        .unwrap()
}

fn ids(repos: &[strata_manifest::Repo]) -> Vec<&str> {
    repos.iter().map(|r| r.id.as_str()).collect()
}

#[test]
fn demo_base_flattens() {
    let loaded =
        BaseManifest::load(&manifests().join("demo/rhel-8.6.yaml"), &fixture_vars()).unwrap();
    let m = &loaded.manifest;
    assert_eq!(m.name, "rhel-8.6");
    assert_eq!(m.osname, "rhcos");
    assert_eq!(m.releasever, "8");
    assert_eq!(m.version_prefix.as_str(), "8.6.<date:%Y%m%d>");
    assert_eq!(
        ids(&m.repos),
        ["rhel-8.6-baseos", "rhel-8.6-appstream", "epel-8"]
    );
    assert_eq!(
        m.repos[0].baseurl,
        ["file:///tmp/x/snapshots/20261101/rhel-8.6-baseos"]
    );
    assert_eq!(
        m.repos[1].baseurl,
        ["file:///tmp/x/snapshots/20261101/rhel-8.6-appstream"]
    );
    assert_eq!(m.repos[2].baseurl, ["file:///tmp/x/epel-8"]);
    assert_eq!(
        m.repos[0].gpgkey,
        ["file:///tmp/x/keys/RPM-GPG-KEY-strata-fixture-release"]
    );
    assert_eq!(
        m.repos[2].gpgkey,
        ["file:///tmp/x/keys/RPM-GPG-KEY-strata-fixture-epel"]
    );
    assert!(m.repos.iter().all(|r| r.gpgcheck && r.enabled));
    // epel-8 is visible to dnf but may not contribute packages.
    assert_eq!(m.inputs.repos, ["rhel-8.6-baseos", "rhel-8.6-appstream"]);
    assert!(!m.inputs.allows_repo("epel-8"));
    assert_eq!(
        m.inputs.keys,
        [KeyRef::File(PathBuf::from(
            "/tmp/x/keys/RPM-GPG-KEY-strata-fixture-release"
        ))]
    );
    assert_eq!(
        m.packages[..19],
        [
            "kernel",
            "kernel-core",
            "kernel-modules",
            "systemd",
            "dracut",
            "strata-boot-check",
            "bash",
            "coreutils",
            "setup",
            "filesystem",
            "basesystem",
            "redhat-release",
            "glibc",
            "shadow-utils",
            "nss-altfiles",
            "grub2-efi-x64",
            "grub2-pc",
            "openssh-server",
            "chrony",
        ]
    );
    for more in [
        "NetworkManager",
        "podman",
        "selinux-policy-targeted",
        "rpm-ostree",
    ] {
        assert!(m.packages.iter().any(|p| p == more), "{more}");
    }
    assert_eq!(m.initramfs.generator, "dracut");
    assert_eq!(m.initramfs.args, ["--no-hostonly", "--reproducible"]);
    assert_eq!(m.units, ["sshd.service", "chronyd.service"]);
    assert_eq!(m.postprocess.len(), 1);
    assert!(m.postprocess[0].contains("BASE_SNAPSHOT=20261101\\n"));
    assert!(m.documentation);
    assert!(!m.recommends);
    let kinds: Vec<(String, InputKind)> = loaded
        .files
        .iter()
        .map(|f| {
            (
                f.path.file_name().unwrap().to_string_lossy().into_owned(),
                f.kind,
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("rhel-8.6.yaml".to_string(), InputKind::Manifest),
            ("rhel-8.6-repos.yaml".to_string(), InputKind::Include),
        ]
    );
    assert!(loaded.files.iter().all(|f| f.path.is_absolute()));
}

#[test]
fn demo_base_takes_a_later_snapshot() {
    let vars = fixture_vars().with("snapshot", "20261115").unwrap();
    let m = BaseManifest::load(&manifests().join("demo/rhel-8.6.yaml"), &vars)
        .unwrap()
        .manifest;
    assert_eq!(
        m.repos[0].baseurl,
        ["file:///tmp/x/snapshots/20261115/rhel-8.6-baseos"]
    );
}

#[test]
fn demo_base_needs_the_fixture_variable() {
    let err =
        BaseManifest::load(&manifests().join("demo/rhel-8.6.yaml"), &Vars::new()).unwrap_err();
    assert!(
        matches!(err, ManifestError::UnsetVariable { ref name, .. } if name == "fixture"),
        "{err}"
    );
    // Points into the included file, at the first use.
    let location = err.location().unwrap();
    assert!(location.file.ends_with("demo/rhel-8.6-repos.yaml"), "{err}");
    assert_eq!(location.position.unwrap().line, 17, "{err}");
}

#[test]
fn demo_releases_flatten() {
    for (release, minor) in [("4.12", 12), ("4.13", 13)] {
        let path = manifests().join(format!("demo/ocp-{release}.yaml"));
        let m = ReleaseManifest::load(&path, &fixture_vars())
            .unwrap()
            .manifest;
        let rhocp = format!("rhocp-{release}-for-rhel-8");
        assert_eq!(m.release, OcpRelease { major: 4, minor });
        assert_eq!(
            ids(&m.repos),
            ["rhel-8.6-baseos", "rhel-8.6-appstream", rhocp.as_str()]
        );
        assert_eq!(m.repos[2].baseurl, [format!("file:///tmp/x/{rhocp}")]);
        assert_eq!(
            m.inputs.repos,
            ["rhel-8.6-baseos", "rhel-8.6-appstream", rhocp.as_str()]
        );
        let mut packages = vec![
            "cri-o",
            "cri-tools",
            "openshift-kubelet",
            "openvswitch",
            "conmon-rs",
            "NetworkManager-ovs",
        ];
        // On RHEL 8 Ignition comes with the node layer; the fixture's 4.12
        // layer leaves it out, to touch nothing the initramfs is made of.
        if release == "4.13" {
            packages.push("ignition");
        }
        assert_eq!(m.packages, packages);
        assert!(!m.regenerate_initramfs);
        assert!(m.allow_base_upgrade.is_empty());
        assert_eq!(
            m.version_template.as_str(),
            strata_manifest::VersionTemplate::DEFAULT
        );
        // The node layer's steps (node-layer.yaml) come first, the
        // release's own after them.
        assert!(m.postprocess[0].contains("/etc/yum.repos.d"));
        assert!(m
            .postprocess
            .last()
            .unwrap()
            .contains(&format!("OPENSHIFT_RELEASE={release}")));
        assert_eq!(
            m.add_files[0].dest,
            "/usr/lib/tmpfiles.d/openshift-node.conf"
        );
    }
}

/// Red Hat's release key 2 and the auxiliary key of RHEL `major`.
fn red_hat_keys(major: u32) -> Vec<KeyRef> {
    [
        "567E347AD0044ADE55BA8A5F199E2F91FD431D51",
        if major == 8 {
            "6A6AA7C97C8890AEC6AEBFE2F76F66C3D4082792"
        } else {
            "7E4624258C406535D56D6F135054E4A45A6340B3"
        },
    ]
    .iter()
    .map(|f| KeyRef::Fingerprint(Fingerprint::parse(f).unwrap()))
    .collect()
}

#[test]
fn real_base_flattens() {
    let loaded = BaseManifest::load(
        &manifests().join("rhel-8.6/rhel-8.6.yaml"),
        &entitled_vars(),
    )
    .unwrap();
    let m = &loaded.manifest;
    assert_eq!(
        ids(&m.repos),
        [
            "rhel-8-for-x86_64-baseos-eus-rpms",
            "rhel-8-for-x86_64-appstream-eus-rpms"
        ]
    );
    let baseos = &m.repos[0];
    assert_eq!(
        baseos.baseurl,
        ["https://cdn.redhat.com/content/eus/rhel8/8.6/x86_64/baseos/os"]
    );
    assert_eq!(
        baseos.gpgkey,
        ["file:///etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"]
    );
    assert_eq!(
        baseos.sslclientcert.as_deref(),
        Some("/etc/pki/entitlement/1234.pem")
    );
    assert_eq!(
        baseos.sslclientkey.as_deref(),
        Some("/etc/pki/entitlement/1234-key.pem")
    );
    assert_eq!(
        baseos.sslcacert.as_deref(),
        Some("/etc/rhsm/ca/redhat-uep.pem")
    );
    assert_eq!(m.inputs.keys, red_hat_keys(8));
    assert!(m.packages.len() >= 80, "{}", m.packages.len());
    for name in [
        "kernel",
        "NetworkManager",
        "podman",
        "rpm-ostree",
        "ostree",
        "bootupd",
        "dracut-network",
        "sssd",
        "iscsi-initiator-utils",
    ] {
        assert!(m.packages.iter().any(|p| p == name), "{name}");
    }
    for ocp in [
        "cri-o",
        "openshift-hyperkube",
        "ignition",
        "coreos-installer",
    ] {
        assert!(!m.packages.iter().any(|p| p == ocp), "{ocp}");
    }
    assert!(!m.documentation);
    assert!(loaded
        .files
        .iter()
        .any(|f| f.kind == InputKind::RepoFile && f.path.ends_with("rhel-8.6/rhel-8.6.repo")));
}

#[test]
fn real_rhel_9_6_base_flattens() {
    let m = BaseManifest::load(
        &manifests().join("rhel-9.6/rhel-9.6.yaml"),
        &entitled_vars().with("keydir", "/srv/keys").unwrap(),
    )
    .unwrap()
    .manifest;
    assert_eq!(
        ids(&m.repos),
        [
            "rhel-9-for-x86_64-baseos-eus-rpms",
            "rhel-9-for-x86_64-appstream-eus-rpms"
        ]
    );
    assert_eq!(
        m.repos[0].baseurl,
        ["https://cdn.redhat.com/content/eus/rhel9/9.6/x86_64/baseos/os"]
    );
    // The key directory is the caller's.
    assert_eq!(
        m.repos[0].gpgkey,
        ["file:///srv/keys/RPM-GPG-KEY-redhat-release"]
    );
    assert_eq!(m.inputs.keys, red_hat_keys(9));
    assert_eq!(m.rpmdb.as_str(), "sqlite");
    for name in [
        "kernel-modules-core",
        "ignition",
        "coreos-installer",
        "redhat-release",
    ] {
        assert!(m.packages.iter().any(|p| p == name), "{name}");
    }
}

#[test]
fn real_releases_flatten() {
    for (release, major, ovs, kubelet) in [
        ("4.12", 8, "openvswitch2.17", "openshift-hyperkube"),
        ("4.19", 9, "openvswitch3.5", "openshift-kubelet"),
        ("4.20", 9, "openvswitch3.5", "openshift-kubelet"),
    ] {
        let path = manifests().join(format!("ocp-{release}.yaml"));
        let m = ReleaseManifest::load(&path, &entitled_vars())
            .unwrap()
            .manifest;
        let rhocp = format!("rhocp-{release}-for-rhel-{major}-x86_64-rpms");
        let fdp = format!("fast-datapath-for-rhel-{major}-x86_64-rpms");
        assert_eq!(m.release.to_string(), release);
        assert_eq!(
            ids(&m.repos),
            [
                format!("rhel-{major}-for-x86_64-baseos-eus-rpms").as_str(),
                &format!("rhel-{major}-for-x86_64-appstream-eus-rpms"),
                &rhocp,
                &fdp,
            ]
        );
        assert_eq!(
            m.repos[2].baseurl,
            [format!(
                "https://cdn.redhat.com/content/dist/layered/rhel{major}/x86_64/rhocp/{release}/os"
            )]
        );
        assert!(m.inputs.allows_repo(&rhocp));
        assert_eq!(m.inputs.keys, red_hat_keys(major));
        for name in [
            "cri-o",
            "cri-tools",
            kubelet,
            ovs,
            "conmon-rs",
            "NetworkManager-ovs",
        ] {
            assert!(m.packages.iter().any(|p| p == name), "{release}: {name}");
        }
        // The node layer's steps besides packages (node-layer.yaml).
        let steps = m.postprocess.join("\n");
        for step in [
            "/etc/yum.repos.d",
            "/etc/pki/entitlement-host",
            "semanage boolean --modify --on container_use_cephfs",
            "/usr/libexec/crio/conmon",
            "/etc/motd",
        ] {
            assert!(steps.contains(step), "{release}: {step}");
        }
        assert!(m.add_files[0].src.is_file(), "{:?}", m.add_files[0].src);
    }
}

/// OKD: CentOS's key for the base; the SIGs' and Red Hat's for the node
/// layer, from public mirrors (and OpenShift CI's for openshift-*).
#[test]
fn real_okd_manifests_flatten() {
    let vars = Vars::new()
        .with("ose_baseurl", "https://ci.example/ose-4.19")
        .unwrap();
    let base = BaseManifest::load(&manifests().join("okd/c9s.yaml"), &vars)
        .unwrap()
        .manifest;
    assert_eq!(base.name, "c9s");
    assert_eq!(
        base.repos[0].baseurl,
        ["https://mirror.stream.centos.org/9-stream/BaseOS/x86_64/os/"]
    );
    assert_eq!(
        base.inputs.keys,
        [KeyRef::Fingerprint(
            Fingerprint::parse("99DB70FAE1D7CE227FB6488205B555B38483C65D").unwrap()
        )]
    );
    assert!(base.packages.iter().any(|p| p == "centos-stream-release"));
    assert!(!base.packages.iter().any(|p| p == "redhat-release"));
    for release in ["4.19", "4.20"] {
        let m = ReleaseManifest::load(&manifests().join(format!("okd/okd-{release}.yaml")), &vars)
            .unwrap()
            .manifest;
        assert_eq!(m.release.to_string(), release);
        // CentOS Stream's own repos too: NetworkManager-ovs is AppStream's.
        for repo in ["c9s-sig-cloud-okd", "c9s-sig-nfv", "c9s-appstream"] {
            assert!(m.inputs.allows_repo(repo), "{release}: {repo}");
        }
        // CentOS's, the two SIGs' and Red Hat's.
        assert_eq!(m.inputs.keys.len(), 4, "{release}");
    }
    let err =
        ReleaseManifest::load(&manifests().join("okd/okd-4.19.yaml"), &Vars::new()).unwrap_err();
    assert!(
        err.to_string().contains("`ose_baseurl` has no value"),
        "{err}"
    );
}

#[test]
fn real_manifests_need_the_entitlement() {
    let err = ReleaseManifest::load(&manifests().join("ocp-4.19.yaml"), &Vars::new()).unwrap_err();
    assert!(
        matches!(err, ManifestError::UnsetVariable { ref name, .. } if name == "entitlement"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("rhel-9.6/rhel-9.6.repo:18:17: variable `entitlement` has no value"),
        "{err}"
    );
}

#[test]
fn canonical_json_is_deterministic_across_loads() {
    let path = manifests().join("demo/rhel-8.6.yaml");
    let a = BaseManifest::load(&path, &fixture_vars()).unwrap();
    let b = BaseManifest::load(&path, &fixture_vars()).unwrap();
    assert_eq!(
        a.manifest.to_canonical_json(),
        b.manifest.to_canonical_json()
    );
    assert_eq!(a.files, b.files);
    let other = BaseManifest::load(&path, &Vars::new().with("fixture", "/tmp/y").unwrap()).unwrap();
    assert_ne!(
        a.manifest.to_canonical_json(),
        other.manifest.to_canonical_json()
    );
}

#[test]
fn shipped_pipelines_name_shipped_manifests() {
    let two_fixtures = fixture_vars().with("fixture_rhel_9_6", "/tmp/x9").unwrap();
    for (path, vars, want) in [
        (
            "demo/pipeline.yaml",
            two_fixtures,
            &["4.12", "4.19", "4.20"][..],
        ),
        (
            "demo/pipeline-rhel-8.6.yaml",
            fixture_vars(),
            &["4.12", "4.13"],
        ),
        ("pipeline.yaml", entitled_vars(), &["4.12", "4.19", "4.20"]),
        (
            "okd/pipeline.yaml",
            Vars::new()
                .with("ose_baseurl", "https://ci.example/ose")
                .unwrap(),
            &["4.19", "4.20"],
        ),
    ] {
        let p = strata_manifest::PipelineManifest::load(&manifests().join(path), &vars)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .manifest;
        for base in &p.bases {
            assert!(base.manifest.exists(), "{path}: {:?}", base.manifest);
            BaseManifest::load(&base.manifest, &p.line_vars(base).unwrap()).unwrap();
        }
        let releases: Vec<String> = p
            .releases
            .iter()
            .map(|r| {
                let base = p
                    .bases
                    .iter()
                    .find(|b| Some(&b.manifest) == r.base.as_ref())
                    .unwrap();
                let m = ReleaseManifest::load(&r.manifest, &p.line_vars(base).unwrap()).unwrap();
                assert!(r.push.as_deref().unwrap().starts_with("docker://"));
                assert!(r.platforms.contains(&"qemu".to_string()));
                m.manifest.release.to_string()
            })
            .collect();
        assert_eq!(releases, want, "{path}");
    }
}

/// Every demo manifest of the other fixture flavours loads: the RHEL 9.6
/// line and the SCOS/OKD line.
#[test]
fn flavour_demo_manifests_load() {
    for base in ["rhel-9.6.yaml", "c9s.yaml"] {
        let m = BaseManifest::load(&manifests().join("demo").join(base), &fixture_vars())
            .unwrap_or_else(|e| panic!("{base}: {e}"));
        assert_eq!(m.manifest.rpmdb.as_str(), "sqlite", "{base}: RHEL 9's rpm");
    }
    for release in ["ocp-4.19", "ocp-4.20", "okd-4.19", "okd-4.20"] {
        let path = manifests().join(format!("demo/{release}.yaml"));
        let m = ReleaseManifest::load(&path, &fixture_vars())
            .unwrap_or_else(|e| panic!("{release}: {e}"));
        assert_eq!(m.manifest.release.to_string(), &release[4..]);
    }
}
