//! Compose on the fixture distribution, checked with the reference tools:
//! `ostree fsck`, `ostree checkout`, `rpm -qa`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use strata_compose::{compose, ComposeOptions, ComposeResult};
use strata_manifest::Vars;
use strata_testdistro::scratch::SharedDir;
use strata_testdistro::spec::{Dep, FileSpec, PkgSpec};
use strata_testdistro::{Fixture, Signing};

/// librpm chroots the whole process while a transaction runs, so no other
/// thread may touch the filesystem meanwhile: these tests run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixture() -> Fixture {
    strata_testdistro::require_root("compose installs RPMs with chrooted scriptlets");
    Fixture::for_tests().expect("generating the fixture distribution")
}

fn demo_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo/rhel-8.6.yaml")
}

fn vars(f: &Fixture) -> Vars {
    Vars::from_assignments([format!("fixture={}", f.root.display())]).unwrap()
}

/// The crate's own program, serving the compose's install jobs.
fn installer() -> strata_process::worker::Worker {
    strata_process::worker::Worker::new(env!("CARGO_BIN_EXE_strata-compose")).arg("install")
}

fn compose_in(workdir: &Path, manifest: &Path) -> anyhow::Result<ComposeResult> {
    let f = fixture();
    compose(
        &ComposeOptions::new(manifest, workdir, installer())
            .vars(vars(&f))
            .source_date_epoch(None),
    )
}

/// The demo base, composed once for the tests that only look at it.
fn demo() -> &'static (SharedDir, ComposeResult) {
    static DEMO: OnceLock<(SharedDir, ComposeResult)> = OnceLock::new();
    DEMO.get_or_init(|| {
        let w = SharedDir::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join("compose-demo"));
        let r = compose_in(w.path(), &demo_manifest()).unwrap();
        (w, r)
    })
}

