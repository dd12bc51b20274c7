//! Test fixtures: small but realistic ostree commits made with the real
//! `ostree` CLI (plus libostree for what the CLI cannot do), and helpers to
//! tamper with OCI layouts.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use ostree::gio;
use ostree::glib;
use ostree::prelude::*;
use strata_oscontainer::ContentMap;

/// os-release of the synthetic tree (ostree's deploy needs ID or PRETTY_NAME).
pub const OS_RELEASE: &str =
    "NAME=\"Strata Test\"\nID=strata\nVERSION_ID=8.6\nPRETTY_NAME=\"Strata Test 8.6\"\n";

/// Kernel version of the synthetic tree.
pub const KVER: &str = "6.1.0-strata-test";

/// Runs a command, panicking with its stderr on failure.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("running {cmd:?}: {e} (is the tool installed? see ci/install-deps)")
    });
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates an empty bare-user repository.
pub fn init_repo(path: &Path) {
    fs::create_dir_all(path).unwrap();
    run(Command::new("ostree")
        .arg("init")
        .arg(format!("--repo={}", path.display()))
        .arg("--mode=bare-user"));
}

/// Deterministic pseudo-random bytes.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn write(root: &Path, rel: &str, data: &[u8], mode: u32) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, data).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

/// Writes the synthetic OS tree. `generation` changes the content of the
/// `pkg-b` component (and the rpmdb, as a real update would); `extra` adds
/// the files of a new package `pkg-new`.
pub fn write_tree(root: &Path, generation: u32, extra: bool) {
    let _ = fs::remove_dir_all(root);
    fs::create_dir_all(root).unwrap();
    // bash: a binary, a symlink to it, a hard link to it.
    write(root, "usr/bin/bash", &noise(1, 40_000), 0o755);
    symlink("bash", root.join("usr/bin/sh")).unwrap();
    fs::hard_link(
        root.join("usr/bin/bash"),
        root.join("usr/bin/bash-hardlink"),
    )
    .unwrap();
    // glibc: big (streamed, not inline), plus a denormal symlink target.
    write(root, "usr/lib64/libc.so.6", &noise(2, 400_000), 0o755);
    symlink(
        "../..//usr/lib64/libc.so.6",
        root.join("usr/lib64/libc-denormal.so"),
    )
    .unwrap();
    // pkg-a / pkg-b / pkg-c: ordinary packages.
    write(root, "usr/share/pkg-a/data", &noise(3, 30_000), 0o644);
    write(
        root,
        "usr/share/pkg-b/data",
        &noise(100 + u64::from(generation), 20_000),
        0o644,
    );
    write(root, "usr/share/pkg-c/data", &noise(4, 10_000), 0o644);
    // setup: /etc content (stored as usr/etc), an empty file, setuid, a
    // file owned by a non-root user, a long path.
    write(root, "usr/etc/os-release", OS_RELEASE.as_bytes(), 0o644);
    write(root, "usr/etc/empty-config", b"", 0o600);
    write(root, "usr/bin/sudo", &noise(5, 5_000), 0o4755);
    let owned = root.join("usr/share/pkg-c/owned-by-1001");
    fs::write(&owned, b"mine").unwrap();
    std::os::unix::fs::chown(&owned, Some(1001), Some(1002)).unwrap();
    let long = format!(
        "usr/share/pkg-c/{}/file-with-a-long-path",
        "deep-directory".repeat(9)
    );
    write(root, &long, b"long path content", 0o644);
    // kernel: vmlinuz + initramfs.
    write(
        root,
        &format!("usr/lib/modules/{KVER}/vmlinuz"),
        &noise(6, 300_000),
        0o755,
    );
    write(
        root,
        &format!("usr/lib/modules/{KVER}/initramfs.img"),
        &noise(7, 200_000),
        0o644,
    );
    // Unpackaged: the rpmdb, which changes with every update.
    write(
        root,
        "usr/share/rpm/rpmdb.sqlite",
        &noise(200 + u64::from(generation) + u64::from(extra) * 1000, 8_000),
        0o644,
    );
    if extra {
        write(root, "usr/share/pkg-new/data", &noise(9, 15_000), 0o644);
    }
    // Empty directories ostree commits keep.
    for d in ["sysroot", "var", "usr/lib/empty-dir"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::set_permissions(
        root.join("usr/lib/empty-dir"),
        fs::Permissions::from_mode(0o700),
    )
    .unwrap();
}

/// The component map a compose would produce for [`write_tree`].
pub fn content_map(extra: bool) -> ContentMap {
    let mut m = ContentMap::new();
    let assign: &[(&str, &[&str])] = &[
        (
            "bash",
            &["/usr/bin/bash", "/usr/bin/sh", "/usr/bin/bash-hardlink"],
        ),
        (
            "glibc",
            &["/usr/lib64/libc.so.6", "/usr/lib64/libc-denormal.so"],
        ),
        ("pkg-a", &["/usr/share/pkg-a/data"]),
        ("pkg-b", &["/usr/share/pkg-b/data"]),
        (
            "pkg-c",
            &["/usr/share/pkg-c/data", "/usr/share/pkg-c/owned-by-1001"],
        ),
        (
            "setup",
            &["/etc/os-release", "/etc/empty-config", "/usr/bin/sudo"],
        ),
        (
            "kernel",
            &[
                "/usr/lib/modules/6.1.0-strata-test/vmlinuz",
                "/usr/lib/modules/6.1.0-strata-test/initramfs.img",
            ],
        ),
    ];
    for (c, paths) in assign {
        m.add_component(c, 1);
        for p in *paths {
            m.assign(p, c);
        }
    }
    m.add_component("pkg-b", 5);
    if extra {
        m.assign("/usr/share/pkg-new/data", "pkg-new");
    }
    m
}

/// Commits `tree` to `repo` on `branch` with version and package metadata,
/// then adds a file with an extended attribute (the CLI cannot set one
/// without setfattr). Returns the commit checksum.
pub fn commit_tree(
    repo: &Path,
    tree: &Path,
    branch: &str,
    version: &str,
    generation: u32,
) -> String {
    let pkglist = format!(
        "[('bash', '0', '5.1.8', '6.el8', 'x86_64'), ('glibc', '0', '2.28', '{}.el8', 'x86_64'), ('pkg-b', '1', '1.0', '{generation}', 'noarch'), ('kernel', '0', '6.1.0', '1', 'x86_64')]",
        189 + generation
    );
    let first = run(Command::new("ostree")
        .arg("commit")
        .arg(format!("--repo={}", repo.display()))
        .arg(format!("--tree=dir={}", tree.display()))
        .arg(format!("--branch={branch}-tmp"))
        .arg("--subject=strata test tree")
        .arg(format!("--add-metadata-string=version={version}"))
        .arg(format!("--add-metadata=rpmostree.rpmdb.pkglist={pkglist}"))
        .arg("--bootable")
        .arg("--timestamp=2026-12-02 12:00:00 +0000"))
    .trim()
    .to_string();
    let repo_h = ostree::Repo::new_for_path(repo);
    repo_h.open(gio::Cancellable::NONE).unwrap();
    let txn = repo_h.auto_transaction(gio::Cancellable::NONE).unwrap();
    let mtree = ostree::MutableTree::from_commit(&repo_h, &first).unwrap();
    let xattrs: Vec<(Vec<u8>, Vec<u8>)> = vec![(
        b"user.strata.label\0".to_vec(),
        b"system_u:object_r:bin_t:s0".to_vec(),
    )];
    let csum = repo_h
        .write_regfile_inline(
            None,
            0,
            0,
            0o100755,
            Some(&xattrs.to_variant()),
            b"#!/bin/sh\necho labelled\n",
            gio::Cancellable::NONE,
        )
        .unwrap();
    let usr = mtree.lookup("usr").unwrap().1.unwrap();
    let bin = usr.lookup("bin").unwrap().1.unwrap();
    bin.replace_file("labelled", &csum).unwrap();
    let root = repo_h.write_mtree(&mtree, gio::Cancellable::NONE).unwrap();
    let root = root.downcast::<ostree::RepoFile>().unwrap();
    let (v, _) = repo_h.load_commit(&first).unwrap();
    // Drop the CLI's binding to the temporary branch.
    let dict = glib::VariantDict::new(Some(&v.child_value(0)));
    dict.remove("ostree.ref-binding");
    let meta = dict.end();
    let commit = repo_h
        .write_commit_with_time(
            None,
            Some("strata test tree"),
            None,
            Some(&meta),
            &root,
            ostree::commit_get_timestamp(&v),
            gio::Cancellable::NONE,
        )
        .unwrap()
        .to_string();
    repo_h.transaction_set_ref(None, branch, Some(&commit));
    repo_h.transaction_set_ref(None, &format!("{branch}-tmp"), None);
    txn.commit(gio::Cancellable::NONE).unwrap();
    commit
}

/// A repository with one synthetic commit.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub commit: String,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        init_repo(&repo);
        let tree = dir.path().join("tree");
        write_tree(&tree, 1, false);
        let commit = commit_tree(&repo, &tree, "base", "8.6.20261202-0", 1);
        Fixture { dir, repo, commit }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A second commit: `pkg-b` updated and, with `extra`, `pkg-new` added.
    pub fn update(&self, extra: bool) -> String {
        let tree = self.path("tree2");
        write_tree(&tree, 2, extra);
        commit_tree(&self.repo, &tree, "update", "8.6.20261203-0", 2)
    }
}

