//! The disk stage on the demo base composed from the fixture distribution,
//! checked with the reference tools (sfdisk --json, fsck.ext4, fsck.vfat,
//! debugfs, mtools, coreos-stream-metadata) and booted under qemu with UEFI
//! and with BIOS.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use strata_disk::{build, DiskOptions, DiskResult};

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/strata-disk-tests")
}

fn worker() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata-disk-worker"))
}

fn run(cmd: &mut Command) -> String {
    strata_process::stdout(cmd).unwrap_or_else(|e| panic!("{e}"))
}

const OCP_VERSION: &str = "413.86.202610150000-0";

/// Where the test's 4.13 image would be published: what its disks name.
const TARGET: &str = "docker://registry.example.com/rhel-coreos:4.13";

/// The demo base composed into a workdir kept under target/ (compose is a
/// no-op when its inputs are unchanged; locked across test processes), and
/// an OpenShift 4.13 image derived from it: one layer with the derived
/// os-release and the labels derive sets. Returns the workdir and the tags
/// of the base and the derived image.
fn workdir() -> &'static (PathBuf, String, String) {
    static W: OnceLock<(PathBuf, String, String)> = OnceLock::new();
    W.get_or_init(|| {
        let dir = target();
        std::fs::create_dir_all(&dir).unwrap();
        let lock = std::fs::File::create(dir.join(".lock")).unwrap();
        lock.lock().unwrap();
        strata_testdistro::require_root(
            "the base image is composed (RPM scriptlets in a chroot) and the disks built as root and as other users",
        );
        let fixture = strata_testdistro::Fixture::for_tests().expect("fixture");
        let vars = strata_manifest::Vars::from_assignments([format!(
            "fixture={}",
            fixture.root.display()
        )])
        .unwrap();
        let manifest =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/demo/rhel-8.6.yaml");
        let w = dir.canonicalize().unwrap().join("work");
        let r = strata_compose::compose(
            &strata_compose::ComposeOptions::new(
                &manifest,
                &w,
                strata_process::worker::Worker::new(env!("CARGO_BIN_EXE_strata-disk-worker"))
                    .arg("install"),
            )
                .vars(vars)
                .source_date_epoch(None),
        )
        .expect("composing the demo base");
        let base = r.image.rsplit(':').next().unwrap().to_string();

        let layer = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(layer.path().join("usr/lib")).unwrap();
        std::fs::write(
            layer.path().join("usr/lib/os-release"),
            format!(
                "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\n\
                 VERSION=\"{OCP_VERSION}\"\nVERSION_ID=\"4.13\"\n\
                 OPENSHIFT_VERSION=\"4.13\"\nRHEL_VERSION=\"8.6\"\n\
                 PRETTY_NAME=\"Red Hat Enterprise Linux CoreOS {OCP_VERSION} (Ootpa)\"\n"
            ),
        )
        .unwrap();
        let mut opts = strata_oscontainer::DeriveOptions::default();
        for (k, v) in [
            ("org.opencontainers.image.version", OCP_VERSION),
            ("com.coreos.openshift-version", "4.13"),
        ] {
            opts.labels.insert(k.into(), v.into());
        }
        let derived = "ocp-4.13-disk-test".to_string();
        strata_oscontainer::append_layers(
            &w.join("oci"),
            &base,
            &derived,
            &[strata_oscontainer::DerivedLayer::new(
                layer.path(),
                "ocp-4.13 os-release",
            )],
            &opts,
        )
        .expect("deriving the 4.13 image");
        (w, base, derived)
    })
}

/// qemu, metal, metal4k and the live media of the derived 4.13 image,
/// built once.
fn built() -> &'static DiskResult {
    static R: OnceLock<DiskResult> = OnceLock::new();
    R.get_or_init(|| {
        let (w, _, tag) = workdir();
        let platforms = ["qemu", "metal", "metal4k", "live"]
            .map(String::from)
            .to_vec();
        let t = std::time::Instant::now();
        let r = build(
            &DiskOptions::new(w, tag.as_str(), platforms, worker())
                .target_image(Some(TARGET.into())),
        )
        .unwrap();
        eprintln!("disk build (3 platforms and live): {:?}", t.elapsed());
        r
    })
}

fn artifact(platform: &str) -> &'static strata_disk::Artifact {
    built()
        .artifacts
        .iter()
        .find(|a| a.platform == platform)
        .unwrap()
}

/// Copies `size` bytes at `offset` of `disk` into a file of their own.
fn extract(disk: &Path, offset: u64, size: u64, out: &Path) {
    let src = std::fs::File::open(disk).unwrap();
    let dst = std::fs::File::create(out).unwrap();
    dst.set_len(size).unwrap();
    let mut buf = vec![0u8; 4 << 20];
    let mut done = 0;
    while done < size {
        let n = buf.len().min((size - done) as usize);
        src.read_exact_at(&mut buf[..n], offset + done).unwrap();
        if buf[..n].iter().any(|b| *b != 0) {
            dst.write_all_at(&buf[..n], done).unwrap();
        }
        done += n as u64;
    }
}