fn run(cmd: &mut Command) -> String {
    strata_process::stdout(cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// A manifest that includes the demo one and adds `extra` (YAML).
fn wrapper(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("manifest.yaml");
    std::fs::write(
        &path,
        format!(
            "edition: 1\ninclude: {}\n{extra}",
            demo_manifest().display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn demo_base_follows_the_conventions() {
    let _serial = serial();
    let (w, r) = demo();
    assert!(r.changed);
    assert_eq!(r.version, "8.6.20261015-0");
    let repo = w.path().join("repo");
    let fsck = run(Command::new("ostree")
        .arg("fsck")
        .arg(format!("--repo={}", repo.display())));
    assert!(fsck.contains("no errors"), "{fsck}");

    let co = tempfile::tempdir().unwrap();
    let tree = co.path().join("tree");
    run(Command::new("ostree")
        .arg("checkout")
        .arg(format!("--repo={}", repo.display()))
        .arg("-U")
        // A copy: rpm writes to the database it queries (below), which in a
        // hard-linked checkout is the repository's object.
        .arg("--force-copy")
        .arg(&r.ostree_commit)
        .arg(&tree));
    let read =
        |p: &str| std::fs::read_to_string(tree.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let link = |p: &str| {
        std::fs::read_link(tree.join(p))
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };

    // rpm's %caps reach the commit (and nothing else of the host's xattrs).
    for (file, caps) in [
        ("/usr/bin/newuidmap", "security.capability"),
        ("/usr/bin/newgidmap", "security.capability"),
        ("/usr/bin/bash", ""),
    ] {
        let listed = run(Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["ls", "-X", &r.ostree_commit, file]));
        if caps.is_empty() {
            assert!(listed.contains("{ @a(ayay) [] }"), "{listed}");
        } else {
            assert!(listed.contains(caps), "{file}: {listed}");
        }
    }

    assert!(!tree.join("etc").exists(), "/etc moved to /usr/etc");
    assert!(tree.join("usr/etc/ssh/sshd_config").is_file());
    for (name, target) in [
        ("home", "var/home"),
        ("root", "var/roothome"),
        ("opt", "var/opt"),
        ("srv", "var/srv"),
        ("mnt", "var/mnt"),
        ("ostree", "sysroot/ostree"),
    ] {
        assert_eq!(link(name), target, "/{name}");
    }
    assert_eq!(link("usr/local"), "../var/usrlocal");
    assert!(tree.join("sysroot").is_dir());
    for empty in ["var", "boot"] {
        assert_eq!(
            std::fs::read_dir(tree.join(empty)).unwrap().count(),
            0,
            "/{empty} is empty"
        );
    }
    // The EFI payload RHEL's packages put under /boot/efi, where bootupd
    // keeps it, with bootupd's metadata; BIOS GRUB stays where its package
    // put it.
    for f in [
        "BOOT/BOOTX64.EFI",
        "BOOT/fbx64.efi",
        "redhat/shimx64.efi",
        "redhat/grubx64.efi",
        "redhat/BOOTX64.CSV",
    ] {
        assert!(
            tree.join("usr/lib/bootupd/updates/EFI").join(f).is_file(),
            "{f}"
        );
    }
    let efi: serde_json::Value =
        serde_json::from_str(&read("usr/lib/bootupd/updates/EFI.json")).unwrap();
    assert_eq!(
        efi["version"], "grub2-efi-x64-1:2.02-123.el8_6.x86_64,shim-x64-15.4-2.el8_1.x86_64",
        "{efi}"
    );
    assert_eq!(efi["versions"][0]["name"], "grub2", "{efi}");
    assert!(efi["timestamp"].as_str().unwrap().ends_with('Z'), "{efi}");
    assert!(tree.join("usr/lib/grub/i386-pc/kernel.img").is_file());
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("strata.json")).unwrap()).unwrap();
    assert_eq!(meta["tree"]["bootloader"]["EFI"], efi["version"], "{meta}");
    // coreos-assembler's meta.json beside it, by its schema's rules.
    let cosa: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        strata_workdir::record::check_cosa_meta(&cosa),
        Vec::<String>::new(),
        "{cosa:#}"
    );
    assert_eq!(cosa["buildid"], r.version.as_str());
    assert_eq!(cosa["ostree-commit"], r.ostree_commit.as_str());
    assert_eq!(cosa["ostree-timestamp"], "2026-10-15T00:00:00Z");
    assert_eq!(cosa["coreos-assembler.basearch"], "x86_64");
    assert!(r.build_dir.ends_with(format!("{}/x86_64", r.version)));
    let builds: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("../../builds.json")).unwrap())
            .unwrap();
    assert_eq!(builds["schema-version"], "1.0.0");
    assert_eq!(builds["builds"][0]["id"], r.version.as_str());

    let tmpfiles = read("usr/lib/tmpfiles.d/strata-var.conf");
    assert!(
        tmpfiles.contains("d /var/lib/chrony 0750 chrony chrony - -"),
        "{tmpfiles}"
    );
    assert!(tmpfiles.contains("L /var/lib/rpm - - - - ../../usr/share/rpm"));
    let kver = &fixture().info.kernel_kvers[0];
    for f in ["vmlinuz", "initramfs.img"] {
        assert!(
            tree.join(format!("usr/lib/modules/{kver}/{f}")).is_file(),
            "{f}"
        );
    }
    assert!(read("usr/lib/os-release").contains("OSTREE_VERSION=\"8.6.20261015-0\""));
    let os_release = read("usr/lib/os-release");
    assert!(os_release.contains("VERSION_ID=\"8.6\""), "{os_release}");
    // The base stays RHEL (its own ID) and is CoreOS to the MCO.
    assert!(os_release.contains("ID=\"rhel\""), "{os_release}");
    assert!(os_release.contains("VARIANT_ID=\"coreos\""), "{os_release}");
    assert_eq!(
        std::fs::read_link(tree.join("usr/etc/os-release")).unwrap(),
        Path::new("../usr/lib/os-release")
    );
    assert!(
        read("usr/lib/passwd").contains("sshd:x:74:74:"),
        "the %pre user is in /usr/lib/passwd"
    );
    assert_eq!(read("usr/etc/passwd"), "root:x:0:0:root:/root:/bin/bash\n");
    let nsswitch = read("usr/etc/nsswitch.conf");
    assert!(
        nsswitch
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["passwd:", "files", "altfiles"]),
        "{nsswitch}"
    );
    assert_eq!(
        link("usr/etc/systemd/system/multi-user.target.wants/sshd.service"),
        "/usr/lib/systemd/system/sshd.service"
    );
    assert!(read("usr/lib/rpm/macros.d/macros.strata").contains("%_dbpath /usr/share/rpm"));

    // A RHEL 8 tree keeps the Berkeley DB files its own rpm reads, and rpm's
    // read-only bdb backend lists exactly the lockfile's packages.
    assert!(tree.join("usr/share/rpm/Packages").is_file());
    assert_eq!(
        std::fs::read_link(tree.join("usr/lib/sysimage/rpm")).unwrap(),
        Path::new("../../share/rpm")
    );
    assert!(tree.join("usr/share/rpm/Basenames").is_file());
    assert!(!tree.join("usr/share/rpm/rpmdb.sqlite").exists());
    let qa = run(Command::new("rpm")
        .args(["--define", "_db_backend bdb_ro", "--dbpath"])
        .arg(tree.join("usr/share/rpm"))
        .args(["-qa", "--qf", "%{NAME}\n"]));
    let mut installed: Vec<&str> = qa.lines().collect();
    installed.sort();
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&r.lockfile).unwrap()).unwrap();
    let locked: Vec<&str> = lock["packages"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(installed, locked);
    // The tree's own rpm (RHEL 8's writes Berkeley DB only) lists the same
    // packages, and layers one more into the database as a node does
    // (`rpm-ostree install` of an EPEL package): its key imported, its
    // signature checked, its files and header written by that rpm. rpm's
    // read-only backend on the host then sees it too.
    let own = run(strata_testdistro::tree_rpm(&tree).args(["-qa", "--qf", "%{NAME}\n"]));
    let mut own: Vec<&str> = own.lines().collect();
    own.sort();
    assert_eq!(own, locked);
    let f = fixture();
    let epel = f.repo("epel-8", None).unwrap();
    let htop = epel.packages.iter().find(|p| p.name == "htop").unwrap();
    std::fs::copy(f.path(&htop.file), tree.join("var/htop.rpm")).unwrap();
    std::fs::copy(f.path(&f.info.keys["epel"].path), tree.join("var/epel.key")).unwrap();
    run(Command::new("chroot")
        .arg(&tree)
        .args(["/usr/bin/rpmkeys", "--import", "/var/epel.key"]));
    let checked = run(Command::new("chroot").arg(&tree).args([
        "/usr/bin/rpmkeys",
        "--checksig",
        "/var/htop.rpm",
    ]));
    assert!(
        checked.trim().ends_with("digests signatures OK"),
        "{checked}"
    );
    run(strata_testdistro::tree_rpm(&tree).args(["-i", "/var/htop.rpm"]));
    assert!(tree.join("usr/bin/htop").is_file());
    let layered = run(Command::new("rpm")
        .args(["--define", "_db_backend bdb_ro", "--dbpath"])
        .arg(tree.join("usr/share/rpm"))
        .args(["-q", "htop"]));
    assert_eq!(layered.trim(), htop.nevra);
    assert!(!tree.join("usr/share/rpm/rpmdb.sqlite").exists());
    // epel-8 is listed in the manifest but never contributes: RHEL's bash.
    assert_eq!(lock["packages"]["bash"]["evra"], "4.4.20-4.el8_6.x86_64");
    // rpm-ostree's lockfile format: evra, digest, metadata (strata's repo;
    // `sourcerpm` only for packages that name one, which the fixture's,
    // built with the rpm crate, do not), and each repo's metadata timestamp.
    assert_eq!(
        lock["packages"]["bash"]["metadata"]["repo"],
        "rhel-8.6-baseos"
    );
    assert!(lock["packages"]["bash"]["digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(lock["metadata"]["generated"], "2026-10-15T00:00:00Z");
    assert_eq!(
        lock["metadata"]["rpmmd_repos"]["rhel-8.6-baseos"]["generated"],
        "2026-10-15T00:00:00Z"
    );
    assert_eq!(lock.get("repos"), None);
    let version = run(Command::new("ostree")
        .arg(format!("--repo={}", repo.display()))
        .args(["show", "--print-metadata-key=version"])
        .arg(&r.ostree_commit));
    assert_eq!(version.trim(), "'8.6.20261015-0'");

    // The base image, as a registry client sees it.
    let inspect: serde_json::Value =
        serde_json::from_str(&run(Command::new("skopeo").arg("inspect").arg(&r.image))).unwrap();
    assert_eq!(inspect["Digest"], r.digest.as_str());
    let labels = &inspect["Labels"];
    assert_eq!(labels["ostree.commit"], r.ostree_commit.as_str());
    assert_eq!(labels["org.opencontainers.image.version"], "8.6.20261015-0");
    assert_eq!(labels["ostree.linux"], kver.as_str());
    assert_eq!(labels["com.coreos.osname"], "rhcos");
    assert_eq!(labels["containers.bootc"], "1");

    // Regression: an invalid rpm query format (rpm exits 0 on it) once left
    // every file "unpackaged", so chunking saw no packages at all.
    let layer_map = std::fs::read_to_string(r.build_dir.join("layer-map.json")).unwrap();
    for component in ["openssh-server", "kernel-modules", "initramfs"] {
        assert!(
            layer_map.contains(&format!("\"{component}\"")),
            "{component} in {layer_map}"
        );
    }
    // The EFI payload compose moved to /usr/lib/bootupd/updates is still
    // its package's, not the unpackaged content that changes every build.
    let content = strata_compose::content_map(
        &tree.join("usr/share/rpm"),
        kver,
        &strata_compose::ChangeHistory::default(),
    )
    .unwrap();
    let owners = strata_oscontainer::object_components(&repo, &r.ostree_commit, &content).unwrap();
    let shim = run(Command::new("ostree")
        .arg(format!("--repo={}", repo.display()))
        .args(["ls", "-C"])
        .arg(&r.ostree_commit)
        .arg("/usr/lib/bootupd/updates/EFI/BOOT/BOOTX64.EFI"));
    let checksum = shim.split_whitespace().nth(4).unwrap();
    assert_eq!(owners[checksum], "shim-x64", "{shim}");
}

#[test]
fn unchanged_inputs_do_no_work() {
    let _serial = serial();
    let (w, r) = demo();
    let again = compose_in(w.path(), &demo_manifest()).unwrap();
    assert!(!again.changed);
    assert_eq!(again.ostree_commit, r.ostree_commit);
    assert_eq!(again.version, r.version);

    // The hash covered the manifests' bytes: a comment, or the same
    // manifest reached through an include, made a new build. It covers
    // their meaning.
    let d = tempfile::tempdir().unwrap();
    let commented = wrapper(d.path(), "# only a comment\n");
    let again = compose_in(w.path(), &commented).unwrap();
    assert!(!again.changed, "a comment rebuilt the base");
    assert_eq!(again.inputhash, r.inputhash);
}

/// The build that another checkout on another machine makes: the manifests
/// and the repos are the same, their paths are not.
/// Rebuilt from the lockfile elsewhere — another checkout of the
/// manifests, a mirror of the repos, a fresh workdir — and by an ordinary
/// user (strata-test, with subordinate ids, as root of a user namespace):
/// the same commit and image bytes as root's compose.
#[test]
fn same_inputs_give_the_same_commit_in_a_fresh_workdir_at_other_paths_and_as_an_ordinary_user() {
    let _serial = serial();
    let (_, r) = demo();
    let f = fixture();
    // Next to the fixture, so that the mirror can be hard links.
    let elsewhere = tempfile::tempdir_in(f.root.parent().unwrap()).unwrap();
    let checkout = elsewhere.path().join("checkout");
    run(Command::new("cp")
        .arg("-a")
        .arg(demo_manifest().parent().unwrap())
        .arg(&checkout));
    let mirror = elsewhere.path().join("mirror");
    run(Command::new("cp").arg("-al").arg(&f.root).arg(&mirror));
    let lockfile = elsewhere.path().join("lockfile.json");
    std::fs::copy(&r.lockfile, &lockfile).unwrap();
    std::fs::set_permissions(
        &lockfile,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let w = elsewhere.path().join("w");
    std::fs::create_dir(&w).unwrap();
    strata_testdistro::give_to_subid_user(&w);
    let out = strata_testdistro::as_subid_user(
        env!("CARGO_BIN_EXE_strata-compose"),
        [
            checkout.join("rhel-8.6.yaml").into_os_string(),
            w.clone().into_os_string(),
            lockfile.into_os_string(),
            format!("fixture={}", mirror.display()).into(),
        ],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let locked: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(locked["inputhash"], r.inputhash.as_str());
    assert_eq!(locked["ostree_commit"], r.ostree_commit.as_str());
    assert_eq!(
        locked["digest"],
        r.digest.as_str(),
        "same commit, same image bytes"
    );
    // What it wrote is the user's, on the host.
    let (uid, _) = strata_testdistro::subid_user();
    for sub in ["repo", "oci", "builds"] {
        let meta = std::fs::metadata(w.join(sub)).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), uid, "{sub}");
    }
}

/// The uid `/usr/lib/passwd` of `workdir`'s build gives `user`.
fn uid_of(workdir: &Path, r: &ComposeResult, user: &str) -> String {
    let passwd = run(Command::new("ostree")
        .arg("cat")
        .arg(format!("--repo={}", workdir.join("repo").display()))
        .arg(&r.ostree_commit)
        .arg("/usr/lib/passwd"));
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f[0] == user).then(|| f[2].to_string())
        })
        .unwrap_or_else(|| panic!("no {user} in\n{passwd}"))
}