/// A fresh empty repository under `dir`.
pub fn fresh_repo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    init_repo(&p);
    p
}

/// All files of a layout (relative path → bytes).
pub fn layout_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// `ostree fsck` of a repository.
pub fn fsck(repo: &Path) {
    run(Command::new("ostree")
        .arg("fsck")
        .arg(format!("--repo={}", repo.display())));
}

/// Refs of a repository.
pub fn refs(repo: &Path) -> String {
    run(Command::new("ostree")
        .arg("refs")
        .arg(format!("--repo={}", repo.display())))
}

/// Reads an image's manifest and config from a layout (test-side, with
/// plain serde).
pub fn manifest_and_config(
    oci: &Path,
    tag: &str,
) -> (
    oci_spec::image::ImageManifest,
    oci_spec::image::ImageConfiguration,
) {
    let index: oci_spec::image::ImageIndex =
        serde_json::from_slice(&fs::read(oci.join("index.json")).unwrap()).unwrap();
    let desc = index
        .manifests()
        .iter()
        .find(|d| {
            d.annotations()
                .as_ref()
                .and_then(|a| a.get("org.opencontainers.image.ref.name"))
                .is_some_and(|t| t == tag)
        })
        .unwrap();
    let blob = |d: &oci_spec::image::Descriptor| {
        fs::read(oci.join("blobs/sha256").join(d.digest().digest())).unwrap()
    };
    let manifest: oci_spec::image::ImageManifest = serde_json::from_slice(&blob(desc)).unwrap();
    let config = serde_json::from_slice(&blob(manifest.config())).unwrap();
    (manifest, config)
}