#[test]
fn layout_filesystems_and_metadata() {
    let r = built();
    let metal = artifact("metal");
    assert_eq!(
        metal.path.file_name().unwrap().to_str().unwrap(),
        format!("rhcos-{}-metal.x86_64.raw", r.version)
    );
    assert!(artifact("qemu")
        .path
        .to_str()
        .unwrap()
        .ends_with("-qemu.x86_64.qcow2"));

    let json: serde_json::Value =
        serde_json::from_str(&run(Command::new("sfdisk").arg("--json").arg(&metal.path))).unwrap();
    let table = &json["partitiontable"];
    assert_eq!(table["label"], "gpt");
    let parts = table["partitions"].as_array().unwrap();
    let want = [
        (
            "BIOS-BOOT",
            "21686148-6449-6E6F-744E-656564454649",
            Some(2048),
        ),
        (
            "EFI-SYSTEM",
            "C12A7328-F81F-11D2-BA4B-00A0C93EC93B",
            Some(127 * 2048),
        ),
        (
            "boot",
            "BC13C2FF-59E6-4262-A352-B275FD6F7172",
            Some(384 * 2048),
        ),
        ("root", "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", None),
    ];
    assert_eq!(parts.len(), 4);
    for (p, (name, ty, size)) in parts.iter().zip(want) {
        assert_eq!(p["name"], name);
        assert_eq!(p["type"], ty);
        if let Some(size) = size {
            assert_eq!(p["size"], size, "{name}");
        }
    }
    assert_eq!(parts[0]["start"], 2048);

    // Each filesystem, extracted, passes its fsck.
    let scratch = tempfile::tempdir().unwrap();
    let part = |i: usize| {
        let start = parts[i]["start"].as_u64().unwrap() * 512;
        let size = parts[i]["size"].as_u64().unwrap() * 512;
        let out = scratch.path().join(format!("p{}", i + 1));
        extract(&metal.path, start, size, &out);
        out
    };
    let (esp, boot, root) = (part(1), part(2), part(3));
    let debugfs = |fs: &Path, req: &str| run(Command::new("debugfs").arg("-R").arg(req).arg(fs));
    run(Command::new("fsck.vfat").arg("-n").arg(&esp));
    run(Command::new("fsck.ext4").arg("-fn").arg(&boot));
    run(Command::new("fsck.ext4").arg("-fn").arg(&root));
    let efi = run(Command::new("mdir")
        .arg("-i")
        .arg(&esp)
        .arg("::/EFI/BOOT")
        .env("MTOOLS_SKIP_CHECK", "1"));
    assert!(efi.contains("BOOTX64  EFI"), "{efi}");
    assert!(efi.contains("fbx64    efi"), "{efi}");
    // RHEL's vendor directory: shim, GRUB, and the stub that sends GRUB
    // to the boot partition.
    let mtype = |file: &str| {
        run(Command::new("mtype")
            .arg("-i")
            .arg(&esp)
            .arg(format!("::/EFI/redhat/{file}"))
            .env("MTOOLS_SKIP_CHECK", "1"))
    };
    assert!(mtype("grub.cfg").contains("search --label boot --set prefix"));
    let vendor = run(Command::new("mdir")
        .arg("-i")
        .arg(&esp)
        .arg("::/EFI/redhat")
        .env("MTOOLS_SKIP_CHECK", "1"));
    for f in ["shimx64  efi", "grubx64  efi", "BOOTX64  CSV"] {
        assert!(vendor.contains(f), "{f}: {vendor}");
    }
    // BIOS GRUB's modules, which core.img's prefix points at.
    let modules = debugfs(&boot, "ls -l /grub2/i386-pc");
    for f in ["normal.mod", "linux.mod", "moddep.lst"] {
        assert!(modules.contains(f), "{f}: {modules}");
    }

    // The aleph file and the boot configuration carry the version.
    let aleph: serde_json::Value =
        serde_json::from_str(&debugfs(&root, "cat /.coreos-aleph-version.json")).unwrap();
    assert_eq!(aleph["version"], r.version.as_str());
    assert_eq!(aleph["build"], r.version.as_str());
    assert_eq!(aleph["ostree-commit"], r.ostree_commit.as_str());
    assert_eq!(aleph["container-image"]["image-digest"], r.digest.as_str());
    assert_eq!(aleph["openshift-version"], "4.13");
    assert_eq!(aleph["container-image"]["image-name"], TARGET);
    let origin = debugfs(
        &root,
        &format!(
            "cat /ostree/deploy/rhcos/deploy/{}.0.origin",
            r.ostree_commit
        ),
    );
    assert!(
        origin.contains(
            "container-image-reference=ostree-unverified-registry:registry.example.com/rhel-coreos:4.13"
        ),
        "{origin}"
    );
    // The node's repository configuration: ostree writes BLS entries only
    // (the menu reads them), and the node's updates are synced to disk.
    let config = debugfs(&root, "cat /ostree/repo/config");
    assert!(config.contains("\nbootloader=none\n"), "{config}");
    assert!(config.contains("\nreadonly=true\n"), "{config}");
    assert!(!config.contains("fsync"), "{config}");
    assert_eq!(r.version, OCP_VERSION);
    assert_eq!(r.openshift_version.as_deref(), Some("4.13"));
    assert_eq!(r.stream, "ocp-4.13");
    // The image's GRUB (2.14, like RHEL's) reads the BLS entries itself:
    // the menu is whatever ostree last wrote, never a fixed list.
    let grub = debugfs(&boot, "cat /grub2/grub.cfg");
    assert!(grub.ends_with("blscfg\n"), "{grub}");
    assert!(!grub.contains("menuentry"), "{grub}");
    let entries = debugfs(&boot, "ls -p /loader.1/entries");
    assert!(entries.contains("ostree-1-rhcos.conf"), "{entries}");
    let entry = debugfs(&boot, "cat /loader.1/entries/ostree-1-rhcos.conf");
    assert!(
        entry.starts_with(&format!(
            "title Red Hat Enterprise Linux CoreOS {OCP_VERSION} (OpenShift 4.13) (ostree:0)\n"
        )),
        "{entry}"
    );
    assert!(entry.contains(" rw $ignition_firstboot "), "{entry}");
    assert!(
        entry.contains("ignition.platform.id=metal console=tty0 console=ttyS0,115200n8\n"),
        "{entry}"
    );
    let platforms: serde_json::Value =
        serde_json::from_str(&debugfs(&boot, "cat /coreos/platforms.json")).unwrap();
    assert_eq!(platforms["metal"]["version"], r.version.as_str());

    // metal4k: a GPT at 4096 bytes, the root filesystem where 4K sectors put it.
    let k4 = std::fs::File::open(&artifact("metal4k").path).unwrap();
    let mut sig = [0u8; 8];
    k4.read_exact_at(&mut sig, 4096).unwrap();
    assert_eq!(&sig, b"EFI PART");

    // Metadata: meta.json images (by coreos-assembler's schema rules, the
    // image as an OCI archive beside the disks), stream metadata that the
    // format's parser reads.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        strata_workdir::record::check_cosa_meta(&meta),
        Vec::<String>::new(),
        "{meta:#}"
    );
    assert_eq!(meta["images"]["metal"]["sha256"], metal.sha256.as_str());
    let archive = &meta["images"]["ostree"];
    assert_eq!(
        archive["path"],
        r.oci_archive.path.file_name().unwrap().to_str().unwrap()
    );
    assert!(r.oci_archive.path.is_file());
    // The recorded digest is the file's (hashed partly while it was written).
    for a in &r.artifacts {
        let sum = run(Command::new("sha256sum").arg(&a.path));
        assert_eq!(
            sum.split_whitespace().next(),
            Some(a.sha256.as_str()),
            "{}",
            a.platform
        );
    }
    assert_eq!(meta["images"]["qemu"]["size"], artifact("qemu").size);
    let stream: coreos_stream_metadata::Stream =
        serde_json::from_slice(&std::fs::read(&r.stream_json).unwrap()).unwrap();
    // Named as the installer names its streams.
    assert_eq!(stream.stream, "rhcos-4.13");
    let x86 = &stream.architectures["x86_64"];
    let qcow = &x86.artifacts["qemu"].formats["qcow2"]["disk"];
    assert_eq!(qcow.sha256, artifact("qemu").sha256);
    assert_eq!(
        x86.artifacts["metal"].formats["4k.raw"]["disk"].sha256,
        artifact("metal4k").sha256
    );
}

fn boot(firmware: strata_testdistro::boot::Firmware, platform: &str) {
    let a = artifact(platform);
    let mut spec = strata_testdistro::boot::BootSpec::new(firmware, &a.path);
    spec.disk_format = a.format.clone();
    spec.timeout = std::time::Duration::from_secs(240);
    let res = strata_testdistro::boot::boot(&spec).unwrap();
    eprintln!("{platform}: {} in {:?}", res.marker, res.elapsed);
    assert_eq!(
        res.marker,
        // The test's release layer is os-release alone: no kubelet. A new
        // disk boots the first time: GRUB finds the boot partition's
        // ignition.firstboot stamp.
        format!(
            "STRATA-BOOT-OK version={OCP_VERSION} openshift=4.13 init=systemd kubelet=no crio=no firstboot=yes var=stateroot"
        )
    );
}