/// Swaps the ids of users (and groups) `a` and `b` in `/etc`-format lists.
fn swap_ids(list: &str, a: &str, b: &str) -> String {
    let id = |name: &str| {
        list.lines()
            .find_map(|l| {
                l.split(':')
                    .next()
                    .filter(|n| *n == name)
                    .map(|_| l.split(':').nth(2).unwrap().to_string())
            })
            .unwrap_or_else(|| panic!("no {name} in\n{list}"))
    };
    let (ia, ib) = (id(a), id(b));
    list.lines()
        .map(|l| {
            let mut f: Vec<String> = l.split(':').map(String::from).collect();
            if f[0] == a {
                f[2] = ib.clone();
            } else if f[0] == b {
                f[2] = ia.clone();
            }
            f.join(":") + "\n"
        })
        .collect()
}

/// A tree with an SELinux policy is labeled by it: every path as
/// `ostree commit --selinux-policy` labels it, except `/usr/etc`, which is
/// labeled as the `/etc` a deployment copies it to.
#[test]
fn the_trees_own_selinux_policy_labels_it() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let manifest = wrapper(d.path(), "packages:\n  - selinux-policy-minimum\n");
    let w = d.path().join("work");
    let r = compose_in(&w, &manifest).unwrap();
    let repo = w.join("repo");
    let label = |repo: &Path, commit: &str, file: &str| -> String {
        let listed = run(Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["ls", "-X", commit, file]));
        let at = listed
            .find("security.selinux")
            .unwrap_or_else(|| panic!("{file} is not labeled: {listed}"));
        // Every context of the fixture's policy is system_u:…:s0.
        let rest = &listed[at..];
        let start = rest.find("system_u").unwrap();
        let len = rest[start..].find(":s0").unwrap() + 3;
        rest[start..start + len].to_string()
    };
    for (file, want) in [
        ("/", "system_u:object_r:root_t:s0"),
        ("/usr/bin/bash", "system_u:object_r:bin_t:s0"),
        (
            "/usr/etc/ssh/sshd_config",
            "system_u:object_r:sshd_config_t:s0",
        ),
        ("/usr/etc/shadow", "system_u:object_r:shadow_t:s0"),
        ("/usr/etc", "system_u:object_r:etc_t:s0"),
    ] {
        assert_eq!(label(&repo, &r.ostree_commit, file), want, "{file}");
    }

    // The reference: ostree's own labeling of the same tree agrees outside
    // /usr/etc.
    let co = d.path().join("checkout");
    run(Command::new("ostree")
        .arg(format!("--repo={}", repo.display()))
        .args(["checkout", "-U", &r.ostree_commit])
        .arg(&co));
    let reference = run(Command::new("ostree")
        .arg(format!("--repo={}", repo.display()))
        .args(["commit", "--orphan", "--no-xattrs"])
        .arg(format!("--selinux-policy={}", co.display()))
        .arg(format!("--tree=dir={}", co.display())));
    for file in ["/", "/usr", "/usr/bin/bash", "/usr/lib/os-release"] {
        assert_eq!(
            label(&repo, &r.ostree_commit, file),
            label(&repo, reference.trim(), file),
            "{file}"
        );
    }
    // Files the package cache linked are committed as labeled copies of
    // their objects: every object holds what its checksum says.
    run(Command::new("ostree")
        .arg(format!("--repo={}", repo.display()))
        .arg("fsck"));
}

