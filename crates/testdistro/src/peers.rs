//! Real peers that tests talk to: an OCI registry on 127.0.0.1 (Debian's
//! docker-registry, distribution v2) and the ostree-ext client built from
//! `tests/ostree-ext-compat` (a workspace of its own: it pulls ostree 0.19
//! and glib 0.18). Test support only; the product never uses this module.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A docker-registry serving from a temporary directory on a free port of
/// 127.0.0.1; killed when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Result<Registry> {
        strata_process::require("docker-registry")?;
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                dir.path().join("storage").display()
            ),
        )?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting docker-registry")?;
        let mut registry = Registry {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&registry.addr).is_err() {
            if Instant::now() > deadline {
                let _ = registry.child.kill();
                bail!("docker-registry did not start on {}", registry.addr);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(registry)
    }

    /// `docker://127.0.0.1:PORT/NAME`.
    pub fn reference(&self, name: &str) -> String {
        format!("docker://{}/{name}", self.addr)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP relay on a free port of 127.0.0.1 to `upstream`, counting the
/// bytes `upstream` sends: what a client read from a registry, measured on
/// the wire. Relays for as long as the test process lives.
pub struct CountingRelay {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    received: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl CountingRelay {
    pub fn start(upstream: &str) -> Result<CountingRelay> {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let received = Arc::new(AtomicU64::new(0));
        let upstream = upstream.to_string();
        let counter = received.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let (Ok(mut client_w), Ok(mut server_r)) = (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                let (mut client_r, mut server_w) = (client, server);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut client_r, &mut server_w);
                    let _ = server_w.shutdown(std::net::Shutdown::Write);
                });
                let counter = counter.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = std::io::Read::read(&mut server_r, &mut buf) {
                        if n == 0 || std::io::Write::write_all(&mut client_w, &buf[..n]).is_err() {
                            break;
                        }
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    let _ = client_w.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Ok(CountingRelay { addr, received })
    }

    /// Bytes the upstream has sent through the relay so far.
    pub fn received(&self) -> u64 {
        self.received.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The ostree-ext client (`import REPO IMAGE [--insecure]`,
/// `deploy SYSROOT STATEROOT IMAGE`), built once per test process.
pub fn ostree_ext_client() -> Result<&'static Path> {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    if let Some(b) = BIN.get() {
        return Ok(b);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ostree-ext-compat");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    strata_process::run(
        Command::new(cargo)
            .args(["build", "--quiet", "--manifest-path"])
            .arg(root.join("Cargo.toml")),
    )
    .context("building the ostree-ext client (tests/ostree-ext-compat)")?;
    Ok(BIN.get_or_init(|| root.join("target/debug/strata-ostree-ext-compat")))
}
