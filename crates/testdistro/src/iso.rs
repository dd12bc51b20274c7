//! Live ISOs as the ecosystem's tools read them, for tests: files found
//! through the plain ISO 9660 directories (upper-case 8.3 names, `;1`
//! dropped, one extent each), as coreos-installer finds them, and its
//! `iso ignition embed` done the same way: the config as an xz-compressed
//! newc cpio (`config.ign`, mode 0600, CRC32 check, which the kernel
//! requires) written into the area `coreos/igninfo.json` names, padded
//! with zeros.

use std::ops::Range;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

const SECTOR: usize = 2048;

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes")) as usize
}

/// Where `path` (plain ISO 9660 names, e.g. `COREOS/IGNINFO.JSO`) is in
/// the image.
pub fn find(iso: &[u8], path: &str) -> Result<Range<usize>> {
    ensure!(iso.len() >= 17 * SECTOR, "not an ISO: too short");
    let pvd = &iso[16 * SECTOR..17 * SECTOR];
    ensure!(&pvd[..6] == b"\x01CD001", "no primary volume descriptor");
    let root = &pvd[156..156 + 34];
    let mut at = u32_at(root, 2) * SECTOR..u32_at(root, 2) * SECTOR + u32_at(root, 10);
    for part in path.split('/') {
        let dir = iso
            .get(at.clone())
            .context("a directory beyond the image")?;
        let mut pos = 0;
        let mut found = None;
        while pos < dir.len() {
            let size = usize::from(dir[pos]);
            if size == 0 {
                pos = (pos / SECTOR + 1) * SECTOR;
                continue;
            }
            let rec = &dir[pos..pos + size];
            let name = String::from_utf8_lossy(&rec[33..33 + usize::from(rec[32])]).into_owned();
            if name.split(';').next().unwrap_or("").trim_end_matches('.') == part {
                let start = u32_at(rec, 2) * SECTOR;
                found = Some(start..start + u32_at(rec, 10));
                break;
            }
            pos += size;
        }
        at = match found {
            Some(r) => r,
            None => bail!("{path}: no {part} in the ISO 9660 tree"),
        };
    }
    Ok(at)
}

/// The file at `path`'s bytes.
pub fn file<'a>(iso: &'a [u8], path: &str) -> Result<&'a [u8]> {
    let at = find(iso, path)?;
    iso.get(at).context("a file beyond the image")
}

/// Embeds an Ignition config into the ISO's embed area, as
/// `coreos-installer iso ignition embed` does.
pub fn embed_ignition(iso: &mut [u8], config: &[u8]) -> Result<()> {
    let info: serde_json::Value = serde_json::from_slice(file(iso, "COREOS/IGNINFO.JSO")?)?;
    let name = info["file"]
        .as_str()
        .context("igninfo.json has no file")?
        .to_ascii_uppercase();
    let area = find(iso, &name)?;
    let dir = tempfile::tempdir()?;
    let config_path = dir.path().join("config.ign");
    std::fs::write(&config_path, config)?;
    std::fs::set_permissions(
        &config_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )?;
    let cpio = strata_process::run_with_input(
        Command::new("cpio")
            .args(["-o", "-H", "newc", "--quiet", "-R", "0:0"])
            .current_dir(dir.path()),
        Some(b"config.ign\n"),
    )?
    .stdout;
    let xz = strata_process::run_with_input(
        Command::new("xz").args(["-9", "--check=crc32", "--stdout"]),
        Some(&cpio),
    )?
    .stdout;
    ensure!(
        xz.len() <= area.len(),
        "the config ({} bytes compressed) does not fit the {}-byte area",
        xz.len(),
        area.len()
    );
    let region = &mut iso[area];
    region.fill(0);
    region[..xz.len()].copy_from_slice(&xz);
    Ok(())
}