/// The demo manifest plus `package`, from a repository of its own in `dir`
/// signed with the release key.
fn with_extra_package(dir: &Path, f: &Fixture, package: PkgSpec) -> PathBuf {
    let extra = dir.join("extra");
    let name = package.name.clone();
    Fixture::build_repo(&extra, &[package], Signing::Release).unwrap();
    wrapper(
        dir,
        &format!(
            "repos:\n  - id: extra\n    baseurl: file://{}\n    gpgkey: file://{}\ninputs:\n  repos: [extra]\npackages: [{name}]\n",
            extra.display(),
            f.path(&f.info.release_key.path).display()
        ),
    )
}

/// Scriptlets allocate system ids at install time, in rpm's install order;
/// files on nodes are owned by those numbers, so a user the previous build
/// had keeps its id whatever the allocation would give now.
#[test]
fn scriptlet_user_ids_stay_what_the_previous_build_gave_them() {
    let _serial = serial();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let mut early = PkgSpec::new("strata-early-user", "1.0", "1.el8").files([FileSpec::file(
        "/usr/share/strata-early-user/README",
        "a dynamically allocated system user",
        0o644,
    )]);
    early.build_time = 1_792_022_400;
    early.requires_pre = vec![Dep("shadow-utils".into()), Dep("glibc".into())];
    early.pre = Some(
        "getent group early >/dev/null || groupadd -r early\n\
         getent passwd early >/dev/null || useradd -r -g early -d / -s /sbin/nologin early\n"
            .into(),
    );
    let with_early = with_extra_package(d.path(), &f, early);
    let (demo_w, demo_r) = demo();
    let allocated = uid_of(demo_w.path(), demo_r, "chrony");

    let w = d.path().join("w");
    let first = compose_in(&w, &with_early).unwrap();
    assert_eq!(uid_of(&w, &first, "chrony"), allocated);
    // The history of a build whose install order put the early user first,
    // as a new RHEL minor's ordering may.
    let kept = first.build_dir.join("accounts.json");
    let mut accounts: strata_compose::Accounts =
        serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    accounts.passwd = swap_ids(&accounts.passwd, "chrony", "early");
    accounts.group = swap_ids(&accounts.group, "chrony", "early");
    std::fs::write(&kept, serde_json::to_vec(&accounts).unwrap()).unwrap();
    let history = uid_of(&w, &first, "early");

    let second = compose_in(&w, &demo_manifest()).unwrap();
    assert!(second.changed);
    assert_ne!(history, allocated);
    assert_eq!(
        uid_of(&w, &second, "chrony"),
        history,
        "chrony keeps its id"
    );
}

/// RHEL's kernel-core hands the kernel to `kernel-install add` from its
/// %posttrans; the plugins that would copy it into /boot and run dracut
/// there never run in an image build, while the scriptlet itself does.
#[test]
fn kernel_install_runs_but_its_plugins_stop_before_the_trees_own() {
    let _serial = serial();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let plugin = |name: &str, body: &str| {
        FileSpec::file(
            &format!("/usr/lib/kernel/install.d/{name}"),
            format!("#!/bin/sh\n{body}"),
            0o755,
        )
    };
    let mut plugins = PkgSpec::new("strata-kernel-install-plugins", "1.0", "1.el8").files([
        // Sorts before strata's own plugin: it runs, and says with what.
        plugin(
            "00-strata-a-witness.install",
            "mkdir -p /usr/lib/strata-witness\necho \"$@\" > /usr/lib/strata-witness/kernel-install\n",
        ),
        // What dracut's plugin would do on RHEL, where no image keeps it.
        plugin(
            "50-strata-initrd.install",
            "echo made > /boot/initramfs-$2.img\nexit 1\n",
        ),
        // Found before the tree's /usr/bin/dracut by scriptlets (rpm's
        // PATH), never by strata, which runs the generator by its path:
        // kernel-modules' %posttrans calling dracut fails the compose.
        FileSpec::file(
            "/usr/sbin/dracut",
            "#!/bin/sh\necho \"dracut ran from a scriptlet: $*\" >&2\nexit 1\n",
            0o755,
        ),
    ]);
    plugins.build_time = 1_792_022_400;
    let m = with_extra_package(d.path(), &f, plugins);
    let w = d.path().join("w");
    let r = compose_in(&w, &m).unwrap();
    let repo = format!("--repo={}", w.join("repo").display());
    let cat = |path: &str| {
        strata_process::stdout(
            Command::new("ostree")
                .args([&repo, "cat", &r.ostree_commit])
                .arg(path),
        )
    };
    let kver = &f.info.kernel_kvers[0];
    let witness = cat("/usr/lib/strata-witness/kernel-install").unwrap();
    assert!(
        witness.starts_with(&format!("add {kver} "))
            && witness.contains(&format!("/lib/modules/{kver}/vmlinuz")),
        "{witness}"
    );
    let ls = run(Command::new("ostree").args([
        &repo,
        "ls",
        "-R",
        &r.ostree_commit,
        "/boot",
        "/usr/etc",
    ]));
    assert!(!ls.contains("initramfs-"), "{ls}");
    assert!(
        !ls.contains("00-strata-image.install"),
        "strata's plugin stays out: {ls}"
    );
    // kernel-core and kernel-modules came in one transaction: kernel-core's
    // note (its directory is left) kept kernel-modules from asking for
    // dracut, and its %posttrans took the note away again.
    let var = cat("/usr/lib/tmpfiles.d/strata-var.conf").unwrap();
    assert!(var.contains("d /var/lib/rpm-state/kernel "), "{var}");
    assert!(
        !var.contains("installing_core_") && !var.contains("need_to_run_dracut_"),
        "{var}"
    );
}

