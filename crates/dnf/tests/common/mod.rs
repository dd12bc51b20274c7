//! A tiny signed RPM distribution built inside the tests: two keys, a base
//! repository with a shell (static busybox as /usr/bin/sh) so that scriptlets
//! can run in the install root, a repository signed by a key nobody trusts,
//! and a few loose RPMs for local installs. Built once per test binary under
//! `CARGO_TARGET_TMPDIR`.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pgp::composed::{KeyType, SecretKeyParamsBuilder, SignedPublicKey};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rpm::{Dependency, FileOptions, PackageBuilder, Scriptlet};

use strata_dnf::{DnfOptions, RepoConfig};

/// Build time of every fixture package (2022-05-10).
pub const BUILD_TIME: u32 = 1_652_140_800;

pub struct Fixture {
    pub root: PathBuf,
    pub trusted_key: PathBuf,
    pub rogue_key: PathBuf,
    pub base_repo: PathBuf,
    pub rogue_repo: PathBuf,
    /// Loose RPMs signed by the trusted key: greeting-data 3.0 and 1.0.
    pub local_greeting_3: PathBuf,
    pub local_greeting_1: PathBuf,
    /// greeting-data 4.0 signed by the rogue key.
    pub local_greeting_rogue: PathBuf,
}

impl Fixture {
    pub fn base(&self) -> RepoConfig {
        RepoConfig::new("base", format!("file://{}", self.base_repo.display()))
            .with_gpgkey(&self.trusted_key)
    }

    /// The rogue repository, configured (wrongly) with the trusted key.
    pub fn rogue(&self) -> RepoConfig {
        RepoConfig::new("rogue", format!("file://{}", self.rogue_repo.display()))
            .with_gpgkey(&self.trusted_key)
    }

    /// A fresh install root and cache dir for one test.
    pub fn scratch(&self, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.root.join("scratch").join(name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        (dir.join("root"), dir.join("cache"))
    }

    pub fn options(&self, name: &str) -> DnfOptions {
        let (root, cache) = self.scratch(name);
        DnfOptions::new(root, cache, "8")
    }
}

pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| build_fixture().expect("building the test fixture"))
}

fn require_tool(tool: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{tool} is missing: install the Debian package {package}"
    );
}

pub fn require_root() {
    strata_testdistro::require_root("these tests install RPMs with chrooted scriptlets");
}

struct Key {
    secret_asc: String,
    public_asc: String,
}

fn make_key(seed: u64, uid: &str) -> Key {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let params = SecretKeyParamsBuilder::default()
        .key_type(KeyType::Rsa(2048))
        .can_certify(true)
        .can_sign(true)
        .primary_user_id(uid.to_string())
        .build()
        .unwrap();
    let key = params.generate(&mut rng).unwrap();
    let public = SignedPublicKey::from(key.clone());
    Key {
        secret_asc: key.to_armored_string(Default::default()).unwrap(),
        public_asc: public.to_armored_string(Default::default()).unwrap(),
    }
}

/// A package description small enough to write inline.
struct Spec<'a> {
    name: &'a str,
    version: &'a str,
    arch: &'a str,
    requires: Vec<Dependency>,
    provides: Vec<Dependency>,
    conflicts: Vec<Dependency>,
    recommends: Vec<Dependency>,
    files: Vec<(FileOptions, Vec<u8>)>,
    dirs: Vec<&'a str>,
    symlinks: Vec<(&'a str, &'a str)>,
    post: Option<&'a str>,
}

impl<'a> Spec<'a> {
    fn new(name: &'a str, version: &'a str, arch: &'a str) -> Self {
        Spec {
            name,
            version,
            arch,
            requires: vec![],
            provides: vec![],
            conflicts: vec![],
            recommends: vec![],
            files: vec![],
            dirs: vec![],
            symlinks: vec![],
            post: None,
        }
    }

    fn file(mut self, path: &str, content: impl Into<Vec<u8>>) -> Self {
        self.files.push((
            FileOptions::new(path).permissions(0o644).into(),
            content.into(),
        ));
        self
    }

