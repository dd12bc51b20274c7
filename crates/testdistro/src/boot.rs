//! Boots kernels and disk images under qemu and waits for the fixture's
//! boot marker, for tests.
//!
//! The fixture's init prints `STRATA-BOOT-OK version=… openshift=…` on the
//! serial console and powers off. This module starts qemu (TCG: KVM hangs
//! Linux guests on the machines strata is tested on), reads the console,
//! and returns the marker line, or fails with the console's tail after a
//! timeout. It only ever ends the qemu process it started.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub const MARKER: &str = "STRATA-BOOT-OK";

/// Where the firmware finds what to boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Firmware {
    /// Direct kernel boot: qemu loads kernel and initramfs itself.
    Direct {
        kernel: PathBuf,
        initrd: PathBuf,
        append: String,
    },
    /// SeaBIOS boots the disk's MBR/BIOS-BOOT GRUB.
    Bios,
    /// OVMF boots the disk's EFI system partition.
    Uefi,
}

/// One boot.
#[derive(Clone, Debug)]
pub struct BootSpec {
    pub firmware: Firmware,
    /// The virtio disk; none when empty (a live system).
    pub disk: PathBuf,
    /// An ISO in the CD drive (boot order: disk, then CD).
    pub cdrom: Option<PathBuf>,
    /// `raw` or `qcow2`.
    pub disk_format: String,
    pub timeout: Duration,
    pub memory_mib: u32,
    /// Whether the guest's writes are thrown away (`snapshot=on`); a node
    /// test that boots a disk again keeps them.
    pub snapshot: bool,
    /// Files given to the guest through qemu's firmware configuration
    /// device, by name: `opt/com.coreos/config` is where Ignition's qemu
    /// platform reads its config.
    pub fw_cfg: Vec<(String, PathBuf)>,
}

impl BootSpec {
    /// Booting a live ISO from the CD drive, with no disk.
    pub fn live_cd(firmware: Firmware, iso: impl Into<PathBuf>) -> Self {
        let mut spec = Self::new(firmware, PathBuf::new());
        spec.cdrom = Some(iso.into());
        spec.memory_mib = 2048;
        spec
    }

    pub fn new(firmware: Firmware, disk: impl Into<PathBuf>) -> Self {
        Self {
            firmware,
            disk: disk.into(),
            cdrom: None,
            disk_format: "raw".into(),
            timeout: Duration::from_secs(180),
            memory_mib: 1024,
            snapshot: true,
            fw_cfg: Vec::new(),
        }
    }
}

/// What the guest printed.
#[derive(Debug)]
pub struct BootResult {
    /// The marker line, e.g. `STRATA-BOOT-OK version=8.6 (Ootpa) openshift=none`.
    pub marker: String,
    pub console: String,
    pub elapsed: Duration,
}

const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/// Boots and waits for the marker line.
pub fn boot(spec: &BootSpec) -> Result<BootResult> {
    strata_process::require("qemu-system-x86_64")?;
    let scratch = tempfile::tempdir()?;
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-accel", "tcg", "-nographic", "-no-reboot", "-nodefaults"])
        .args(["-serial", "stdio", "-m", &spec.memory_mib.to_string()]);
    if !spec.disk.as_os_str().is_empty() {
        cmd.arg("-drive").arg(format!(
            "file={},if=virtio,format={},snapshot={}",
            spec.disk.display(),
            spec.disk_format,
            if spec.snapshot { "on" } else { "off" }
        ));
    }
    if let Some(iso) = &spec.cdrom {
        cmd.arg("-cdrom").arg(iso);
    }
    for (name, file) in &spec.fw_cfg {
        cmd.arg("-fw_cfg")
            .arg(format!("name={name},file={}", file.display()));
    }
    match &spec.firmware {
        Firmware::Direct {
            kernel,
            initrd,
            append,
        } => {
            cmd.arg("-kernel")
                .arg(kernel)
                .arg("-initrd")
                .arg(initrd)
                .arg("-append")
                .arg(append);
        }
        Firmware::Bios => {}
        Firmware::Uefi => {
            if !std::path::Path::new(OVMF_CODE).exists() {
                bail!("{OVMF_CODE} missing: install the Debian package ovmf");
            }
            let vars = scratch.path().join("OVMF_VARS.fd");
            std::fs::copy(OVMF_VARS, &vars).context("copying the OVMF variable store")?;
            cmd.args(["-machine", "q35"])
                .arg("-drive")
                .arg(format!(
                    "if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}"
                ))
                .arg("-drive")
                .arg(format!(
                    "if=pflash,format=raw,unit=1,file={}",
                    vars.display()
                ));
        }
    }
    tracing::debug!("{}", strata_process::display(&cmd));
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting qemu-system-x86_64")?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            if tx
                .send(String::from_utf8_lossy(&line).into_owned())
                .is_err()
            {
                break;
            }
        }
    });
    let mut console = String::new();
    let mut marker = None;
    loop {
        let left = spec.timeout.saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let clean = line.trim_end_matches('\r').to_string();
                console.push_str(&clean);
                console.push('\n');
                if let Some(at) = clean.find(MARKER) {
                    marker = Some(clean[at..].trim().to_string());
                }
            }
            // Timed out, or qemu closed its console (the guest powered off).
            Err(_) => break,
        }
    }
    let timed_out = start.elapsed() >= spec.timeout;
    if timed_out {
        let _ = child.kill();
    }
    let status = child.wait().context("waiting for qemu")?;
    let elapsed = start.elapsed();
    let tail: String = {
        let lines: Vec<&str> = console.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    // The fixture's own scripts fail loudly, not quietly: a shell error of
    // the initramfs or init on the console fails the boot.
    if let Some(line) = console
        .lines()
        .find(|l| l.contains("can't open") || l.contains("/init: line "))
    {
        bail!("the boot printed a shell error: {line}; console tail:\n{tail}");
    }
    match marker {
        Some(marker) => Ok(BootResult {
            marker,
            console,
            elapsed,
        }),
        None if timed_out => bail!(
            "no {MARKER} on the console within {:?}; console tail:\n{tail}",
            spec.timeout
        ),
        None => bail!("qemu exited ({status}) without {MARKER}; console tail:\n{tail}"),
    }
}