#[test]
fn a_package_only_in_epel_is_refused_by_name() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let m = wrapper(d.path(), "packages: [htop]\n");
    let w = d.path().join("w");
    let err = format!("{:#}", compose_in(&w, &m).unwrap_err());
    assert!(
        err.contains("htop") && err.contains("epel-8") && err.contains("inputs.repos"),
        "{err}"
    );
    assert!(workdir_has_no_build(&w));
}

#[test]
fn a_failing_post_scriptlet_fails_the_compose_naming_package_and_output() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let m = wrapper(d.path(), "packages: [failing-post]\n");
    let w = d.path().join("w");
    let err = format!("{:#}", compose_in(&w, &m).unwrap_err());
    assert!(
        err.contains(
            "package failing-post-1.0-1.el8.x86_64: its %post scriptlet failed (exit status 3)"
        ),
        "{err}"
    );
    assert!(
        err.contains("cannot reach the configuration service"),
        "the scriptlet's own output: {err}"
    );
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(workdir_has_no_build(&w));

    // Listed in ignore-scripts, the failure is let through and recorded.
    let m = wrapper(
        d.path(),
        "packages: [failing-post]\nignore-scripts: [failing-post]\n",
    );
    let r = compose_in(&w, &m).unwrap();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("strata.json")).unwrap()).unwrap();
    assert_eq!(
        meta["ignored_scriptlet_failures"],
        serde_json::json!(["%post(failing-post-1.0-1.el8.x86_64) scriptlet failed, exit status 3"]),
        "{meta}"
    );
}

#[test]
fn a_package_set_without_the_initramfs_generator_fails_before_installing() {
    // RHEL's kernel-core requires dracut before its scriptlets run, so only
    // a set without the kernel lacks it here.
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("no-dracut.yaml");
    std::fs::write(
        &m,
        format!(
            "edition: 1\ninclude: {}\nname: rhel-8.6\nosname: rhcos\nreleasever: \"8\"\n\
             version-prefix: \"8.6.<date:%Y%m%d>\"\npackages: [bash]\n",
            demo_manifest()
                .parent()
                .unwrap()
                .join("rhel-8.6-repos.yaml")
                .display()
        ),
    )
    .unwrap();
    let w = d.path().join("w");
    let err = format!("{:#}", compose_in(&w, &m).unwrap_err());
    assert!(
        err.contains("no-dracut.yaml")
            && err.contains("initramfs.generator dracut")
            && err.contains("/usr/bin/dracut"),
        "{err}"
    );
    assert!(workdir_has_no_build(&w));
}

#[test]
fn unsigned_and_foreign_signed_packages_are_refused_by_name() {
    let _serial = serial();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let mut unsigned = PkgSpec::new("strata-unsigned-tool", "1.0", "1.el8")
        .files([FileSpec::file("/usr/bin/strata-unsigned-tool", "x", 0o755)]);
    unsigned.build_time = 1_792_022_400;
    let mut foreign = PkgSpec::new("strata-foreign-tool", "1.0", "1.el8").files([FileSpec::file(
        "/usr/bin/strata-foreign-tool",
        "y",
        0o755,
    )]);
    foreign.build_time = 1_792_022_400;
    let extra = d.path().join("extra");
    Fixture::build_repo(&extra.join("a"), &[unsigned], Signing::Unsigned).unwrap();
    Fixture::build_repo(&extra.join("b"), &[foreign], Signing::Epel).unwrap();
    let key = f.path(&f.info.release_key.path);
    let m = wrapper(
        d.path(),
        &format!(
            "repos:\n  - id: extra-a\n    baseurl: file://{a}\n    gpgkey: file://{key}\n  - id: extra-b\n    baseurl: file://{b}\n    gpgkey: file://{key}\ninputs:\n  repos: [extra-a, extra-b]\npackages: [strata-unsigned-tool, strata-foreign-tool]\n",
            a = extra.join("a").display(),
            b = extra.join("b").display(),
            key = key.display()
        ),
    );
    let w = d.path().join("w");
    let err = compose_in(&w, &m).unwrap_err();
    let policy = err
        .downcast_ref::<strata_compose::PolicyError>()
        .unwrap_or_else(|| panic!("{err:#}"));
    let got: Vec<(&str, &str, String)> = policy
        .violations
        .iter()
        .map(|v| (v.nevra.as_str(), v.repo.as_str(), v.rule.to_string()))
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, "strata-foreign-tool-1.0-1.el8.x86_64");
    assert_eq!(got[0].1, "extra-b");
    assert!(
        got[0].2.contains(&f.info.epel_key.fingerprint) && got[0].2.contains("inputs.keys"),
        "{got:?}"
    );
    assert_eq!(got[1].0, "strata-unsigned-tool-1.0-1.el8.x86_64");
    assert!(got[1].2.contains("not signed"), "{got:?}");
    assert!(workdir_has_no_build(&w));
}

