//! Lists what an initramfs holds, the way `lsinitrd` does, for tests that
//! check what a generator put in: an image is one or more newc cpio
//! archives, each either plain or compressed (gzip, zstd, xz), one after
//! the other (dracut puts an uncompressed early cpio first when it has
//! one).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// The paths of every entry (without a leading `/`), in archive order.
pub fn list(path: &Path) -> Result<Vec<String>> {
    let image = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut names = Vec::new();
    let mut rest: &[u8] = &image;
    loop {
        while rest.first() == Some(&0) {
            rest = &rest[1..];
        }
        if rest.is_empty() {
            return Ok(names);
        }
        if rest.starts_with(b"070701") || rest.starts_with(b"070702") {
            rest = read_cpio(rest, &mut names)?;
            continue;
        }
        let tool = match rest {
            [0x1f, 0x8b, ..] => "gzip",
            [0x28, 0xb5, 0x2f, 0xfd, ..] => "zstd",
            [0xfd, b'7', b'z', b'X', b'Z', ..] => "xz",
            _ => bail!(
                "{}: neither a cpio archive nor a known compression at byte {}",
                path.display(),
                image.len() - rest.len()
            ),
        };
        // The compressed part runs to the end of the image.
        let plain =
            decompress(tool, rest).with_context(|| format!("{}: {tool}", path.display()))?;
        let mut inner: &[u8] = &plain;
        while inner.starts_with(b"0707") {
            inner = read_cpio(inner, &mut names)?;
            while inner.first() == Some(&0) {
                inner = &inner[1..];
            }
        }
        return Ok(names);
    }
}

fn decompress(tool: &str, data: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    let mut child = Command::new(tool)
        .args(["-d", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {tool}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        // Trailing padding after the stream makes some tools stop writing early.
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output()?;
    let _ = writer.join();
    if out.stdout.is_empty() {
        bail!("{tool} gave nothing ({})", out.status);
    }
    Ok(out.stdout)
}

/// Reads one newc archive up to its trailer; returns what follows it.
fn read_cpio<'a>(mut data: &'a [u8], names: &mut Vec<String>) -> Result<&'a [u8]> {
    let start = data.len();
    let pad = |consumed: usize| (4 - consumed % 4) % 4;
    loop {
        if data.len() < 110 {
            bail!("truncated cpio header");
        }
        let field = |i: usize| -> Result<usize> {
            let text = std::str::from_utf8(&data[6 + 8 * i..14 + 8 * i])?;
            Ok(usize::from_str_radix(text, 16)?)
        };
        let (filesize, namesize) = (field(6)?, field(11)?);
        let name_end = 110 + namesize;
        let name = String::from_utf8_lossy(&data[110..name_end - 1]).into_owned();
        let mut at = name_end;
        at += pad(start - data.len() + at);
        let data_end = at + filesize;
        at = data_end + pad(start - data.len() + data_end);
        if at > data.len() {
            bail!("truncated cpio entry {name}");
        }
        data = &data[at..];
        if name == "TRAILER!!!" {
            return Ok(data);
        }
        names.push(name.trim_start_matches("./").to_string());
    }
}
