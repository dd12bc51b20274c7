//! newc cpio archives as the kernel unpacks an initrd: one archive after
//! another, each on a 4-byte boundary.
//!
//! Four uses: the device nodes an initramfs generator run without mknod
//! leaves out ([`append_device_nodes`]), the compression of an initramfs
//! its generator left uncompressed ([`gzip_main_archive`]), the live root
//! image's one member (strata-disk), and the names an initramfs holds
//! ([`read_members`], for the initramfs cache). [`read_header`] also
//! reads the headers of an rpm payload's archive, which is newc too
//! (strata-compose's package cache).

use std::io::Write;
use std::path::Path;

/// One entry's header fields (owned by root, one link).
#[derive(Debug)]
pub struct Entry<'a> {
    pub ino: u32,
    pub mode: u32,
    pub mtime: i64,
    pub size: u64,
    /// A device node's major and minor.
    pub rdev: (u32, u32),
    pub name: &'a str,
}

impl Entry<'_> {
    /// The entry that ends an archive.
    pub fn trailer() -> Self {
        Entry {
            ino: 0,
            mode: 0,
            mtime: 0,
            size: 0,
            rdev: (0, 0),
            name: "TRAILER!!!",
        }
    }
}

/// The header with its name, padded to 4 bytes (the data follows).
pub fn entry(e: &Entry) -> Vec<u8> {
    let fields = [
        e.ino,
        e.mode,
        0, // uid
        0, // gid
        1, // nlink
        u32::try_from(e.mtime).unwrap_or(0),
        u32::try_from(e.size).unwrap_or(u32::MAX),
        0, // devmajor
        0, // devminor
        e.rdev.0,
        e.rdev.1,
        u32::try_from(e.name.len() + 1).unwrap_or(0),
        0, // check
    ];
    let mut h = String::from("070701");
    for f in fields {
        h.push_str(&format!("{f:08x}"));
    }
    let mut bytes = h.into_bytes();
    bytes.extend_from_slice(e.name.as_bytes());
    bytes.push(0);
    bytes.resize(bytes.len() + pad4(bytes.len() as u64), 0);
    bytes
}

/// The zeros after `n` bytes up to a 4-byte boundary.
pub fn pad4(n: u64) -> usize {
    ((4 - n % 4) % 4) as usize
}

/// The size of a newc header, before the member's name.
pub const HEADER_SIZE: usize = 110;

/// What a newc header (`070701`, or `070702` with a checksum field) says
/// of its member.
#[derive(Debug, PartialEq, Eq)]
pub struct Header {
    pub mode: u32,
    /// The content's size.
    pub size: u64,
    /// The name's size, its NUL included.
    pub name_size: usize,
}

/// Reads the newc header `bytes` starts with: an error when it is short,
/// has another magic or a field that is not hexadecimal, or names a
/// member with no name or one of more than 4096 bytes (rpm's limit).
pub fn read_header(bytes: &[u8]) -> std::io::Result<Header> {
    let bad =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("cpio: {what}"));
    if bytes.len() < HEADER_SIZE || !matches!(&bytes[..6], b"070701" | b"070702") {
        return Err(bad("a newc header was expected"));
    }
    let field = |i: usize| -> std::io::Result<u64> {
        let hex = std::str::from_utf8(&bytes[6 + 8 * i..14 + 8 * i]).map_err(|_| bad("header"))?;
        u64::from_str_radix(hex, 16).map_err(|_| bad("header"))
    };
    let (mode, size, name_size) = (field(1)?, field(6)?, field(11)?);
    if name_size == 0 || name_size > 4096 {
        return Err(bad(&format!("a member's name of {name_size} bytes")));
    }
    Ok(Header {
        mode: mode as u32,
        size,
        name_size: name_size as usize,
    })
}

/// The device nodes dracut makes when mknod is allowed (the console the
/// kernel opens for init before anything mounts /dev, and the others
/// early programs use).
const DEVICE_NODES: &[(&str, u32, u32, u32)] = &[
    ("dev/console", 0o600, 5, 1),
    ("dev/kmsg", 0o600, 1, 11),
    ("dev/null", 0o666, 1, 3),
    ("dev/random", 0o666, 1, 8),
    ("dev/urandom", 0o666, 1, 9),
];