/// A payload altered after signing (its repodata made again to match, as a
/// mirror could) is caught before anything is installed, naming the
/// package.
#[test]
fn a_payload_altered_after_signing_fails_the_compose_naming_the_package() {
    let _serial = serial();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let mut tool = PkgSpec::new("strata-altered-tool", "1.0", "1.el8").files([FileSpec::file(
        "/usr/bin/strata-altered-tool",
        "payload ".repeat(4096),
        0o755,
    )]);
    tool.build_time = 1_792_022_400;
    // RHEL 8's payload compression: the package cache reads it too.
    tool.xz_payload = true;
    let repo = d.path().join("altered");
    Fixture::build_repo(&repo, &[tool.clone()], Signing::Release).unwrap();
    let rpm = [
        repo.join(tool.file_name()),
        repo.join("Packages").join(tool.file_name()),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap();
    let key = f.path(&f.info.release_key.path);
    let m = wrapper(
        d.path(),
        &format!(
            "repos:\n  - id: altered\n    baseurl: file://{}\n    gpgkey: file://{}\ninputs:\n  repos: [altered]\npackages: [strata-altered-tool]\n",
            repo.display(),
            key.display()
        ),
    );
    // Composed unaltered, the package is remembered as verified. Not the
    // first time: libdnf's checksum check stores librepo's xattrs on the
    // file, which changes its change time, and a file changed in the last
    // 2 s is not remembered.
    compose_in(&d.path().join("first"), &m).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let w = d.path().join("w");
    compose_in(&w, &m).unwrap();
    let remembered = std::fs::read_dir(w.join("cache/verified")).unwrap().count();
    assert!(remembered > 0);
    let (index, cached) = std::fs::read_dir(w.join("cache/packages"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| (p.clone(), std::fs::read_to_string(p).unwrap()))
        .find(|(_, index)| index.contains("strata-altered-tool-1.0-1.el8"))
        .expect("the xz package's index");
    assert!(cached.contains("/usr/bin/strata-altered-tool"), "{cached}");
    // Beside it, the substitute librpm read: xz, as the package.
    let substitute = std::fs::read(index.with_extension("rpm")).unwrap();
    assert!(substitute.windows(6).any(|w| w == b"\xfd7zXZ\0"));
    // ...and altered since, it is verified again.
    let mut bytes = std::fs::read(&rpm).unwrap();
    let at = bytes.len() - 64;
    bytes[at] ^= 0xff;
    // A new file: the repository's may be a link into a shared pool.
    std::fs::remove_file(&rpm).unwrap();
    std::fs::write(&rpm, bytes).unwrap();
    strata_process::run(
        std::process::Command::new("createrepo_c")
            .args(["--quiet", "--update"])
            .arg(&repo),
    )
    .unwrap();
    let err = format!("{:#}", compose_in(&w, &m).unwrap_err());
    assert!(
        err.contains("strata-altered-tool-1.0-1.el8") && err.contains("digest"),
        "{err}"
    );
    let fresh = d.path().join("fresh");
    let err = format!("{:#}", compose_in(&fresh, &m).unwrap_err());
    assert!(err.contains("strata-altered-tool-1.0-1.el8"), "{err}");
    assert!(workdir_has_no_build(&fresh));
}

/// Bad input: one clear error each, and nothing recorded in the workdir.
#[test]
fn bad_input_gives_a_clear_error_and_leaves_the_workdir_alone() {
    let _serial = serial();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let mut conflicting = PkgSpec::new("strata-conflicts-bash", "1.0", "1.el8");
    conflicting
        .conflicts
        .push(strata_testdistro::spec::Dep("bash".into()));
    conflicting.build_time = 1_792_022_400;
    // A package that puts a file under /boot that has no place in a commit.
    let mut stray = PkgSpec::new("strata-boot-stray", "1.0", "1.el8");
    stray
        .files
        .push(FileSpec::file("/boot/stray.img", "x", 0o644));
    stray.build_time = 1_792_022_400;
    let extra = d.path().join("conflicts");
    Fixture::build_repo(&extra, &[conflicting, stray], Signing::Release).unwrap();
    let key = f.path(&f.info.release_key.path);
    let cases: &[(&str, String, &[&str])] = &[
        ("unknown-field", "packagez: [bash]\n".into(), &["manifest.yaml:3:1", "packagez"]),
        ("wrong-type", "recommends: [yes]\n".into(), &["manifest.yaml:3", "recommends"]),
        ("missing-package", "packages: [no-such-package]\n".into(), &["no-such-package", "rhel-8.6-baseos"]),
        (
            "conflict",
            format!(
                "repos:\n  - id: conflicts\n    baseurl: file://{}\n    gpgkey: file://{}\ninputs:\n  repos: [conflicts]\npackages: [strata-conflicts-bash]\n",
                extra.display(),
                key.display()
            ),
            &["strata-conflicts-bash", "bash"],
        ),
        (
            "unplaceable-boot-file",
            format!(
                "repos:\n  - id: conflicts\n    baseurl: file://{}\n    gpgkey: file://{}\ninputs:\n  repos: [conflicts]\npackages: [strata-boot-stray]\n",
                extra.display(),
                key.display()
            ),
            &["/boot/stray.img (package strata-boot-stray-1.0-1.el8.x86_64)"],
        ),
        (
            "unreachable-repo",
            format!(
                "repos:\n  - id: gone\n    baseurl: file:///nonexistent/strata/repo\n    gpgkey: file://{}\ninputs:\n  repos: [gone]\n",
                key.display()
            ),
            &["gone"],
        ),
    ];
    for (name, extra_yaml, expect) in cases {
        let dir = d.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let m = wrapper(&dir, extra_yaml);
        let w = dir.join("w");
        let err = format!("{:#}", compose_in(&w, &m).unwrap_err());
        for e in *expect {
            assert!(err.contains(e), "{name}: {err:?} lacks {e:?}");
        }
        assert!(
            !err.contains('\n') || *name == "conflict",
            "{name}: one line: {err}"
        );
        assert!(
            workdir_has_no_build(&w),
            "{name}: the workdir recorded a build"
        );
    }
}

fn workdir_has_no_build(w: &Path) -> bool {
    let no_history = !w.join("history.json").exists();
    let no_staging = std::fs::read_dir(w.join("tmp"))
        .map(|d| d.count() == 0)
        .unwrap_or(true);
    no_history && no_staging
}

/// The no-op check trusted the build record: after an `ostree prune` of
/// the base commit, or with a layer blob of its image gone, compose said
/// "nothing to do"; a ref an interrupted compose moved stayed where it
/// was. Now the record counts only when what it names is all there, and
/// an unchanged compose puts the ref back on the recorded commit.
#[test]
fn the_no_op_check_repairs_the_ref_and_rebuilds_what_is_gone() {
    let _serial = serial();
    let (dw, r) = demo();
    let w = tempfile::tempdir().unwrap();
    for sub in ["repo", "oci", "builds", "history.json"] {
        run(Command::new("cp")
            .arg("-al")
            .arg(dw.path().join(sub))
            .arg(w.path().join(sub)));
    }
    let repo = format!("--repo={}", w.path().join("repo").display());
    let ostree = |args: &[&str]| run(Command::new("ostree").arg(&repo).args(args));

    // The ref gone (a compose killed between its commit and its record
    // left it elsewhere): an unchanged compose puts it back.
    ostree(&["refs", "--delete", &r.ostree_ref]);
    let again = compose_in(w.path(), &demo_manifest()).unwrap();
    assert!(!again.changed);
    assert_eq!(
        ostree(&["rev-parse", &r.ostree_ref]).trim(),
        r.ostree_commit
    );

    // A layer blob of the recorded image gone: rebuilt, and whole.
    let info = strata_oscontainer::inspect(
        &strata_oscontainer::ImageRef::parse(&r.image, None).unwrap(),
        &Default::default(),
    )
    .unwrap();
    let blob = w
        .path()
        .join("oci/blobs/sha256")
        .join(info.layers[3].digest.trim_start_matches("sha256:"));
    std::fs::remove_file(&blob).unwrap();
    let rebuilt = compose_in(w.path(), &demo_manifest()).unwrap();
    assert!(rebuilt.changed);
    let image = strata_oscontainer::ImageRef::parse(&rebuilt.image, None).unwrap();
    assert_eq!(strata_oscontainer::verify(&image).unwrap(), rebuilt.digest);

    // The commit pruned away: rebuilt, and the ref follows the record.
    ostree(&["refs", "--delete", &r.ostree_ref]);
    ostree(&["prune", "--refs-only", "--depth=0"]);
    assert!(
        Command::new("ostree")
            .arg(&repo)
            .args(["show", &rebuilt.ostree_commit])
            .output()
            .unwrap()
            .status
            .code()
            != Some(0)
    );
    let third = compose_in(w.path(), &demo_manifest()).unwrap();
    assert!(third.changed);
    assert_eq!(
        ostree(&["rev-parse", &r.ostree_ref]).trim(),
        third.ostree_commit
    );
    let fsck = ostree(&["fsck"]);
    assert!(fsck.contains("no errors"), "{fsck}");
}

/// The lockfile's digests and repos were not enforced, only its names: a
/// lockfile naming another file under a package's NEVRA composed. Each
/// mismatch is now named, before anything is installed.
#[test]
fn a_lockfile_whose_digest_or_repo_differs_is_refused_by_name() {
    let _serial = serial();
    let (_, r) = demo();
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&r.lockfile).unwrap()).unwrap();
    let d = tempfile::tempdir().unwrap();
    for (field, value, expect) in [
        (
            "digest",
            format!("sha256:{}", "0".repeat(64)),
            "the lockfile says sha256:000",
        ),
        (
            "repo",
            "epel-8".to_string(),
            "the lockfile says repo epel-8",
        ),
    ] {
        let mut l = lock.clone();
        match field {
            "repo" => l["packages"]["bash"]["metadata"][field] = serde_json::Value::String(value),
            _ => l["packages"]["bash"][field] = serde_json::Value::String(value),
        }
        let path = d.path().join(format!("{field}.json"));
        std::fs::write(&path, serde_json::to_vec(&l).unwrap()).unwrap();
        let w = d.path().join(format!("w-{field}"));
        let err = compose(
            &ComposeOptions::new(demo_manifest(), &w, installer())
                .vars(vars(&fixture()))
                .lockfile(Some(path)),
        )
        .unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("bash-") && text.contains(expect), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert!(workdir_has_no_build(&w));
    }
}