    fn build(self, signer: &rpm::signature::pgp::Signer, out_dir: &Path) -> PathBuf {
        let config = rpm::BuildConfig::v4().source_date(BUILD_TIME);
        let mut b = PackageBuilder::new(
            self.name,
            self.version,
            "MIT",
            self.arch,
            "strata-dnf test package",
        );
        b.using_config(config).release("1").description("test");
        for d in self.requires {
            b.requires(d);
        }
        for d in self.provides {
            b.provides(d);
        }
        for d in self.conflicts {
            b.conflicts(d);
        }
        for d in self.recommends {
            b.recommends(d);
        }
        for d in &self.dirs {
            b.with_dir_entry(FileOptions::dir(*d).permissions(0o755))
                .unwrap();
        }
        for (link, target) in &self.symlinks {
            b.with_symlink(FileOptions::symlink(*link, *target))
                .unwrap();
        }
        for (opts, content) in self.files {
            b.with_file_contents(content, opts).unwrap();
        }
        if let Some(post) = self.post {
            b.post_install_script(Scriptlet::new(post).prog(vec!["/bin/sh"]));
        }
        let pkg = b.build_and_sign(signer.clone()).unwrap();
        let path = out_dir.join(format!(
            "{}-{}-1.{}.rpm",
            self.name, self.version, self.arch
        ));
        pkg.write_file(&path).unwrap();
        path
    }
}