/// Appends [`DEVICE_NODES`] to the initramfs at `path` as an archive of
/// their own, dated `epoch`. An initramfs generator run with mknod refused
/// (in a user namespace; dracut with `DRACUT_NO_MKNOD`) leaves them out;
/// appended the same way as root or not, the bytes do not depend on who
/// built them.
pub fn append_device_nodes(path: &Path, epoch: i64) -> std::io::Result<()> {
    let mut archive = Vec::new();
    for (ino, (name, mode, major, minor)) in (1..).zip(DEVICE_NODES) {
        archive.extend(entry(&Entry {
            ino,
            mode: 0o020_000 | mode,
            mtime: epoch,
            size: 0,
            rdev: (*major, *minor),
            name,
        }));
    }
    archive.extend(entry(&Entry::trailer()));
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    let len = f.metadata()?.len();
    f.write_all(&vec![0u8; pad4(len)])?;
    f.write_all(&archive)
}

/// The name of the member that marks an early archive: dracut's early
/// microcode archive, which the kernel reads uncompressed, before the
/// main one.
const EARLY_MARKER: &str = "early_cpio";

/// Compresses the main archive of the uncompressed initramfs at `path` in
/// place with [`crate::gzip`] at `level`, leaving the early archives
/// before it (those holding [`EARLY_MARKER`]) as they are, as dracut lays
/// out an image it compresses itself. `false`, and the file untouched,
/// when no uncompressed archive follows the early ones (the image was
/// compressed already). The file is rewritten in place.
pub fn gzip_main_archive(path: &Path, level: u8) -> std::io::Result<bool> {
    let image = std::fs::read(path)?;
    let mut at = 0;
    loop {
        let start = at + image[at..].iter().take_while(|&&b| b == 0).count();
        if !image[start..].starts_with(b"070701") {
            return Ok(false);
        }
        let mut early = false;
        let rest = read_archive(&image[start..], &mut |name, _, _| {
            early |= name == EARLY_MARKER;
        })?;
        if !early {
            at = start;
            break;
        }
        at = image.len() - rest.len();
    }
    let mut gz = crate::gzip::GzipWriter::new(image[..at].to_vec(), level)?;
    gz.write_all(&image[at..])?;
    let out = gz.finish()?;
    // In place, as the generator wrote it: a new entry in the directory
    // would change the directory, which a derived layer records.
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?
        .write_all(&out)?;
    Ok(true)
}

/// Calls `visit` with the name, mode and data of each member of an initrd
/// as the kernel unpacks it: uncompressed newc archives and gzip members
/// holding them, one after another, with zeros between them. `false`
/// when a part is neither (an image compressed otherwise): the caller
/// cannot know all its members.
pub fn read_members(
    image: &[u8],
    visit: &mut dyn FnMut(&str, u32, &[u8]),
) -> std::io::Result<bool> {
    let mut rest = image;
    loop {
        while let [0, tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return Ok(true);
        }
        if rest.starts_with(b"070701") {
            rest = read_archive(rest, visit)?;
        } else if rest.starts_with(&[0x1f, 0x8b]) {
            let mut decoder = flate2::bufread::GzDecoder::new(rest);
            let mut inner = Vec::new();
            std::io::Read::read_to_end(&mut decoder, &mut inner)?;
            rest = decoder.into_inner();
            let mut tail = inner.as_slice();
            loop {
                while let [0, t @ ..] = tail {
                    tail = t;
                }
                if tail.is_empty() {
                    break;
                }
                if !tail.starts_with(b"070701") {
                    return Ok(false);
                }
                tail = read_archive(tail, visit)?;
            }
        } else {
            return Ok(false);
        }
    }
}