/// What `strata node` refuses leaves the disk as it was: a disk with no
/// rollback deployment, an image that is not a raw disk.
#[test]
fn node_refusals_name_the_problem_and_change_nothing() {
    let dir = target().join("node-refusals");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let disk = dir.join("metal.raw");
    let copied = Command::new("cp")
        .arg("--sparse=always")
        .arg(&artifact("metal").path)
        .arg(&disk)
        .status()
        .unwrap();
    assert!(copied.success());
    let before = std::fs::read(&disk).unwrap();
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(err.contains("no rollback deployment"), "{err}");
    assert!(std::fs::read(&disk).unwrap() == before, "the disk changed");

    // A repository that leads out of the disk is refused before libostree
    // opens it (debugfs rewrites the copy's root filesystem).
    let parts = strata_disk::node::partitions(&disk).unwrap();
    let root = parts.iter().find(|p| p.name == "root").unwrap().offset;
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg("unlink /ostree/repo")
        .arg(format!("{}?offset={root}", disk.display())));
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg("symlink /ostree/repo /etc")
        .arg(format!("{}?offset={root}", disk.display())));
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(
        err.contains("/ostree/repo is not a directory of the disk"),
        "{err}"
    );

    let qcow = &artifact("qemu").path;
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(qcow, worker()).unwrap_err()
    );
    assert!(
        err.contains("qcow2") && err.contains("qemu-img convert"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A copy of the metal disk in a directory of its own under target/.
fn disk_copy(name: &str) -> (PathBuf, PathBuf) {
    let dir = target().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // As errors and processes name it.
    let dir = dir.canonicalize().unwrap();
    let disk = dir.join("metal.raw");
    let copied = Command::new("cp")
        .arg("--sparse=always")
        .arg(&artifact("metal").path)
        .arg(&disk)
        .status()
        .unwrap();
    assert!(copied.success());
    (dir, disk)
}

/// The byte offset of the partition named `name`.
fn partition(disk: &Path, name: &str) -> u64 {
    let parts = strata_disk::node::partitions(disk).unwrap();
    parts.iter().find(|p| p.name == name).unwrap().offset
}

/// Runs `script` (debugfs commands, one a line) on the filesystem at
/// `offset` of `disk`, for writing.
fn debugfs(disk: &Path, offset: u64, script: &str) {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), script).unwrap();
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(f.path())
        .arg(format!("{}?offset={offset}", disk.display())));
}

/// The names in the directory `dir` of the filesystem at `offset`.
fn debugfs_names(disk: &Path, offset: u64, dir: &str) -> Vec<String> {
    let out = run(Command::new("debugfs")
        .arg("-R")
        .arg(format!("ls -p {dir}"))
        .arg(format!("{}?offset={offset}", disk.display())));
    out.lines()
        .filter_map(|l| l.split('/').nth(5))
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .map(str::to_string)
        .collect()
}

/// Every path below `dir` with its bytes (a file's content, a link's
/// target; nothing for a directory): what "unchanged" compares.
fn tree_bytes(dir: &Path) -> std::collections::BTreeMap<PathBuf, Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            let bytes = if t.is_dir() {
                todo.push(p.clone());
                None
            } else if t.is_symlink() {
                Some(
                    std::fs::read_link(&p)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                )
            } else {
                Some(std::fs::read(&p).unwrap())
            };
            out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), bytes);
        }
    }
    out
}

/// Runs `f` on a thread of its own; its value, or a panic after `secs`:
/// a hang fails the test instead of stopping the suite.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what} did not end within {secs} s"))
}