/// Writes a blob into a layout, returning its digest hex.
pub fn write_blob(oci: &Path, data: &[u8]) -> String {
    use sha2::Digest;
    let hex = hex::encode(sha2::Sha256::digest(data));
    fs::write(oci.join("blobs/sha256").join(&hex), data).unwrap();
    hex
}

/// Tags a copy of `base_tag` as `new_tag` with one extra layer made of
/// `tar` (gzip-compressed here). With `raw_blob`, the given bytes are the
/// blob as-is (to plant broken layers).
pub fn append_raw_layer(
    oci: &Path,
    base_tag: &str,
    new_tag: &str,
    tar: &[u8],
    raw_blob: Option<&[u8]>,
) {
    use oci_spec::image::{DescriptorBuilder, MediaType};
    use sha2::Digest;
    let (mut manifest, mut config) = manifest_and_config(oci, base_tag);
    let gz = match raw_blob {
        Some(b) => b.to_vec(),
        None => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(tar).unwrap();
            e.finish().unwrap()
        }
    };
    let hex = write_blob(oci, &gz);
    let diff_id = format!("sha256:{}", hex::encode(sha2::Sha256::digest(tar)));
    let desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageLayerGzip)
        .digest(oci_spec::image::Digest::try_from(format!("sha256:{hex}")).unwrap())
        .size(gz.len() as u64)
        .build()
        .unwrap();
    manifest.layers_mut().push(desc);
    config.rootfs_mut().diff_ids_mut().push(diff_id);
    if let Some(h) = config.history_mut() {
        h.push(
            oci_spec::image::HistoryBuilder::default()
                .created_by("test layer")
                .build()
                .unwrap(),
        );
    }
    retag(oci, new_tag, &mut manifest, &config);
}