/// A z-stream by overrides, as a release engineer fast-tracks errata: the
/// GA snapshot's lockfile plus an overrides file (coreos-assembler's YAML
/// `manifest-lock.overrides.yaml`) naming the packages the z-stream
/// snapshot changed gives the z-stream snapshot's own compose, commit for
/// commit. Without a lockfile, an override pins a package the manifest
/// installs; a pinned version the repos lack fails naming it.
#[test]
fn overrides_files_pin_packages_over_the_lockfile() {
    let _serial = serial();
    let (_, ga) = demo();
    let f = fixture();
    let zvars = || {
        Vars::from_assignments([
            format!("fixture={}", f.root.display()),
            "snapshot=20261115".to_string(),
        ])
        .unwrap()
    };
    let zw = tempfile::tempdir().unwrap();
    let z = compose(&ComposeOptions::new(demo_manifest(), zw.path(), installer()).vars(zvars()))
        .unwrap();
    let lock = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    let (old, new) = (lock(&ga.lockfile), lock(&z.lockfile));
    let changed: Vec<(String, String)> = new["packages"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, p)| old["packages"][name.as_str()]["evra"] != p["evra"])
        .map(|(name, p)| (name.clone(), p["evra"].as_str().unwrap().to_string()))
        .collect();
    assert!(
        changed.iter().any(|(n, _)| n == "openssl-libs") && changed.len() >= 4,
        "{changed:?}"
    );
    let d = tempfile::tempdir().unwrap();
    let overrides = d.path().join("manifest-lock.overrides.yaml");
    let mut yaml = String::from("packages:\n");
    for (name, evra) in &changed {
        yaml.push_str(&format!(
            "  {name}:\n    evra: {evra}\n    metadata:\n      type: fast-track\n"
        ));
    }
    std::fs::write(&overrides, yaml).unwrap();
    let w = tempfile::tempdir().unwrap();
    let by_overrides = compose(
        &ComposeOptions::new(demo_manifest(), w.path(), installer())
            .vars(zvars())
            .lockfile(Some(ga.lockfile.clone()))
            .overrides(vec![overrides.clone()]),
    )
    .unwrap();
    assert_eq!(by_overrides.ostree_commit, z.ostree_commit);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(by_overrides.build_dir.join("strata.json")).unwrap())
            .unwrap();
    assert_eq!(
        record["tree"]["overrides"].as_object().unwrap().len(),
        changed.len()
    );
    let cosa: serde_json::Value =
        serde_json::from_slice(&std::fs::read(by_overrides.build_dir.join("meta.json")).unwrap())
            .unwrap();
    assert_eq!(cosa["coreos-assembler.overrides-active"], true);

    // No lockfile: a pin to a version the repos lack (the GA snapshot's
    // openssl-libs, gone from the z-stream's) is named.
    let pin = d.path().join("pin.yaml");
    let old_openssl = old["packages"]["openssl-libs"]["evra"].as_str().unwrap();
    std::fs::write(
        &pin,
        format!("packages:\n  openssl-libs:\n    evra: {old_openssl}\n"),
    )
    .unwrap();
    let w = tempfile::tempdir().unwrap();
    let pinned = compose(
        &ComposeOptions::new(demo_manifest(), w.path(), installer())
            .vars(zvars())
            .overrides(vec![pin.clone()]),
    );
    let e = format!("{:#}", pinned.unwrap_err());
    assert!(e.contains("openssl-libs-"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

/// With a lockfile, an override of a package the lockfile does not list
/// was added to the lock and installed, whatever the set needed: an
/// override pins a package of the set and adds none, in both modes, so
/// openvswitch (in the repos, needed by nothing of the demo) is refused
/// naming its file, before anything is installed.
#[test]
fn with_a_lockfile_an_override_for_a_package_outside_the_set_is_refused() {
    let _serial = serial();
    let (_, ga) = demo();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let overrides = d.path().join("manifest-lock.overrides.yaml");
    std::fs::write(
        &overrides,
        "packages:\n  openvswitch:\n    evra: 2.17.0-1.el8.x86_64\n",
    )
    .unwrap();
    let w = tempfile::tempdir().unwrap();
    let e = compose(
        &ComposeOptions::new(demo_manifest(), w.path(), installer())
            .vars(vars(&f))
            .lockfile(Some(ga.lockfile.clone()))
            .overrides(vec![overrides.clone()]),
    )
    .unwrap_err();
    assert_eq!(
        format!("{e:#}"),
        format!(
            "{}: override openvswitch: no package of that name is in the package set (it would pin nothing); remove the entry or add the package to the manifest's packages",
            overrides.display()
        )
    );
    assert!(workdir_has_no_build(w.path()));
}

/// The z-stream composed in the GA build's workdir: a client holding the
/// GA image downloads the commit layer, the content compose generated
/// (rpmdb, os-release: "unpackaged"), the initramfs (it copies the
/// rebuilt glibc) and one layer for each package whose files changed,
/// holding nothing else. The fixture's z-stream kernel differs from GA's
/// by its image only (docs/fixture.md): kernel-core's layer changes,
/// kernel-modules' keeps its bytes.
#[test]
fn a_zstream_downloads_only_the_layers_of_what_it_changed_and_gives_a_cold_composes_bytes() {
    let _serial = serial();
    let (shared, ga) = demo();
    let f = fixture();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("work");
    run(Command::new("cp").arg("-a").arg(shared.path()).arg(&w));
    let vars = Vars::from_assignments([
        format!("fixture={}", f.root.display()),
        "snapshot=20261115".to_string(),
    ])
    .unwrap();
    let z = compose(
        &ComposeOptions::new(demo_manifest(), &w, installer())
            .vars(vars.clone())
            .source_date_epoch(None),
    )
    .unwrap();
    assert!(z.changed);
    let image = |r: &ComposeResult| strata_oscontainer::ImageRef::parse(&r.image, None).unwrap();
    let diff = strata_oscontainer::diff(
        &image(ga),
        &image(&z),
        &strata_oscontainer::TransportOptions::default(),
    )
    .unwrap();
    let changed: Vec<&str> = diff
        .packages_changed
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        changed,
        [
            "glibc",
            "kernel",
            "kernel-core",
            "kernel-modules",
            "openssl-libs",
            "sudo"
        ]
    );
    let downloaded: std::collections::BTreeSet<Vec<String>> = diff
        .layers_added
        .iter()
        .map(|l| l.components.clone())
        .collect();
    let want: std::collections::BTreeSet<Vec<String>> = [
        &[][..],
        &["unpackaged"],
        &["initramfs"],
        &["kernel-core"],
        &["glibc"],
        &["openssl-libs"],
        &["sudo"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(downloaded, want, "{:#?}", diff.layers_added);

    // What the update reused (the previous build's accounts, its layers, its
    // initramfs if unchanged) leaves no trace: a cold compose of the same
    // set in a fresh workdir gives the same commit and the same layers. Their
    // order is the layer map's, which the update keeps from the build before
    // it (an input, as the previous build's accounts are): a cold compose
    // orders the layers by the z-stream set's own weights.
    let cold_dir = tempfile::tempdir().unwrap();
    let cold = compose(
        &ComposeOptions::new(demo_manifest(), cold_dir.path(), installer())
            .vars(vars)
            .source_date_epoch(None),
    )
    .unwrap();
    assert_eq!(cold.version, z.version);
    assert_eq!(cold.ostree_commit, z.ostree_commit);
    let same = strata_oscontainer::diff(
        &image(&cold),
        &image(&z),
        &strata_oscontainer::TransportOptions::default(),
    )
    .unwrap();
    assert!(
        same.layers_added.is_empty() && same.layers_removed.is_empty(),
        "{same:#?}"
    );
}

/// The package cache links the repository's own objects into the staging
/// tree. A file a script changes in place there (appended to, its mode
/// changed) is committed as changed, and the objects earlier commits hold
/// stay whole.
#[test]
fn a_cached_file_a_script_changes_in_place_is_committed_changed_and_earlier_commits_keep_theirs() {
    let _serial = serial();
    let (shared, demo) = demo();
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("work");
    run(Command::new("cp").arg("-a").arg(shared.path()).arg(&w));
    let repo = format!("--repo={}", w.join("repo").display());
    let (appended, chmodded) = ("/usr/share/awk/assert.awk", "/usr/share/awk/ord.awk");
    let cat = |commit: &str| run(Command::new("ostree").args([&repo, "cat", commit, appended]));
    let mode = |commit: &str| {
        let line = run(Command::new("ostree").args([&repo, "ls", commit, chmodded]));
        line.split_whitespace().next().unwrap().to_string()
    };
    let before = cat(&demo.ostree_commit);
    let m = wrapper(
        d.path(),
        &format!(
            "postprocess:\n  - |\n    echo appended >> {appended}\n    chmod 0600 {chmodded}\n"
        ),
    );
    let r = compose_in(&w, &m).unwrap();
    assert_eq!(cat(&r.ostree_commit), format!("{before}appended\n"));
    assert_eq!(mode(&r.ostree_commit), "-00600");
    assert_eq!(cat(&demo.ostree_commit), before);
    assert_eq!(mode(&demo.ostree_commit), "-00644");
    run(Command::new("ostree").args([&repo, "fsck"]));
}

/// With `documentation: false` librpm leaves each package's documentation
/// out, files and directories: the package cache makes none of them either.
#[test]
fn without_documentation_no_documentation_directory_is_made() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let m = wrapper(d.path(), "documentation: false\n");
    let w = d.path().join("work");
    let r = compose_in(&w, &m).unwrap();
    let listed = run(Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["ls", "-R", &r.ostree_commit, "/usr/share/doc"]));
    let entries: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(entries, ["/usr/share/doc"], "{listed}");
}

/// `manifest`'s own `packages:` block with its names in reverse order (one
/// a line): the same set, listed otherwise.
fn packages_reversed(manifest: &str) -> String {
    let mut out = String::new();
    let mut lines = manifest.lines().peekable();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if line != "packages:" {
            continue;
        }
        let mut names = Vec::new();
        while let Some(l) = lines.next_if(|l| l.starts_with("  -") || l.starts_with("  #")) {
            if let Some(entry) = l.strip_prefix("  -") {
                names.extend(entry.split_whitespace().map(str::to_string));
            }
        }
        assert!(names.len() > 1, "a packages block in {manifest}");
        for name in names.iter().rev() {
            out.push_str(&format!("  - {name}\n"));
        }
    }
    out
}