/// A disk whose directories are links out of it (absolute, or `../`
/// enough to climb out) is refused, naming the disk and the link, before
/// anything is written: the host directory the links name stays as it
/// was, byte for byte. The same disk, its links taken away, updates and
/// rolls back.
#[test]
fn node_refuses_a_disk_whose_directories_link_out_of_it() {
    let (w, base, _) = workdir();
    let (dir, disk) = disk_copy("node-links");
    // Two deployments, so that a rollback has something to write.
    let state = strata_disk::node::update(
        w,
        base,
        &disk,
        &strata_oscontainer::TransportOptions::default(),
        worker(),
    )
    .unwrap();
    assert_eq!(state.deployments.len(), 2, "{state:?}");
    let (root, boot) = (partition(&disk, "root"), partition(&disk, "boot"));

    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(host.path().join("entries")).unwrap();
    std::fs::write(host.path().join("secret"), b"the host's\n").unwrap();
    std::fs::write(host.path().join("entries/a.conf"), b"title host\n").unwrap();
    let before = tree_bytes(host.path());
    let absolute = host.path().to_str().unwrap().to_string();
    let relative = format!("{}{}", "../".repeat(12), &absolute[1..]);

    let os = debugfs_names(&disk, root, "/ostree/deploy");
    assert_eq!(os.len(), 1, "{os:?}");
    let os = &os[0];
    let deployment = debugfs_names(&disk, root, &format!("/ostree/deploy/{os}/deploy"))
        .into_iter()
        .find(|n| !n.ends_with(".origin"))
        .unwrap();
    let loader = run(Command::new("debugfs")
        .arg("-R")
        .arg("stat /loader")
        .arg(format!("{}?offset={boot}", disk.display())));
    let (current, other) = if loader.contains("\"loader.0\"") {
        ("loader.0", "loader.1")
    } else {
        ("loader.1", "loader.0")
    };

    // (filesystem, directory, name, target, also refused by an update)
    let cases = [
        (root, "/ostree/repo".to_string(), "tmp", &absolute, false),
        (
            root,
            format!("/ostree/deploy/{os}"),
            "deploy",
            &relative,
            true,
        ),
        (
            root,
            format!("/ostree/deploy/{os}/deploy/{deployment}"),
            "etc",
            &absolute,
            true,
        ),
        (boot, String::new(), current, &relative, false),
        (boot, String::new(), other, &absolute, false),
        (boot, String::new(), "ostree", &absolute, false),
    ];
    for (fs, parent, name, target, update_too) in cases {
        let path = format!("{parent}/{name}");
        let shown = if fs == boot {
            format!("/boot{path}")
        } else {
            path.clone()
        };
        let exists = debugfs_names(&disk, fs, if parent.is_empty() { "/" } else { &parent })
            .iter()
            .any(|n| n == name);
        let aside = format!("{path}.aside");
        if exists {
            debugfs(&disk, fs, &format!("ln {path} {aside}\nunlink {path}\n"));
        }
        debugfs(&disk, fs, &format!("symlink {path} {target}\n"));
        let mut errors = vec![format!(
            "{:#}",
            strata_disk::node::rollback(&disk, worker()).unwrap_err()
        )];
        if update_too {
            errors.push(format!(
                "{:#}",
                strata_disk::node::update(
                    w,
                    base,
                    &disk,
                    &strata_oscontainer::TransportOptions::default(),
                    worker(),
                )
                .unwrap_err()
            ));
        }
        for err in errors {
            assert!(
                err.contains(&format!("{shown} is not a directory of the disk"))
                    && err.contains(disk.to_str().unwrap())
                    && !err.contains('\n'),
                "{shown}: {err}"
            );
        }
        assert_eq!(tree_bytes(host.path()), before, "{shown}: the host changed");
        debugfs(&disk, fs, &format!("unlink {path}\n"));
        if exists {
            debugfs(&disk, fs, &format!("ln {aside} {path}\nunlink {aside}\n"));
        }
    }

    // A link ostree makes, pointing elsewhere than ostree puts it.
    debugfs(&disk, boot, "unlink /loader\nsymlink /loader ../loader.0\n");
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(err.contains("/loader points at ../loader.0"), "{err}");
    debugfs(
        &disk,
        boot,
        &format!("unlink /loader\nsymlink /loader {current}\n"),
    );

    let rolled = strata_disk::node::rollback(&disk, worker()).unwrap();
    let commits = |s: &strata_disk::node::NodeState| {
        s.deployments
            .iter()
            .map(|d| d.commit.clone())
            .collect::<Vec<_>>()
    };
    let mut swapped = commits(&state);
    swapped.swap(0, 1);
    assert_eq!(commits(&rolled), swapped);
    assert_eq!(tree_bytes(host.path()), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A disk whose partition names are swapped (the boot filesystem named
/// "root", the root one "boot"), or given twice, is refused by name, in
/// bounded time, without opening one filesystem through the other's links.
#[test]
fn node_refuses_swapped_partition_names_without_hanging() {
    let (dir, disk) = disk_copy("node-swapped");
    let parts = strata_disk::node::partitions(&disk).unwrap();
    let number = |name: &str| 1 + parts.iter().position(|p| p.name == name).unwrap();
    let (root, boot) = (number("root"), number("boot"));
    let label = |n: usize, name: &str| {
        run(Command::new("sfdisk")
            .arg("--part-label")
            .arg(&disk)
            .arg(n.to_string())
            .arg(name));
    };
    label(root, "boot");
    label(boot, "root");
    let d = disk.clone();
    let err = within(300, "a rollback of a disk with swapped names", move || {
        format!(
            "{:#}",
            strata_disk::node::rollback(&d, worker()).unwrap_err()
        )
    });
    assert!(
        err.contains("the partition named \"root\" is not an ostree root filesystem")
            && err.contains(disk.to_str().unwrap())
            && !err.contains('\n'),
        "{err}"
    );
    label(root, "root");
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(
        err.contains("more than one partition named \"root\""),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FIFO or a device given as the disk is refused by name at once: never
/// opened for real (a FIFO without a writer would be waited on forever).
#[test]
fn node_refuses_a_fifo_or_a_device_as_the_disk_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("disk.raw");
    run(Command::new("mkfifo").arg(&fifo));
    for (disk, kind) in [
        (fifo, "a FIFO"),
        (PathBuf::from("/dev/null"), "a character device"),
    ] {
        let d = disk.clone();
        let err = within(30, "a rollback of a FIFO or a device", move || {
            format!(
                "{:#}",
                strata_disk::node::rollback(&d, worker()).unwrap_err()
            )
        });
        assert!(
            err.contains(disk.to_str().unwrap()) && err.contains(kind) && !err.contains('\n'),
            "{err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing made beside the FIFO"
    );
}

/// The fuse2fs processes holding `disk` open.
fn fuse2fs_of(disk: &Path) -> Vec<u32> {
    let needle = disk.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        // fuse2fs itself, not the setpriv about to become it.
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "fuse2fs")
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

fn scratch_beside(disk: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(disk.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".strata-node-"))
        .map(|e| e.path())
        .collect()
}

/// A rollback killed mid-way leaves no fuse2fs behind, and what it left
/// beside the disk the next run removes; a live run's scratch it leaves.
#[test]
fn node_killed_rollback_leaves_nothing_the_next_run_keeps() {
    let (dir, disk) = disk_copy("node-killed");
    // Killed while its fuse2fs is stopped (so that it is surely mid-way).
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata-disk-worker"))
            .arg("rollback")
            .arg(&disk)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let pid = loop {
            if let Some(pid) = fuse2fs_of(&disk).first() {
                break Some(*pid);
            }
            if child.try_wait().unwrap().is_some() {
                break None;
            }
            assert!(
                started.elapsed().as_secs() < 120,
                "the rollback never opened the disk"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .arg("-STOP")
                .arg(pid.to_string())
                .status();
        }
        let mid_way = child.try_wait().unwrap().is_none();
        child.kill().unwrap();
        child.wait().unwrap();
        // Going on, it finds its worker gone, or is killed with it.
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(pid.to_string())
                .status();
        }
        if mid_way {
            break;
        }
        assert!(
            attempts < 5,
            "the rollback always ended before it was killed"
        );
        for left in scratch_beside(&disk) {
            std::fs::remove_dir_all(left).unwrap();
        }
    }
    assert_eq!(scratch_beside(&disk).len(), 1, "the killed run's scratch");
    let killed = std::time::Instant::now();
    while !fuse2fs_of(&disk).is_empty() {
        assert!(
            killed.elapsed().as_secs() < 30,
            "fuse2fs outlived the rollback"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // A live run's scratch (locked) stays.
    let live = dir.join(".strata-node-live");
    std::fs::create_dir(&live).unwrap();
    let lock = std::fs::File::open(&live).unwrap();
    lock.lock().unwrap();
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(err.contains("no rollback deployment"), "{err}");
    assert_eq!(scratch_beside(&disk), [live]);
    drop(lock);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A copy of the metal disk updated to the base image: the commit an
/// update deploys.
fn update_commit(name: &str) -> String {
    let (w, base, _) = workdir();
    let (dir, disk) = disk_copy(name);
    let state = strata_disk::node::update(
        w,
        base,
        &disk,
        &strata_oscontainer::TransportOptions::default(),
        worker(),
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    state.deployments[0].commit.clone()
}

/// A disk whose repository holds, under the name of an object of the
/// commit an update deploys, other content is refused before anything is
/// written: a pull would keep the disk's object, and libostree deploy
/// (and run) the disk's own tree.
#[test]
fn node_update_refuses_a_disk_holding_other_content_under_the_new_commits_names() {
    let (w, base, _) = workdir();
    let commit = update_commit("node-planted-clean");
    let listing = run(Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["ls", "-R", "-C"])
        .arg(&commit)
        .arg("/usr"));
    let (dir, disk) = disk_copy("node-planted");
    let root = partition(&disk, "root");
    let object_path = |c: &str| format!("/ostree/repo/objects/{}/{}.file", &c[..2], &c[2..]);
    // A file object the disk's repository already has (its directory
    // there too).
    let object = listing
        .lines()
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split_whitespace())
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .find(|c| {
            !run(Command::new("debugfs")
                .arg("-R")
                .arg(format!("stat {}", object_path(c)))
                .arg(format!("{}?offset={root}", disk.display())))
            .trim()
            .is_empty()
        })
        .unwrap_or_else(|| panic!("no file of {commit}'s /usr on the disk: {listing}"))
        .to_string();
    let planted = dir.join("planted");
    std::fs::write(&planted, b"#!/bin/sh\necho the disk's own\n").unwrap();
    let path = object_path(&object);
    debugfs(
        &disk,
        root,
        &format!("rm {path}\nwrite {} {path}\n", planted.display()),
    );
    let before = std::fs::read(&disk).unwrap();
    let err = format!(
        "{:#}",
        strata_disk::node::update(
            w,
            base,
            &disk,
            &strata_oscontainer::TransportOptions::default(),
            worker(),
        )
        .unwrap_err()
    );
    assert!(
        err.contains(&format!(
            "the disk's repository holds file {object} with other content than its name says"
        )) && err.contains(disk.to_str().unwrap())
            && !err.contains('\n'),
        "{err}"
    );
    assert!(std::fs::read(&disk).unwrap() == before, "the disk changed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FIFO where libostree reads a file (a deployment's origin, a BLS
/// entry) is refused by name at once: libostree would wait on it forever.
#[test]
fn node_refuses_a_fifo_where_libostree_reads_a_file_without_hanging() {
    let (dir, disk) = disk_copy("node-fifo-files");
    let (root, boot) = (partition(&disk, "root"), partition(&disk, "boot"));
    let os = debugfs_names(&disk, root, "/ostree/deploy").remove(0);
    let deploy = format!("/ostree/deploy/{os}/deploy");
    let origin = debugfs_names(&disk, root, &deploy)
        .into_iter()
        .find(|n| n.ends_with(".origin"))
        .unwrap();
    let loader = run(Command::new("debugfs")
        .arg("-R")
        .arg("stat /loader")
        .arg(format!("{}?offset={boot}", disk.display())));
    let current = if loader.contains("\"loader.0\"") {
        "loader.0"
    } else {
        "loader.1"
    };
    let entries = format!("/{current}/entries");
    let entry = debugfs_names(&disk, boot, &entries).remove(0);
    let cases = [
        (
            root,
            format!("{deploy}/{origin}"),
            format!("{deploy}/{origin}"),
        ),
        (
            boot,
            format!("{entries}/{entry}"),
            format!("/boot{entries}/{entry}"),
        ),
        (
            root,
            "/ostree/repo/config".to_string(),
            "/ostree/repo/config".to_string(),
        ),
    ];
    for (fs, path, shown) in cases {
        let aside = format!("{path}.aside");
        let (parent, name) = path.rsplit_once('/').unwrap();
        debugfs(&disk, fs, &fifo_instead(parent, name, true));
        let d = disk.clone();
        let err = within(120, "a rollback of a disk with a FIFO", move || {
            format!(
                "{:#}",
                strata_disk::node::rollback(&d, worker()).unwrap_err()
            )
        });
        assert!(
            err.contains(&format!("{shown} is not a regular file of the disk"))
                && err.contains(disk.to_str().unwrap())
                && !err.contains('\n'),
            "{shown}: {err}"
        );
        debugfs(
            &disk,
            fs,
            &format!("unlink {path}\nln {aside} {path}\nunlink {aside}\n"),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stateroot whose name is not UTF-8 is checked as the disk names it:
/// its `deploy` linking out of the disk is refused, not taken as absent.
#[test]
fn node_checks_a_stateroot_whose_name_is_not_utf8() {
    let (dir, disk) = disk_copy("node-bytes");
    let root = partition(&disk, "root");
    let script = dir.join("script");
    let mut bytes = b"mkdir /ostree/deploy/os\xff\nmkdir /ostree/deploy/os\xff/var\n".to_vec();
    bytes.extend_from_slice(b"symlink /ostree/deploy/os\xff/deploy /etc\n");
    std::fs::write(&script, bytes).unwrap();
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(&script)
        .arg(format!("{}?offset={root}", disk.display())));
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(
        err.contains("/deploy is not a directory of the disk (it, or a directory above it, is a symbolic link)")
            && err.contains("/ostree/deploy/os")
            && err.contains(disk.to_str().unwrap())
            && !err.contains('\n'),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// debugfs commands that put a FIFO at `dir/name` (debugfs's mknod names
/// its file in the current directory), the file there kept aside when
/// `aside`.
fn fifo_instead(dir: &str, name: &str, aside: bool) -> String {
    let keep = if aside {
        format!("ln {name} {name}.aside\n")
    } else {
        String::new()
    };
    format!("cd {dir}\n{keep}unlink {name}\nmknod {name} p\n")
}

/// A rollback run by the test worker's `rollback` subcommand with
/// `envs`: its exit status and what it printed.
fn rollback_process(disk: &Path, envs: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strata-disk-worker"))
        .arg("rollback")
        .arg(disk)
        .envs(envs.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// A disk that makes libostree wait forever where no layout check looks
/// (a FIFO as the deployment's commit object) is stopped at the run's
/// deadline, naming the disk; no fuse2fs is left.
#[test]
fn node_run_that_hangs_is_stopped_at_its_deadline() {
    let (w, base, _) = workdir();
    let (dir, disk) = disk_copy("node-deadline");
    // Two deployments: a rollback reads their commits.
    strata_disk::node::update(
        w,
        base,
        &disk,
        &strata_oscontainer::TransportOptions::default(),
        worker(),
    )
    .unwrap();
    let root = partition(&disk, "root");
    let os = debugfs_names(&disk, root, "/ostree/deploy").remove(0);
    let deployment = debugfs_names(&disk, root, &format!("/ostree/deploy/{os}/deploy"))
        .into_iter()
        .find(|n| !n.ends_with(".origin"))
        .unwrap();
    let commit = deployment.split('.').next().unwrap().to_string();
    debugfs(
        &disk,
        root,
        &fifo_instead(
            &format!("/ostree/repo/objects/{}", &commit[..2]),
            &format!("{}.commit", &commit[2..]),
            false,
        ),
    );
    let d = disk.clone();
    let started = std::time::Instant::now();
    let out = within(240, "a rollback past its deadline", move || {
        rollback_process(&d, &[(strata_disk::node::DEADLINE_VAR, "20")])
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(started.elapsed().as_secs() >= 20, "{stderr}");
    assert!(
        stderr.contains("did not end within 20 s and was stopped")
            && stderr.contains(disk.to_str().unwrap())
            && stderr.trim_end().lines().count() == 1,
        "{stderr}"
    );
    let ended = std::time::Instant::now();
    while !fuse2fs_of(&disk).is_empty() {
        assert!(
            ended.elapsed().as_secs() < 30,
            "fuse2fs outlived the deadline"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two runs on one disk would both open its filesystems for writing: the
/// second is refused, naming the disk, while the first holds it.
#[test]
fn node_refuses_a_disk_another_run_holds() {
    let (dir, disk) = disk_copy("node-held");
    let held = std::fs::File::open(&disk).unwrap();
    held.lock().unwrap();
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(
        err.contains(&format!(
            "{} is in use by another strata node run",
            disk.display()
        )) && !err.contains('\n'),
        "{err}"
    );
    drop(held);
    let err = format!(
        "{:#}",
        strata_disk::node::rollback(&disk, worker()).unwrap_err()
    );
    assert!(err.contains("no rollback deployment"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process that runs libostree, of a rollback started on a terminal
/// (`script`), has no controlling terminal and a session of its own; its
/// `/dev/tty` is `/dev/null`.
#[test]
fn node_libostree_process_has_no_terminal() {
    use std::os::unix::fs::MetadataExt;
    strata_process::require("script").unwrap();
    let (dir, disk) = disk_copy("node-tty");
    let null = std::fs::metadata("/dev/null").unwrap().rdev();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let mut child = Command::new("script")
            .arg("-qec")
            .arg(format!(
                "{} rollback {}",
                env!("CARGO_BIN_EXE_strata-disk-worker"),
                disk.display()
            ))
            .arg("/dev/null")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(started.elapsed().as_secs() < 120, "the rollback hung");
            for pid in in_root_processes() {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map(|(_, rest)| rest.split_whitespace().collect())
                    .unwrap_or_default();
                // state ppid pgrp session tty_nr
                let Some(tty) = fields.get(4) else {
                    continue;
                };
                let tty_dev = std::fs::metadata(format!("/proc/{pid}/cwd/dev/tty"))
                    .map(|m| m.rdev())
                    .ok();
                seen.push((tty.to_string(), tty_dev));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if !seen.is_empty() {
            break;
        }
    }
    assert!(!seen.is_empty(), "never saw the libostree process");
    for (tty, tty_dev) in &seen {
        assert_eq!(tty, "0", "a controlling terminal: {seen:?}");
        assert!(tty_dev.is_none_or(|d| d == null), "{seen:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The processes that run libostree in a disk's own root: the test
/// worker started with the relative job and outcome names.
fn in_root_processes() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim().starts_with("strata-disk-wor"))
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.ends_with(b"\0job.json\0outcome.json\0"))
        })
        .collect()
}

#[test]
fn qemu_image_boots_with_uefi() {
    boot(strata_testdistro::boot::Firmware::Uefi, "qemu");
}

#[test]
fn metal_image_boots_with_bios() {
    boot(strata_testdistro::boot::Firmware::Bios, "metal");
}

/// A workdir of its own for a test's build, empty, owned by `uid`.
fn fresh_workdir(name: &str, uid: u32) -> PathBuf {
    let dir = target().join(name);
    if dir.exists() {
        // A failed run may have left a sysroot with subordinate owners.
        run(Command::new("rm").arg("-rf").arg(&dir));
    }
    std::fs::create_dir_all(&dir).unwrap();
    run(Command::new("chown").arg(format!("{uid}:{uid}")).arg(&dir));
    dir
}

/// A whole build run as user `uid` (its own group, no others) through the
/// test worker's `build`: its JSON result, or its stderr.
fn build_as(
    uid: u32,
    workdir: &Path,
    image: &str,
    platform: &str,
    target: Option<&str>,
) -> Result<serde_json::Value, String> {
    let gid = std::os::unix::fs::MetadataExt::gid(&std::fs::metadata(workdir).unwrap());
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args(["--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_strata-disk-worker"))
        .arg("build")
        .arg(workdir)
        .arg(image)
        .arg(platform)
        .args(target)
        .env("HOME", workdir)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A second build, as another (unprivileged) user in a workdir of its own
/// that imports the image through another reference: byte-identical raw
/// disk and live media, since both name the same target.
#[test]
fn non_root_rebuild_is_byte_identical() {
    let first = artifact("metal").sha256.clone();
    let (w, _, tag) = workdir();
    let w2 = fresh_workdir("work-nobody", 65534);
    let image = format!("oci:{}:{tag}", w.join("oci").display());
    let r =
        build_as(65534, &w2, &image, "metal,live", Some(TARGET)).unwrap_or_else(|e| panic!("{e}"));
    let a = &r["artifacts"][0];
    let owner = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(a["path"].as_str().unwrap()).unwrap(),
    );
    assert_eq!(owner, 65534);
    assert_eq!(a["sha256"], first.as_str(), "same commit, same bytes");
    // The live media too: the initramfs made by the image's dracut, the
    // squashfs and the ISO.
    for b in &r["artifacts"].as_array().unwrap()[1..] {
        let platform = b["platform"].as_str().unwrap();
        assert_eq!(
            b["sha256"],
            artifact(platform).sha256.as_str(),
            "{platform}"
        );
    }
    assert_eq!(r["ostree_commit"], built().ostree_commit.as_str());
}

/// With metal in the same build, qemu's qcow2 is converted from its own
/// raw's first part and metal's root filesystem; alone, from a whole raw
/// of its own, with the sysroot in memory. The same bytes either way.
#[test]
fn a_qcow2_converted_with_metals_root_equals_one_made_alone() {
    let first = artifact("qemu").sha256.clone();
    let (w, _, tag) = workdir();
    let w2 = fresh_workdir("work-qemu-alone", 0);
    let image = format!("oci:{}:{tag}", w.join("oci").display());
    let r = build_as(0, &w2, &image, "qemu", Some(TARGET)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r["artifacts"][0]["platform"], "qemu");
    assert_eq!(
        r["artifacts"][0]["sha256"],
        first.as_str(),
        "same commit, same bytes"
    );
}

/// Root of a user namespace someone else made (a pod with hostUsers:
/// false) under no_new_privs (allowPrivilegeEscalation: false), as the
/// Tekton disk task runs: the deployment's child gets a mount namespace,
/// not a user namespace whose root would start without capabilities, and
/// the disk is byte-identical to the host root's. The test stands in the
/// pod: a namespace mapping ids 0..65536 onto themselves. Needs root.
#[test]
fn a_pod_root_under_no_new_privs_builds_the_same_disk() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root: it maps the pod's namespace"
    );
    let first = artifact("metal").sha256.clone();
    let (w, _, tag) = workdir();
    let w2 = fresh_workdir("work-pod", 0);
    let image = format!("oci:{}:{tag}", w.join("oci").display());
    let pod = strata_process::userns::IdMap::Identity { count: 65536 };
    let mut cmd = pod.unshare();
    cmd.args(["setpriv", "--no-new-privs", "--"])
        .arg(env!("CARGO_BIN_EXE_strata-disk-worker"))
        .arg("build")
        .arg(&w2)
        .arg(&image)
        .arg("metal")
        .arg(TARGET)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    pod.map_child(child.id()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        r["artifacts"][0]["sha256"],
        first.as_str(),
        "same commit, same bytes"
    );
}

/// RHEL gives some /usr content to system users (polkit's rules.d belongs
/// to polkitd): a build as root deploys it and the root filesystem keeps
/// the owner; so does a build as an ordinary user with subordinate ids,
/// byte for byte. A user without them gets an error that says what to do.
#[test]
fn content_owned_by_system_users_keeps_its_owner() {
    let (w, base, _) = workdir();
    let layer = tempfile::tempdir().unwrap();
    let polkit = layer.path().join("usr/share/polkit-1");
    std::fs::create_dir_all(polkit.join("rules.d")).unwrap();
    std::fs::write(polkit.join("rules.d/49-strata.rules"), "// rules\n").unwrap();
    run(Command::new("chown")
        .args(["-R", "998:0"])
        .arg(polkit.join("rules.d")));
    run(Command::new("chmod")
        .args(["0700"])
        .arg(polkit.join("rules.d")));
    let mut opts = strata_oscontainer::DeriveOptions::default();
    for (k, v) in [
        ("org.opencontainers.image.version", "413.86.202610150000-9"),
        ("com.coreos.openshift-version", "4.13"),
    ] {
        opts.labels.insert(k.into(), v.into());
    }
    let tag = "ocp-4.13-owned-test";
    strata_oscontainer::append_layers(
        &w.join("oci"),
        base,
        tag,
        &[strata_oscontainer::DerivedLayer::new(
            layer.path(),
            "polkit rules",
        )],
        &opts,
    )
    .unwrap();
    // Workdirs of their own, so that the other tests see only their builds.
    let own = fresh_workdir("work-owned", 0);
    let image = format!("oci:{}:{tag}", w.join("oci").display());
    let r = build(&DiskOptions::new(
        &own,
        image.as_str(),
        vec!["metal".into()],
        worker(),
    ))
    .unwrap();
    let metal = &r.artifacts[0];
    let json: serde_json::Value =
        serde_json::from_str(&run(Command::new("sfdisk").arg("--json").arg(&metal.path))).unwrap();
    let root_part = &json["partitiontable"]["partitions"][3];
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    extract(
        &metal.path,
        root_part["start"].as_u64().unwrap() * 512,
        root_part["size"].as_u64().unwrap() * 512,
        &root,
    );
    for path in ["rules.d", "rules.d/49-strata.rules"] {
        let stat = run(Command::new("debugfs")
            .arg("-R")
            .arg(format!(
                "stat /ostree/deploy/rhcos/deploy/{}.0/usr/share/polkit-1/{path}",
                r.ostree_commit
            ))
            .arg(&root));
        let user = stat
            .split_whitespace()
            .skip_while(|w| *w != "User:")
            .nth(1)
            .unwrap_or_else(|| panic!("{stat}"));
        assert_eq!(user, "998", "{path}: {stat}");
    }
    // File capabilities (rpm's %caps) reach the disk as plain (revision 2,
    // 20-byte) capabilities, not tied to the namespace that deployed them.
    let eas = run(Command::new("debugfs")
        .arg("-R")
        .arg(format!(
            "ea_list /ostree/deploy/rhcos/deploy/{}.0/usr/bin/newuidmap",
            r.ostree_commit
        ))
        .arg(&root));
    assert!(eas.contains("security.capability (20)"), "{eas}");

    // Another platform, naming another image: the metal disk (which names
    // the local image) is no longer this build's.
    // Stored as published, under the URL it will be published at.
    let qemu = build(
        &DiskOptions::new(&own, image.as_str(), vec!["qemu".into()], worker())
            .target_image(Some(TARGET.into()))
            .compress(strata_disk::Compress::Gzip)
            .artifact_url(Some("https://mirror.example/rhcos/".into())),
    )
    .unwrap();
    let gz = &qemu.artifacts[0];
    assert!(
        gz.path.to_str().unwrap().ends_with(".x86_64.qcow2.gz"),
        "{gz:?}"
    );
    let inside = gz.uncompressed.as_ref().expect("compressed");
    let sums = run(Command::new("sh").arg("-c").arg(format!(
        "gzip -dc {0} | sha256sum; gzip -dc {0} | wc -c; sha256sum {0}",
        gz.path.display()
    )));
    let sums: Vec<&str> = sums
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        sums,
        [
            inside.sha256.clone(),
            inside.size.to_string(),
            gz.sha256.clone()
        ]
    );
    let stream: coreos_stream_metadata::Stream =
        serde_json::from_slice(&std::fs::read(&qemu.stream_json).unwrap()).unwrap();
    let disk = &stream.architectures["x86_64"].artifacts["qemu"].formats["qcow2.gz"]["disk"];
    assert_eq!(
        disk.location,
        format!(
            "https://mirror.example/rhcos/{}/{}/x86_64/{}",
            qemu.stream,
            qemu.version,
            gz.path.file_name().unwrap().to_str().unwrap()
        )
    );
    assert_eq!(
        disk.uncompressed_sha256.as_deref(),
        Some(inside.sha256.as_str())
    );
    assert!(
        !qemu.build_dir.join(gz.path.file_stem().unwrap()).exists(),
        "the uncompressed disk is gone"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(qemu.build_dir.join("strata.json")).unwrap())
            .unwrap();
    let listed: Vec<&String> = meta["disks"]["images"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(listed, ["ostree", "qemu"]);
    assert_eq!(meta["disks"]["image_reference"], TARGET);
    assert!(!metal.path.exists(), "the metal disk names the old image");

    let (uid, _) = strata_testdistro::subid_user();
    let subids = fresh_workdir("work-subids", uid);
    let r2 = build_as(uid, &subids, &image, "metal", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r2["artifacts"][0]["sha256"],
        metal.sha256.as_str(),
        "built with subordinate ids: the same bytes as root's build"
    );
    assert_eq!(listing(&subids.join("tmp")), Vec::<String>::new());

    let nobody = fresh_workdir("work-owned-nobody", 65534);
    let err = build_as(65534, &nobody, &image, "metal", None).unwrap_err();
    assert!(
        err.contains("/etc/subuid")
            && err.contains("uidmap")
            && err.contains("/usr/share/polkit-1/rules.d")
            && err.contains("belongs to 998:0"),
        "{err}"
    );
    assert_eq!(listing(&nobody.join("tmp")), Vec::<String>::new());
    assert!(!nobody.join("builds/ocp-4.13").exists());
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Bad input fails with a clear error and leaves neither artifacts nor
/// staging behind.
#[test]
fn bad_input_leaves_nothing() {
    let (w, tag, _) = workdir();
    built();
    let build_dir = built().build_dir.clone();
    let before = listing(&build_dir);

    let err = build(&DiskOptions::new(
        w,
        tag.as_str(),
        vec!["aws".into()],
        worker(),
    ))
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("unknown platform \"aws\""),
        "{err:#}"
    );

    let err = build(
        &DiskOptions::new(w, tag.as_str(), vec!["metal".into()], worker()).size(Some(600 << 20)),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("too small"), "{err:#}");
    assert_eq!(listing(&w.join("tmp")), Vec::<String>::new());
    assert_eq!(listing(&build_dir), before);

    // Images whose commit lacks a piece of the boot chain: each fails
    // before anything is deployed, naming what provides the piece.
    let tree = tempfile::tempdir().unwrap();
    let put = |rel: &str| {
        let path = tree.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "NAME=x\nID=x\nPRETTY_NAME=x\n").unwrap();
    };
    put("usr/lib/os-release");
    for (tag, missing, added) in [
        ("no-kernel", "has no kernel", "usr/lib/modules/6.1.0/vmlinuz"),
        (
            "no-efi",
            "has no EFI bootloader (/usr/lib/bootupd/updates/EFI): its packages must include shim-x64 and grub2-efi-x64",
            "usr/lib/bootupd/updates/EFI/BOOT/BOOTX64.EFI",
        ),
        (
            "no-bios",
            "has no BIOS GRUB (/usr/lib/grub/i386-pc/kernel.img): its packages must include grub2-pc-modules",
            "",
        ),
    ] {
        let version = format!("0.0.1-{tag}");
        image_of_tree(w, tree.path(), tag, &version);
        let err = build(&DiskOptions::new(w, tag, vec!["metal".into()], worker())).unwrap_err();
        assert!(format!("{err:#}").contains(missing), "{err:#}");
        assert_eq!(listing(&w.join("tmp")), Vec::<String>::new());
        assert!(!w.join(format!("builds/disk/{version}")).exists());
        if !added.is_empty() {
            put(added);
        }
    }
}

/// Commits `tree` to the workdir's repository and encapsulates it as `tag`,
/// holding the workdir's lock as every writer does: a disk build running
/// alongside prunes the layout and rewrites its index.json.
fn image_of_tree(w: &Path, tree: &Path, tag: &str, version: &str) {
    let _lock = strata_workdir::Workdir::open(w).unwrap().lock().unwrap();
    let repo = w.join("repo");
    let commit = run(Command::new("ostree")
        .arg(format!("--repo={}", repo.display()))
        .args(["commit", "--orphan", "--owner-uid=0", "--owner-gid=0"])
        .arg(format!("--tree=dir={}", tree.display())))
    .trim()
    .to_string();
    let mut eopts = strata_oscontainer::EncapsulateOptions::default();
    eopts
        .labels
        .insert("org.opencontainers.image.version".into(), version.into());
    strata_oscontainer::encapsulate(&repo, &commit, &w.join("oci"), tag, &eopts).unwrap();
}

/// Files and directories below `dir`, recursively, relative to it.
fn tree_listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Labels are the image builder's word. An OpenShift version label with
/// `../` wrote the disks, meta.json and stream.json outside the workdir;
/// an osname with `../` made the deploy worker create a stateroot outside
/// it; a newline in the OpenShift version added an `options` line to the
/// BLS entries. Each is refused naming the label and its value, before
/// anything is written, in a workdir of its own whose surroundings stay
/// empty.
#[test]
fn hostile_labels_are_refused_and_nothing_is_written_outside_the_workdir() {
    let (w, base, _) = workdir();
    let cases = [
        (
            "com.coreos.openshift-version",
            "4.13/../../../../escaped",
            "hostile-ocp-path",
        ),
        ("com.coreos.osname", "../../escaped", "hostile-osname"),
        (
            "com.coreos.openshift-version",
            "4.13\noptions init=/bin/sh",
            "hostile-ocp-newline",
        ),
        (
            "org.opencontainers.image.version",
            "../../../escaped",
            "hostile-version",
        ),
    ];
    let empty = tempfile::tempdir().unwrap();
    for (name, value, tag) in cases {
        let mut opts = strata_oscontainer::DeriveOptions::default();
        opts.labels.insert(name.into(), value.into());
        if name != "org.opencontainers.image.version" {
            opts.labels.insert(
                "org.opencontainers.image.version".into(),
                OCP_VERSION.into(),
            );
        }
        strata_oscontainer::append_layers(
            &w.join("oci"),
            base,
            tag,
            &[strata_oscontainer::DerivedLayer::new(
                empty.path(),
                "nothing",
            )],
            &opts,
        )
        .unwrap();
        let around = tempfile::tempdir().unwrap();
        let fresh = around.path().join("a/b/work");
        let image = format!("oci:{}:{tag}", w.join("oci").display());
        let err = build(&DiskOptions::new(
            &fresh,
            image.as_str(),
            vec!["qemu".into()],
            worker(),
        ))
        .unwrap_err();
        let text = format!("{err:#}");
        let escaped = format!("{value:?}");
        assert!(
            text.contains(&format!("image label {name}={escaped}")),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
        let outside: Vec<String> = tree_listing(around.path())
            .into_iter()
            .filter(|p| !p.starts_with("a/b/work"))
            .collect();
        assert_eq!(outside, ["a", "a/b"], "{name}={value:?}");
        assert_eq!(listing(&fresh.join("tmp")), Vec::<String>::new());
        assert!(!fresh.join("builds").join("ocp-4.13").exists());
    }
}

/// A file of an ISO as coreos-installer finds it.
fn iso_file<'a>(iso: &'a [u8], path: &str) -> &'a [u8] {
    strata_testdistro::iso::file(iso, path).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The ISO keeps CoreOS's customisation areas where coreos-installer
/// looks for them, the root image's squashfs is where the initramfs reads
/// it, and the records list the four files as CoreOS's do.
#[test]
fn live_media_layout_and_records() {
    let r = built();
    let names: Vec<&str> = r.artifacts.iter().map(|a| a.platform.as_str()).collect();
    assert_eq!(
        names,
        [
            "qemu",
            "metal",
            "metal4k",
            "live-iso",
            "live-kernel",
            "live-initramfs",
            "live-rootfs"
        ]
    );
    let iso_path = &artifact("live-iso").path;
    assert!(iso_path.to_string_lossy().ends_with("-live.x86_64.iso"));
    let iso = std::fs::read(iso_path).unwrap();
    let volid = String::from_utf8_lossy(&iso[16 * 2048 + 40..16 * 2048 + 72])
        .trim_end()
        .to_string();
    assert_eq!(volid, format!("rhcos-{}", r.version));

    let igninfo: serde_json::Value =
        serde_json::from_slice(iso_file(&iso, "COREOS/IGNINFO.JSO")).unwrap();
    assert_eq!(igninfo, serde_json::json!({"file": "images/ignition.img"}));
    let area = iso_file(&iso, "IMAGES/IGNITION.IMG");
    assert_eq!(area.len(), 256 * 1024, "CoreOS's embed area size");
    assert!(area.iter().all(|b| *b == 0), "an empty area is zeros");

    let kargs: serde_json::Value =
        serde_json::from_slice(iso_file(&iso, "COREOS/KARGS.JSO")).unwrap();
    let default = kargs["default"].as_str().unwrap();
    let size = kargs["size"].as_u64().unwrap() as usize;
    assert!(size <= 2048, "coreos-installer's limit");
    let files = kargs["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    let path = files[0]["path"].as_str().unwrap().to_ascii_uppercase();
    let cfg = iso_file(&iso, &path);
    let offset = files[0]["offset"].as_u64().unwrap() as usize;
    let region = std::str::from_utf8(&cfg[offset..offset + size]).unwrap();
    assert_eq!(
        region,
        format!("{default}\n{}", "#".repeat(size - default.len() - 1))
    );
    assert!(cfg[offset + size..].starts_with(b"# COREOS_KARG_EMBED_AREA\n"));
    assert!(
        default.contains("ignition.firstboot") && default.contains("ignition.platform.id=metal"),
        "{default}"
    );

    let rootfs = iso_file(&iso, "IMAGES/PXEBOOT/ROOTFS.IMG");
    assert_eq!(&rootfs[124..128], b"hsqs", "the squashfs starts at 124");
    let pxe_rootfs = std::fs::read(&artifact("live-rootfs").path).unwrap();
    assert!(
        rootfs == pxe_rootfs.as_slice(),
        "one root image for ISO and PXE"
    );
    // The live system carries the aleph file, OpenShift version included:
    // squashfs-tools read it 124 bytes into the root image.
    let aleph: serde_json::Value = serde_json::from_str(&run(Command::new("unsquashfs")
        .args(["-o", "124", "-cat"])
        .arg(&artifact("live-rootfs").path)
        .arg(".coreos-aleph-version.json")))
    .unwrap();
    assert_eq!(aleph["openshift-version"], "4.13");
    assert_eq!(aleph["version"], r.version.as_str());

    // The records, as CoreOS's: meta.json images, stream.json's metal
    // formats iso and pxe.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("meta.json")).unwrap()).unwrap();
    let problems = strata_workdir::record::check_cosa_meta(&meta);
    assert!(problems.is_empty(), "{problems:?}");
    for a in &r.artifacts {
        assert_eq!(meta["images"][&a.platform]["sha256"], a.sha256.as_str());
    }
    let stream: coreos_stream_metadata::Stream =
        serde_json::from_slice(&std::fs::read(&r.stream_json).unwrap()).unwrap();
    let metal = &stream.architectures["x86_64"].artifacts["metal"];
    let iso_fmt = &metal.formats["iso"];
    assert_eq!(iso_fmt["disk"].sha256, artifact("live-iso").sha256.as_str());
    let pxe = &metal.formats["pxe"];
    for (part, name) in [
        ("kernel", "live-kernel"),
        ("initramfs", "live-initramfs"),
        ("rootfs", "live-rootfs"),
    ] {
        assert_eq!(pxe[part].sha256, artifact(name).sha256.as_str());
    }
}

/// A build's disks made by two `strata disk` runs (qemu, then metal):
/// stream.json listed only the last run's artifacts while meta.json
/// listed all. Both are projected from the build's one record.
#[test]
fn stream_json_lists_the_disks_of_earlier_runs_as_meta_json_does() {
    let (w, _, tag) = workdir();
    // A workdir of its own, so that the other tests see only their builds.
    let own = fresh_workdir("work-two-runs", 0);
    let image = format!("oci:{}:{tag}", w.join("oci").display());
    let mut made = Vec::new();
    for platform in ["qemu", "metal"] {
        let r = build(
            &DiskOptions::new(&own, image.as_str(), vec![platform.into()], worker())
                .target_image(Some(TARGET.into())),
        )
        .unwrap();
        made.push(r.artifacts[0].clone());
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(r.build_dir.join("meta.json")).unwrap()).unwrap();
        assert_eq!(
            meta["images"]["ostree"]["sha256"],
            r.oci_archive.sha256.as_str()
        );
        let stream: coreos_stream_metadata::Stream =
            serde_json::from_slice(&std::fs::read(&r.stream_json).unwrap()).unwrap();
        let arts = &stream.architectures["x86_64"].artifacts;
        for a in &made {
            assert_eq!(meta["images"][&a.platform]["sha256"], a.sha256.as_str());
            let file = a.path.file_name().unwrap().to_str().unwrap();
            let format = if a.platform == "qemu" { "qcow2" } else { "raw" };
            let disk = &arts[a.platform.as_str()].formats[format]["disk"];
            assert_eq!(disk.location, file, "after {platform}");
            assert_eq!(disk.sha256, a.sha256, "after {platform}");
        }
        assert_eq!(arts.len(), made.len(), "after {platform}");
    }
}

/// The ISO boots from a CD with UEFI (q35), to the marker, from the image's
/// own tree with no disk: the test's 4.13 image is the base and an
/// os-release, no node packages. (A release's media boot from a CD with
/// BIOS and with PXE in the pipeline test.)
#[test]
fn live_iso_boots_from_a_cd_with_uefi() {
    use strata_testdistro::boot::{boot, BootSpec, Firmware};
    let mut cd = BootSpec::live_cd(Firmware::Uefi, &artifact("live-iso").path);
    cd.timeout = std::time::Duration::from_secs(300);
    let res = boot(&cd).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "live ISO on a CD (UEFI): {} in {:?}",
        res.marker, res.elapsed
    );
    // The live media's command line has Ignition's first boot argument,
    // and no ostree= deployment: /var is the live root's own.
    assert_eq!(
        res.marker,
        format!(
            "STRATA-BOOT-OK version={OCP_VERSION} openshift=4.13 init=systemd kubelet=no crio=no firstboot=yes var=root"
        )
    );
}