/// Writes config and manifest and points `tag` at them.
pub fn retag(
    oci: &Path,
    tag: &str,
    manifest: &mut oci_spec::image::ImageManifest,
    config: &oci_spec::image::ImageConfiguration,
) {
    use oci_spec::image::{DescriptorBuilder, MediaType};
    let cfg = serde_json::to_vec(config).unwrap();
    let chex = write_blob(oci, &cfg);
    manifest.set_config(
        DescriptorBuilder::default()
            .media_type(MediaType::ImageConfig)
            .digest(oci_spec::image::Digest::try_from(format!("sha256:{chex}")).unwrap())
            .size(cfg.len() as u64)
            .build()
            .unwrap(),
    );
    let m = serde_json::to_vec(manifest).unwrap();
    let mhex = write_blob(oci, &m);
    let mut index: serde_json::Value =
        serde_json::from_slice(&fs::read(oci.join("index.json")).unwrap()).unwrap();
    let list = index["manifests"].as_array_mut().unwrap();
    list.retain(|d| d["annotations"]["org.opencontainers.image.ref.name"] != tag);
    list.push(serde_json::json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": format!("sha256:{mhex}"),
        "size": m.len(),
        "annotations": {"org.opencontainers.image.ref.name": tag},
    }));
    fs::write(oci.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
}

/// A tar entry for hand-made (possibly hostile) layers.
pub enum Entry<'a> {
    Dir(&'a str),
    File(&'a str, &'a [u8]),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
}

/// Builds a tar with names written verbatim (the tar crate's safe setters
/// refuse `..` and absolute names, which these tests need).
pub fn raw_tar(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let (name, kind, data, link): (&str, u8, &[u8], &str) = match e {
            Entry::Dir(n) => (n, b'5', b"", ""),
            Entry::File(n, d) => (n, b'0', d, ""),
            Entry::Symlink(n, t) => (n, b'2', b"", t),
            Entry::Hardlink(n, t) => (n, b'1', b"", t),
        };
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let mode = if kind == b'5' {
            "0000755\0"
        } else {
            "0000644\0"
        };
        h[100..108].copy_from_slice(mode.as_bytes());
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        h[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = kind;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..265].copy_from_slice(b"ustar\x0000");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

/// The names in a tar.
pub fn tar_names(data: &[u8]) -> Vec<String> {
    let mut a = tar::Archive::new(data);
    a.entries()
        .unwrap()
        .map(|e| String::from_utf8(e.unwrap().path_bytes().into_owned()).unwrap())
        .collect()
}

/// Decompresses a gzip blob.
pub fn gunzip(data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

pub fn glib_unused(_: glib::Variant) {}

/// `contents:meta` checksums of a commit's root, as the compat client prints.
pub fn root_tree(repo: &Path, commit: &str) -> String {
    let r = ostree::Repo::new_for_path(repo);
    r.open(gio::Cancellable::NONE).unwrap();
    let (v, _) = r.load_commit(commit).unwrap();
    format!(
        "{}:{}",
        hex::encode(v.child_value(6).data_as_bytes()),
        hex::encode(v.child_value(7).data_as_bytes())
    )
}

/// The parent of a commit.
pub fn parent_of(repo: &Path, commit: &str) -> Option<String> {
    let r = ostree::Repo::new_for_path(repo);
    r.open(gio::Cancellable::NONE).unwrap();
    let (v, _) = r.load_commit(commit).unwrap();
    ostree::commit_get_parent(&v).map(|s| s.to_string())
}

/// A file's content in a commit, or None if absent.
pub fn cat(repo: &Path, commit: &str, path: &str) -> Option<Vec<u8>> {
    let out = Command::new("ostree")
        .arg("cat")
        .arg(format!("--repo={}", repo.display()))
        .arg(commit)
        .arg(path)
        .output()
        .unwrap();
    out.status.success().then_some(out.stdout)
}

/// `ostree ls` of one path (None if absent).
pub fn ls(repo: &Path, commit: &str, path: &str) -> Option<String> {
    let out = Command::new("ostree")
        .arg("ls")
        .arg(format!("--repo={}", repo.display()))
        .arg(commit)
        .arg(path)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Number of files under a repository's objects directory.
pub fn object_count(repo: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![repo.join("objects")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                n += 1;
            }
        }
    }
    n
}

/// Builds `tests/ostree-ext-compat` once and returns its binary.
pub fn compat_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ostree-ext-compat");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // Its own target directory, named: a CARGO_TARGET_DIR in the
        // environment would put the binary elsewhere.
        let target = root.join("target");
        run(Command::new(cargo)
            .arg("build")
            .arg("--quiet")
            .arg("--manifest-path")
            .arg(root.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target));
        target.join("debug/strata-ostree-ext-compat")
    })
}