/// The input hash changed with the order of the package names, so the
/// same manifest with its list written in another order built again. A
/// package list is a set: the same build, no work.
#[test]
fn a_reordered_package_list_is_the_same_build() {
    let _serial = serial();
    let (shared, r) = demo();
    let d = tempfile::tempdir().unwrap();
    let manifests = d.path().join("demo");
    run(Command::new("cp")
        .arg("-a")
        .arg(demo_manifest().parent().unwrap())
        .arg(&manifests));
    let reordered = manifests.join("rhel-8.6.yaml");
    let text = std::fs::read_to_string(&reordered).unwrap();
    std::fs::write(&reordered, packages_reversed(&text)).unwrap();
    // A workdir of its own (hard links: objects and blobs are immutable,
    // the records are replaced, not written through).
    let w = d.path().join("work");
    std::fs::create_dir(&w).unwrap();
    for sub in ["repo", "oci", "builds", "history.json"] {
        run(Command::new("cp")
            .arg("-al")
            .arg(shared.path().join(sub))
            .arg(w.join(sub)));
    }
    let again = compose_in(&w, &reordered).unwrap();
    assert!(!again.changed, "a reordered package list rebuilt the base");
    assert_eq!(again.inputhash, r.inputhash);
    assert_eq!((&again.version, &again.digest), (&r.version, &r.digest));
}