fn createrepo(dir: &Path) {
    let out = Command::new("createrepo_c")
        .arg("-q")
        .arg(dir)
        .output()
        .expect("running createrepo_c");
    assert!(
        out.status.success(),
        "createrepo_c {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build_fixture() -> Result<Fixture, Box<dyn std::error::Error>> {
    require_tool("createrepo_c", "createrepo-c");
    require_tool("rpm", "rpm");
    let busybox = fs::read("/bin/busybox")
        .map_err(|e| format!("reading /bin/busybox (install busybox-static): {e}"))?;

    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "strata-dnf-{}",
        std::env::current_exe()?
            .file_name()
            .unwrap()
            .to_string_lossy()
    ));
    let _ = fs::remove_dir_all(&root);
    let keys = root.join("keys");
    let base_repo = root.join("repos/base");
    let rogue_repo = root.join("repos/rogue");
    let loose = root.join("loose");
    for d in [&keys, &base_repo, &rogue_repo, &loose] {
        fs::create_dir_all(d)?;
    }

    let trusted = make_key(1, "strata test release key <release@strata.invalid>");
    let rogue = make_key(2, "nobody trusts me <rogue@strata.invalid>");
    let trusted_key = keys.join("RPM-GPG-KEY-trusted");
    let rogue_key = keys.join("RPM-GPG-KEY-rogue");
    fs::write(&trusted_key, &trusted.public_asc)?;
    fs::write(&rogue_key, &rogue.public_asc)?;
    let signer = rpm::signature::pgp::Signer::from_asc_bytes(trusted.secret_asc.as_bytes())?;
    let rogue_signer = rpm::signature::pgp::Signer::from_asc_bytes(rogue.secret_asc.as_bytes())?;

    let mut filesystem = Spec::new("filesystem", "1.0", "noarch");
    filesystem.dirs = vec![
        "/usr",
        "/usr/bin",
        "/usr/share",
        "/etc",
        "/var",
        "/var/lib",
        "/var/tmp",
        "/tmp",
    ];
    filesystem.symlinks = vec![("/bin", "usr/bin")];
    filesystem.build(&signer, &base_repo);

    let mut sh = Spec::new("busybox-sh", "1.35", "x86_64");
    sh.requires = vec![Dependency::any("filesystem")];
    sh.provides = vec![Dependency::any("/bin/sh")];
    sh.files.push((
        FileOptions::new("/usr/bin/sh").permissions(0o755).into(),
        busybox,
    ));
    sh.build(&signer, &base_repo);

    for version in ["0.9", "1.0"] {
        let mut hello = Spec::new("hello", version, "x86_64")
            .file("/usr/share/hello/version", version)
            .file("/usr/bin/hello", "#!/bin/sh\necho hello\n");
        hello.files.push((
            FileOptions::new("/usr/share/doc/hello/README")
                .permissions(0o644)
                .doc()
                .into(),
            b"read me\n".to_vec(),
        ));
        hello.dirs = vec!["/var/lib/hello"];
        hello.requires = vec![
            Dependency::any("filesystem"),
            Dependency::greater_eq("greeting-data", "2"),
            Dependency::script_post("/bin/sh"),
        ];
        hello.recommends = vec![Dependency::any("hello-extras")];
        hello.post = Some("echo \"hello post $1\" > /var/lib/hello/post-ran\n");
        hello.build(&signer, &base_repo);
    }

    Spec::new("greeting-data", "2.0", "noarch")
        .file("/usr/share/greeting/data.txt", "v2\n")
        .build(&signer, &base_repo);
    Spec::new("hello-extras", "1.0", "noarch")
        .file("/usr/share/hello-extras/extra", "extra\n")
        .build(&signer, &base_repo);
    let mut broken = Spec::new("broken", "1.0", "noarch").file("/usr/share/broken", "x");
    broken.requires = vec![Dependency::any("does-not-exist")];
    broken.build(&signer, &base_repo);
    let mut conflict =
        Spec::new("hello-conflict", "1.0", "noarch").file("/usr/share/hello-conflict", "x");
    conflict.conflicts = vec![Dependency::any("hello")];
    conflict.build(&signer, &base_repo);
    createrepo(&base_repo);

    Spec::new("rogue", "1.0", "noarch")
        .file("/usr/share/rogue", "rogue\n")
        .build(&rogue_signer, &rogue_repo);
    createrepo(&rogue_repo);

    let local_greeting_3 = Spec::new("greeting-data", "3.0", "noarch")
        .file("/usr/share/greeting/data.txt", "v3\n")
        .build(&signer, &loose);
    let local_greeting_1 = Spec::new("greeting-data", "1.0", "noarch")
        .file("/usr/share/greeting/data.txt", "v1\n")
        .build(&signer, &loose);
    let rogue_dir = loose.join("rogue");
    fs::create_dir_all(&rogue_dir)?;
    let local_greeting_rogue = Spec::new("greeting-data", "4.0", "noarch")
        .file("/usr/share/greeting/data.txt", "v4\n")
        .build(&rogue_signer, &rogue_dir);

    Ok(Fixture {
        root,
        trusted_key,
        rogue_key,
        base_repo,
        rogue_repo,
        local_greeting_3,
        local_greeting_1,
        local_greeting_rogue,
    })
}

/// `rpm -qa` in `root`, sorted NEVRAs: the reference tool's view of the rpmdb.
pub fn rpm_qa(root: &Path) -> Vec<String> {
    let out = Command::new("rpm")
        .arg("--root")
        .arg(root)
        .args(["--dbpath", "/var/lib/rpm", "-qa", "--qf", "%{NEVRA}\n"])
        .output()
        .expect("running rpm -qa");
    assert!(
        out.status.success(),
        "rpm -qa: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// A minimal static HTTP server on 127.0.0.1 serving `dir`, for testing
/// remote repositories. Runs until the test process exits.
pub fn serve_dir(dir: PathBuf) -> String {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // Skip the headers.
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .to_string();
            let rel = path.trim_start_matches('/').split('?').next().unwrap_or("");
            let file = dir.join(rel);
            let body = if rel.split('/').any(|c| c == "..") {
                None
            } else {
                fs::read(&file).ok()
            };
            let _ = match body {
                Some(body) => stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .and_then(|_| stream.write_all(&body)),
                None => stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            };
        }
    });
    url
}

/// Copies a directory tree (regular files and directories only).
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}