/// What the ostree-ext client reports after importing.
pub struct ClientImport {
    pub base_commit: String,
    pub merge_tree: String,
    pub json: serde_json::Value,
}

/// Imports `image` into a fresh repo with ostree-ext.
pub fn client_import(dir: &Path, name: &str, image: &str, insecure: bool) -> ClientImport {
    let repo = dir.join(name);
    let mut cmd = Command::new(compat_binary());
    cmd.arg("import").arg(&repo).arg(image);
    if insecure {
        cmd.arg("--insecure");
    }
    let out = run(&mut cmd);
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    fsck(&repo);
    ClientImport {
        base_commit: json["base_commit"].as_str().unwrap().to_string(),
        merge_tree: json["merge_tree"].as_str().unwrap().to_string(),
        json,
    }
}

/// A docker-registry (distribution v2) on 127.0.0.1, killed on drop.
pub struct Registry {
    child: std::process::Child,
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting docker-registry (Debian package docker-registry)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "docker-registry did not start on {addr}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Registry {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An overlayfs-style upper directory with the changes of a node layer:
/// new files (a hard link, a symlink, an xattr, /etc content), a deletion
/// (0:0 character device) and, with `opaque`, an opaque directory.
pub fn node_upper_dir(dir: &Path, opaque: bool) {
    let _ = fs::remove_dir_all(dir);
    write(dir, "usr/bin/kubelet", b"kubelet binary", 0o755);
    fs::hard_link(
        dir.join("usr/bin/kubelet"),
        dir.join("usr/bin/kubelet-hardlink"),
    )
    .unwrap();
    symlink("kubelet", dir.join("usr/bin/kubectl")).unwrap();
    rustix::fs::lsetxattr(
        dir.join("usr/bin/kubelet"),
        "user.strata.test",
        b"kubelet-label",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    write(
        dir,
        "usr/etc/kubernetes/kubelet.conf",
        b"kind: KubeletConfiguration\n",
        0o644,
    );
    fs::create_dir_all(dir.join("usr/share/pkg-a")).unwrap();
    run(Command::new("mknod")
        .arg(dir.join("usr/share/pkg-a/data"))
        .arg("c")
        .arg("0")
        .arg("0"));
    if opaque {
        write(dir, "usr/share/pkg-c/new", b"new", 0o644);
        rustix::fs::lsetxattr(
            dir.join("usr/share/pkg-c"),
            "trusted.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
    }
}
