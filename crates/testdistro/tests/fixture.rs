//! The fixture distribution checked with the reference tools: rpmkeys, rpm,
//! dnf, and a boot under qemu.

use std::path::{Path, PathBuf};
use std::process::Command;

use strata_testdistro::boot::{boot, BootSpec, Firmware};
use strata_testdistro::Fixture;

fn fixture() -> Fixture {
    Fixture::for_tests().expect("generating the fixture distribution")
}

fn run(cmd: &mut Command) -> String {
    strata_process::stdout(cmd).unwrap_or_else(|e| panic!("{e}"))
}

fn rpms(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("Packages"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// The Packages of the first snapshot's RHEL repos.
fn base_rpms(f: &Fixture) -> Vec<PathBuf> {
    let snap = &f.info.snapshots[0];
    ["rhel-8.6-baseos", "rhel-8.6-appstream"]
        .iter()
        .flat_map(|id| rpms(&f.path(&f.repo(id, Some(snap)).unwrap().dir)))
        .collect()
}

#[test]
fn every_rpm_verifies_against_its_repos_key_only() {
    let f = fixture();
    let release_db = tempfile::tempdir().unwrap();
    let epel_db = tempfile::tempdir().unwrap();
    for (db, key) in [
        (&release_db, &f.info.release_key),
        (&epel_db, &f.info.epel_key),
    ] {
        run(Command::new("rpmkeys")
            .arg("--dbpath")
            .arg(db.path())
            .arg("--import")
            .arg(f.path(&key.path)));
    }
    let mut checked = 0;
    for repo in &f.info.repos {
        let (own, other) = if repo.signed_by == f.info.epel_key.fingerprint {
            (&epel_db, &release_db)
        } else {
            (&release_db, &epel_db)
        };
        for rpm in rpms(&f.path(&repo.dir)) {
            let out = Command::new("rpmkeys")
                .arg("--dbpath")
                .arg(own.path())
                .arg("-K")
                .arg(&rpm)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("digests signatures OK"),
                "{}: {text}",
                rpm.display()
            );
            let wrong = Command::new("rpmkeys")
                .arg("--dbpath")
                .arg(other.path())
                .arg("-K")
                .arg(&rpm)
                .output()
                .unwrap();
            assert!(
                !wrong.status.success(),
                "{} verified with the wrong key",
                rpm.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} packages");
}

#[test]
fn headers_carry_the_expected_dependencies_and_scriptlets() {
    let f = fixture();
    let baseos = f.path(&f.repo("rhel-8.6-baseos", Some("20261101")).unwrap().dir);
    let q = |pkg: &str, what: &str| -> String {
        let rpm = rpms(&baseos)
            .into_iter()
            .find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(&format!("{pkg}-"))
                    && n[pkg.len() + 1..].starts_with(|c: char| c.is_ascii_digit())
            })
            .unwrap_or_else(|| panic!("no {pkg} in baseos"));
        run(Command::new("rpm").args(["-qp", what]).arg(rpm))
    };
    assert!(q("redhat-release", "--provides").contains("system-release(releasever) = 8"));
    assert!(q("bash", "--provides").contains("/bin/sh"));
    let ssh = q("openssh-server", "--scripts");
    assert!(
        ssh.contains("preinstall scriptlet") && ssh.contains("useradd"),
        "{ssh}"
    );
    assert!(
        ssh.contains("postinstall scriptlet") && ssh.contains("/var/lib/sshd"),
        "{ssh}"
    );
    assert!(q("openssh-server", "--requires").contains("shadow-utils"));
    assert!(q("passwd", "-lv").contains("-rwsr-xr-x"), "setuid passwd");
    assert!(
        q("openssh-server", "-c").contains("/etc/ssh/sshd_config"),
        "%config"
    );
    assert!(q("filesystem", "-lv").contains("/bin -> usr/bin"));
    // Real programs where RHEL has them, with RHEL's file capabilities.
    let shadow = q("shadow-utils", "--filecaps");
    assert!(
        shadow.contains("/usr/bin/newuidmap\tcap_setuid=ep")
            || shadow.contains("/usr/bin/newuidmap cap_setuid=ep"),
        "{shadow}"
    );
    assert!(shadow.contains("/usr/sbin/useradd"), "{shadow}");
    assert!(q("bash", "--requires").contains("libtinfo.so.6()(64bit)"));
    assert!(q("glibc", "--provides").contains("libc.so.6()(64bit)"));
    // Debian's gzip ships uncompress as a hard link of gunzip.
    let hardlinks = q("gzip", "--dump");
    // --dump: path size mtime digest mode owner group isconfig isdoc rdev symlink
    let digests: Vec<&str> = hardlinks
        .lines()
        .filter(|l| l.starts_with("/usr/bin/gunzip ") || l.starts_with("/usr/bin/uncompress "))
        .map(|l| l.split_whitespace().nth(3).unwrap())
        .collect();
    assert_eq!(digests.len(), 2);
    assert_eq!(digests[0], digests[1]);
    let kernel = q("kernel-core", "-l");
    let kver = &f.info.kernel_kvers[0];
    for path in [
        "vmlinuz",
        "modules.dep",
        "kernel/fs/ext4/ext4.ko",
        "kernel/drivers/block/virtio_blk.ko",
    ] {
        assert!(
            kernel.contains(&format!("/usr/lib/modules/{kver}/{path}")),
            "kernel-core lacks {path}"
        );
    }
    // RHEL 8's kernel scriptlets: kernel-install from kernel-core's
    // %posttrans and %preun, depmod from kernel-modules'.
    let scripts = q("kernel-core", "--scripts");
    assert!(
        scripts.contains("posttrans scriptlet")
            && scripts.contains(&format!(
                "/bin/kernel-install add {kver} /lib/modules/{kver}/vmlinuz"
            )),
        "{scripts}"
    );
    assert!(
        scripts.contains(&format!("/bin/kernel-install remove {kver}")),
        "{scripts}"
    );
    // kernel-core's %post notes that it is being installed; kernel-modules
    // installed without it remakes the initramfs from its %posttrans.
    for note in [
        format!("touch /var/lib/rpm-state/kernel/installing_core_{kver}"),
        format!("rm -f /var/lib/rpm-state/kernel/installing_core_{kver}"),
    ] {
        assert!(scripts.contains(&note), "{note}: {scripts}");
    }
    let scripts = q("kernel-modules", "--scripts");
    assert!(
        scripts.contains(&format!("/sbin/depmod -a {kver}"))
            && scripts.contains(&format!("dracut -f --kver \"{kver}\"")),
        "{scripts}"
    );
    assert!(q("kernel-core", "--requires").contains("/usr/bin/kernel-install"));
}

#[test]
fn snapshots_differ_in_the_zstream_packages_only() {
    let f = fixture();
    let names = |snap: &str| -> std::collections::BTreeSet<String> {
        ["rhel-8.6-baseos", "rhel-8.6-appstream"]
            .iter()
            .flat_map(|id| {
                f.repo(id, Some(snap))
                    .unwrap()
                    .packages
                    .iter()
                    .map(|p| p.nevra.clone())
            })
            .collect()
    };
    let old = names(&f.info.snapshots[0]);
    let new = names(&f.info.snapshots[1]);
    let updated: Vec<String> = new
        .difference(&old)
        .map(|n| n.rsplitn(3, '-').nth(2).unwrap().to_string())
        .collect();
    assert_eq!(
        updated,
        [
            "glibc",
            "kernel",
            "kernel-core",
            "kernel-modules",
            "openssl-libs",
            "sudo"
        ]
    );
    assert_eq!(old.len(), new.len());
}

#[test]
fn repodata_loads_in_dnf() {
    let f = fixture();
    let scratch = tempfile::tempdir().unwrap();
    let reposdir = scratch.path().join("repos.d");
    std::fs::create_dir(&reposdir).unwrap();
    for file in ["rhel-8.6-20261101.repo", "rhocp-4.13.repo"] {
        std::fs::copy(f.path(&format!("repos/{file}")), reposdir.join(file)).unwrap();
    }
    let out = Command::new("dnf")
        .arg("--installroot")
        .arg(scratch.path().join("root"))
        .arg(format!("--setopt=reposdir={}", reposdir.display()))
        .arg(format!(
            "--setopt=cachedir={}",
            scratch.path().join("cache").display()
        ))
        .args(["--releasever", "8", "--assumeno", "--nodocs", "install"])
        .args([
            "kernel",
            "systemd",
            "openssh-server",
            "cri-o",
            "openshift-kubelet",
        ])
        .output()
        .expect("running dnf (install the Debian package dnf)");
    let text = String::from_utf8_lossy(&out.stdout);
    for pkg in [
        "kernel-core",
        "glibc",
        "coreutils",
        "setup",
        "openshift-kubelet",
        "runc",
    ] {
        assert!(
            text.contains(pkg),
            "dnf did not resolve {pkg}:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(text.contains("Transaction Summary"), "{text}");
}

#[test]
fn generating_twice_gives_identical_bytes() {
    same_bytes_twice(strata_testdistro::Flavour::default());
}

/// The other flavours are as deterministic: the shared test fixture of each
/// against one generated elsewhere.
#[test]
fn every_flavour_generates_identical_bytes_twice() {
    for flavour in [
        strata_testdistro::Flavour::Rhel96,
        strata_testdistro::Flavour::C9s,
    ] {
        same_bytes_twice(flavour);
    }
}

fn same_bytes_twice(flavour: strata_testdistro::Flavour) {
    let f = Fixture::for_tests_flavour(flavour).unwrap();
    let other = tempfile::tempdir().unwrap();
    let g = Fixture::generate(
        &other.path().join("f"),
        &strata_testdistro::Options::default().flavour(flavour),
    )
    .unwrap();
    assert_eq!(f.info, g.info);
    assert_eq!(g.info.flavour, flavour.name());
    let list = |root: &Path| -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if rel == "repos" {
                    continue; // .repo files name the fixture's absolute path
                }
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    };
    let a = list(&f.root);
    let b = list(&g.root);
    assert_eq!(a.len(), b.len());
    for ((pa, da), (pb, db)) in a.iter().zip(&b) {
        assert_eq!(pa, pb);
        assert!(da == db, "{flavour}: {pa} differs between two generations");
    }
}

/// Installs the base packages into a root with rpm, builds the initramfs
/// with the fixture's own dracut, packs the root with mkfs.ext4 and boots
/// it under qemu: the fixture is a real, bootable distribution.
#[test]
fn installed_fixture_boots_under_qemu() {
    assert!(
        rustix_is_root(),
        "this test installs RPMs with scriptlets (chroot): run it as root"
    );
    let f = fixture();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    std::fs::create_dir_all(root.join("dev")).unwrap();
    // Scriptlets redirect to /dev/null; rpm does not provide one.
    run(Command::new("mknod")
        .arg(root.join("dev/null"))
        .args(["c", "1", "3"]));
    run(Command::new("rpm")
        .arg("--root")
        .arg(&root)
        .args(["--dbpath", "/var/lib/rpm", "--import"])
        .arg(f.path(&f.info.release_key.path)));
    let all = base_rpms(&f);
    run(Command::new("rpm")
        .arg("--root")
        .arg(&root)
        .args(["--dbpath", "/var/lib/rpm", "-i"])
        .args(&all));
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(
        passwd.contains("sshd:x:74:74:"),
        "%pre created sshd:\n{passwd}"
    );
    assert!(
        passwd.contains("chrony:x:"),
        "%pre created chrony:\n{passwd}"
    );
    assert!(
        root.join("var/lib/systemd/catalog/database").exists(),
        "%post wrote /var"
    );
    assert!(
        root.join("etc/ssh/sshd_config.d/40-strata-post.conf")
            .exists(),
        "%post wrote /etc"
    );

    let kver = &f.info.kernel_kvers[0];
    run(Command::new("chroot")
        .arg(&root)
        .args([
            "/usr/bin/dracut",
            "--no-hostonly",
            "--reproducible",
            "-f",
            "--kver",
            kver,
        ])
        .arg(format!("/usr/lib/modules/{kver}/initramfs.img"))
        .env("SOURCE_DATE_EPOCH", "1792022400"));
    let moddir = root.join(format!("usr/lib/modules/{kver}"));
    let image = work.path().join("root.img");
    run(Command::new("mkfs.ext4")
        .args(["-q", "-L", "root", "-d"])
        .arg(&root)
        .arg(&image)
        .arg("1G")
        .env("E2FSPROGS_FAKE_TIME", "1792022400"));
    let result = boot(&BootSpec::new(
        Firmware::Direct {
            kernel: moddir.join("vmlinuz"),
            initrd: moddir.join("initramfs.img"),
            append: "root=LABEL=root rw console=ttyS0".into(),
        },
        &image,
    ))
    .unwrap();
    assert_eq!(
        result.marker,
        "STRATA-BOOT-OK version=8.6 (Ootpa) openshift=none init=systemd kubelet=no crio=no firstboot=no var=root"
    );
    eprintln!("booted to the marker in {:?}", result.elapsed);
}

fn rustix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        .unwrap_or(false)
}