/// Reads one newc archive at the start of `bytes` up to its trailer;
/// returns what follows it.
fn read_archive<'a>(
    mut bytes: &'a [u8],
    visit: &mut dyn FnMut(&str, u32, &[u8]),
) -> std::io::Result<&'a [u8]> {
    let bad =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("cpio: {what}"));
    let mut at = 0u64;
    loop {
        let Header {
            mode,
            size,
            name_size,
        } = read_header(bytes)?;
        let name_end = HEADER_SIZE + name_size;
        let data_start = name_end + pad4(at + name_end as u64);
        let data_end = usize::try_from(size)
            .ok()
            .and_then(|s| data_start.checked_add(s))
            .filter(|&e| e <= bytes.len() && name_end <= bytes.len())
            .ok_or_else(|| bad("an entry runs past the end"))?;
        let name = std::str::from_utf8(&bytes[HEADER_SIZE..name_end - 1])
            .map_err(|_| bad("a name is not UTF-8"))?;
        let next = data_end + pad4(at + data_end as u64);
        let next = next.min(bytes.len());
        if name == "TRAILER!!!" {
            return Ok(&bytes[next..]);
        }
        let name = name.trim_start_matches("./");
        if !name.is_empty() && name != "." {
            visit(name, mode, &bytes[data_start..data_end]);
        }
        at += next as u64;
        bytes = &bytes[next..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn entries_are_newc_and_aligned() {
        let h = entry(&Entry {
            ino: 1,
            mode: 0o100_644,
            mtime: 0,
            size: 5,
            rdev: (0, 0),
            name: "a",
        });
        assert!(h.starts_with(b"070701"));
        assert_eq!(h.len(), 112);
        assert_eq!(entry(&Entry::trailer()).len() % 4, 0);
    }

    #[test]
    fn device_nodes_follow_on_a_4_byte_boundary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("initrd");
        std::fs::write(&p, b"abcde").unwrap();
        append_device_nodes(&p, 7).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[5..8], &[0, 0, 0]);
        assert!(bytes[8..].starts_with(b"070701"));
        assert!(bytes.ends_with(b"TRAILER!!!\0\0\0\0"));
    }

    /// A newc archive of `names`, each holding its name, as `cpio -o`
    /// writes it (padded to 512 bytes).
    fn archive(names: &[&str]) -> Vec<u8> {
        let mut a = Vec::new();
        for (ino, name) in (1..).zip(names) {
            a.extend(entry(&Entry {
                ino,
                mode: 0o100_644,
                mtime: 0,
                size: name.len() as u64,
                rdev: (0, 0),
                name,
            }));
            a.extend(name.as_bytes());
            a.resize(a.len() + pad4(a.len() as u64), 0);
        }
        a.extend(entry(&Entry::trailer()));
        a.resize(a.len().div_ceil(512) * 512, 0);
        a
    }

    #[test]
    fn the_main_archive_is_gzipped_after_the_early_one() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("initrd");
        let early = archive(&["early_cpio", "kernel/x86/microcode/GenuineIntel.bin"]);
        let main = archive(&["init", "usr/bin/sh"]);
        std::fs::write(&p, [early.clone(), main.clone()].concat()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(gzip_main_archive(&p, 6).unwrap());
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..early.len()], &early[..]);
        assert!(bytes[early.len()..].starts_with(&crate::gzip::GZIP_HEADER));
        let mut back = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&bytes[early.len()..]),
            &mut back,
        )
        .unwrap();
        assert_eq!(back, main);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut names = Vec::new();
        assert!(read_members(&bytes, &mut |n, _, _| names.push(n.to_string())).unwrap());
        assert_eq!(names.len(), 4, "{names:?}");

        // Compressed already: untouched. Without an early archive, all of it.
        assert!(!gzip_main_archive(&p, 6).unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), bytes);
        std::fs::write(&p, &main).unwrap();
        assert!(gzip_main_archive(&p, 6).unwrap());
        assert!(std::fs::read(&p)
            .unwrap()
            .starts_with(&crate::gzip::GZIP_HEADER));
    }

    #[test]
    fn member_names_cross_gzip_and_plain_archives() {
        let mut plain = Vec::new();
        for (ino, name) in [(1, "usr"), (2, "usr/bin/sh")] {
            plain.extend(entry(&Entry {
                ino,
                mode: 0o100_644,
                mtime: 0,
                size: 3,
                rdev: (0, 0),
                name,
            }));
            plain.extend(b"abc\0");
        }
        plain.extend(entry(&Entry::trailer()));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        let mut image = gz.finish().unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("initrd");
        std::fs::write(&p, &image).unwrap();
        append_device_nodes(&p, 7).unwrap();
        image = std::fs::read(&p).unwrap();
        let mut names = BTreeSet::new();
        assert!(read_members(&image, &mut |n, _, data| {
            names.insert((n.to_string(), data.to_vec()));
        })
        .unwrap());
        assert!(
            names.contains(&("usr/bin/sh".into(), b"abc".to_vec())),
            "{names:?}"
        );
        assert!(names.contains(&("dev/console".into(), vec![])), "{names:?}");
        assert!(!read_members(b"\x28\xb5\x2f\xfd", &mut |_, _, _| {}).unwrap());
    }
}
