//! Deterministic tar writing and safe tar path handling.
//!
//! Layers must be byte-identical across runs and machines, so this module
//! sets every header field itself instead of trusting a library's defaults
//! (`tar::Builder` reads them from the file system): GNU format, the
//! caller's fixed mtime, numeric uid/gid only (no user or group names), GNU
//! `L`/`K` records for long names, base-256 for numbers that do not fit in
//! octal. The numeric fields go through `tar::Header`'s setters; the name
//! and the checksum are written here (`header` says why). Names and
//! link targets are written exactly as given — a symlink target like
//! `../..//sbin/chkconfig` is content, and rewriting it would change the
//! ostree checksum of the file.
//!
//! The reading side ([`normalize_entry_path`]) turns a tar entry name into a
//! relative path with no `.` or `..` parts, or refuses it. This module must not
//! know about ostree or OCI; it only speaks tar.

use std::io::{self, Read, Write};

use strata_process::gzip::BlockIndex;
use tar::EntryType;

/// Size of a tar block.
const BLOCK: usize = 512;

/// Owner and permission bits of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits including setuid/setgid/sticky (`mode & 0o7777`).
    pub mode: u32,
}

impl Meta {
    /// root:root with the given permissions.
    pub(crate) fn root(mode: u32) -> Self {
        Self {
            uid: 0,
            gid: 0,
            mode,
        }
    }
}

/// Writes a tar stream entry by entry; [`TarWriter::finish`] writes the
/// end-of-archive marker.
pub(crate) struct TarWriter<W: Write> {
    out: W,
    mtime: u64,
    /// Bytes written so far.
    pos: u64,
    /// Where the gzip stream the tar goes into starts blocks.
    cuts: Option<BlockIndex>,
}

/// Files from this size on get gzip blocks of their own
/// ([`TarWriter::cut_at_large_files`]).
pub(crate) const LARGE_FILE: u64 = 256 * 1024;

impl<W: Write> TarWriter<W> {
    /// A writer that stamps every entry with `mtime`.
    pub(crate) fn new(out: W, mtime: u64) -> Self {
        Self {
            out,
            mtime,
            pos: 0,
            cuts: None,
        }
    }

    /// Makes the gzip stream this tar goes into (through `index`) start a
    /// block where each file of [`LARGE_FILE`] bytes or more starts, and
    /// again where it ends: its blocks are then the same whatever comes
    /// before it, and a file before it that grows or shrinks moves no
    /// block after it.
    pub(crate) fn cut_at_large_files(&mut self, index: BlockIndex) {
        self.cuts = Some(index);
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn cut(&self, size: u64) {
        if let Some(index) = self.cuts.as_ref().filter(|_| size >= LARGE_FILE) {
            index.cut_at(self.pos);
        }
    }

    /// Stamps the following entries with `mtime`.
    pub(crate) fn set_mtime(&mut self, mtime: u64) {
        self.mtime = mtime;
    }

    /// A directory; `path` gets a trailing `/`.
    pub(crate) fn dir(&mut self, path: &str, meta: Meta) -> io::Result<()> {
        let name = if path.ends_with('/') {
            path.to_string()
        } else {
            format!("{path}/")
        };
        self.entry(name.as_bytes(), EntryType::Directory, meta, 0, b"")
    }

    /// A regular file of `size` bytes read from `data`; fails if `data` has
    /// fewer bytes.
    pub(crate) fn file(
        &mut self,
        path: &str,
        meta: Meta,
        size: u64,
        data: &mut dyn Read,
    ) -> io::Result<()> {
        self.entry(path.as_bytes(), EntryType::Regular, meta, size, b"")?;
        self.cut(size);
        let copied = io::copy(&mut data.take(size), &mut self.out)?;
        self.pos += copied;
        if copied != size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{path}: expected {size} bytes, read {copied}"),
            ));
        }
        self.pad(size)?;
        self.cut(size);
        Ok(())
    }

    /// A regular file from a buffer.
    pub(crate) fn data(&mut self, path: &str, meta: Meta, data: &[u8]) -> io::Result<()> {
        self.file(path, meta, data.len() as u64, &mut &data[..])
    }

    /// A symbolic link; `target` is stored verbatim.
    pub(crate) fn symlink(&mut self, path: &str, meta: Meta, target: &str) -> io::Result<()> {
        self.entry(
            path.as_bytes(),
            EntryType::Symlink,
            meta,
            0,
            target.as_bytes(),
        )
    }

    /// A hard link to an earlier entry of this stream.
    pub(crate) fn hardlink(&mut self, path: &str, meta: Meta, target: &str) -> io::Result<()> {
        self.entry(path.as_bytes(), EntryType::Link, meta, 0, target.as_bytes())
    }

    /// PAX extended header records (`key=value`) for the next entry, e.g.
    /// `SCHILY.xattr.security.capability`.
    pub(crate) fn pax(&mut self, records: &[(String, Vec<u8>)]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut data = Vec::new();
        for (key, value) in records {
            // "<len> <key>=<value>\n", where <len> counts its own digits.
            let rest = key.len() + value.len() + 3;
            let mut len = rest + 1;
            while len.to_string().len() + rest != len {
                len = len.to_string().len() + rest;
            }
            data.extend_from_slice(format!("{len} {key}=").as_bytes());
            data.extend_from_slice(value);
            data.push(b'\n');
        }
        let h = header(
            b"././@PaxHeader",
            EntryType::XHeader,
            Meta::root(0o644),
            data.len() as u64,
            b"",
            0,
        )?;
        self.put(&h)?;
        self.put(&data)?;
        self.pad(data.len() as u64)
    }

    /// Writes the end-of-archive marker and returns the inner writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.put(&[0u8; 2 * BLOCK])?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn pad(&mut self, size: u64) -> io::Result<()> {
        let rem = (size % BLOCK as u64) as usize;
        if rem != 0 {
            self.put(&[0u8; BLOCK][..BLOCK - rem])?;
        }
        Ok(())
    }

    fn entry(
        &mut self,
        name: &[u8],
        kind: EntryType,
        meta: Meta,
        size: u64,
        link: &[u8],
    ) -> io::Result<()> {
        if name.contains(&0) || link.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "NUL byte in tar entry name",
            ));
        }
        if link.len() > 100 {
            self.long_record(EntryType::GNULongLink, link)?;
        }
        if name.len() > 100 {
            self.long_record(EntryType::GNULongName, name)?;
        }
        let h = header(
            &name[..name.len().min(100)],
            kind,
            meta,
            size,
            &link[..link.len().min(100)],
            self.mtime,
        )?;
        self.put(&h)
    }

    /// GNU long name (`L`) or long link (`K`) record.
    fn long_record(&mut self, kind: EntryType, value: &[u8]) -> io::Result<()> {
        let size = value.len() as u64 + 1;
        let h = header(b"././@LongLink", kind, Meta::root(0o644), size, b"", 0)?;
        self.put(&h)?;
        self.put(value)?;
        self.put(&[0])?;
        self.pad(size)
    }
}

/// One GNU tar header block. The numeric fields go through the `tar`
/// crate's setters (zero-padded octal with a NUL terminator, GNU base-256
/// when a value does not fit, the same thresholds); the name and the
/// checksum do not, see below.
fn header(
    name: &[u8],
    kind: EntryType,
    meta: Meta,
    size: u64,
    link: &[u8],
    mtime: u64,
) -> io::Result<[u8; BLOCK]> {
    let mut h = tar::Header::new_gnu();
    // Not `set_path`: it normalizes the name (drops a directory's trailing
    // `/`, folds `//` and `.`) and refuses more than 100 bytes, where the
    // name is kept verbatim and cut to the field (an `L` record before the
    // header holds all of it).
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_mode(meta.mode & 0o7777);
    h.set_uid(u64::from(meta.uid));
    h.set_gid(u64::from(meta.gid));
    h.set_size(size);
    h.set_mtime(mtime);
    h.set_entry_type(kind);
    h.set_link_name_literal(link)?;
    // Not `set_cksum`: it writes seven octal digits and a NUL (`0012345\0`),
    // where GNU tar, and every layer strata has written, has six digits, a
    // NUL and a space (`012345\0 `). Readers take either, but the change
    // would alter every header and so every layer digest. The checksum is
    // computed with its own field set to spaces.
    let mut h = *h.as_bytes();
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let cksum = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(cksum.as_bytes());
    Ok(h)
}

/// Why a tar entry name is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathError {
    Absolute,
    ParentDir,
    Empty,
    NotUtf8,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PathError::Absolute => "absolute path",
            PathError::ParentDir => "path contains `..`",
            PathError::Empty => "empty path",
            PathError::NotUtf8 => "path is not UTF-8",
        })
    }
}

/// Normalizes a tar entry name to a relative path without `.`/`..` parts or
/// trailing slash (`./usr//bin/` → `usr/bin`). The root itself (`.`, `./`)
/// becomes the empty string. Absolute names and `..` are refused: a layer
/// must not name anything outside the root.
pub(crate) fn normalize_entry_path(raw: &[u8]) -> Result<String, PathError> {
    let s = std::str::from_utf8(raw).map_err(|_| PathError::NotUtf8)?;
    if s.is_empty() {
        return Err(PathError::Empty);
    }
    if s.starts_with('/') {
        return Err(PathError::Absolute);
    }
    let mut parts = Vec::new();
    for part in s.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(PathError::ParentDir),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back(bytes: &[u8]) -> Vec<(String, tar::EntryType, u64, Option<String>, u64, u64)> {
        let mut a = tar::Archive::new(bytes);
        a.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let path = String::from_utf8(e.path_bytes().into_owned()).unwrap();
                let link = e
                    .link_name_bytes()
                    .map(|l| String::from_utf8(l.into_owned()).unwrap());
                let h = e.header().clone();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (
                    path,
                    h.entry_type(),
                    data.len() as u64,
                    link,
                    h.uid().unwrap(),
                    h.mtime().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn writes_entries_the_tar_crate_reads_back() {
        let long = format!("usr/{}/file", "d".repeat(150));
        let long_target = format!("../{}", "t".repeat(140));
        let mut w = TarWriter::new(Vec::new(), 7);
        w.dir("usr", Meta::root(0o755)).unwrap();
        w.data("usr/a", Meta::root(0o644), b"hello").unwrap();
        w.data(&long, Meta::root(0o644), b"x").unwrap();
        w.symlink("usr/denormal", Meta::root(0o777), "../..//sbin/x")
            .unwrap();
        w.symlink("usr/long", Meta::root(0o777), &long_target)
            .unwrap();
        w.hardlink("usr/b", Meta::root(0o644), "usr/a").unwrap();
        let big_uid = Meta {
            uid: 4_000_000_000,
            gid: 5,
            mode: 0o4755,
        };
        w.data("usr/suid", big_uid, b"").unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() % 512, 0);
        let entries = read_back(&bytes);
        let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "usr/",
                "usr/a",
                long.as_str(),
                "usr/denormal",
                "usr/long",
                "usr/b",
                "usr/suid"
            ]
        );
        assert_eq!(entries[1].2, 5);
        assert_eq!(entries[3].3.as_deref(), Some("../..//sbin/x"));
        assert_eq!(entries[4].3.as_deref(), Some(long_target.as_str()));
        assert_eq!(entries[5].1, tar::EntryType::Link);
        assert_eq!(entries[6].4, 4_000_000_000);
        assert!(entries.iter().all(|e| e.5 == 7));
    }

    #[test]
    fn pax_records_are_read_back() {
        let mut w = TarWriter::new(Vec::new(), 0);
        let long_value = vec![b'v'; 95];
        w.pax(&[
            ("SCHILY.xattr.security.capability".into(), vec![1, 0, 0, 2]),
            ("SCHILY.xattr.user.k".into(), long_value.clone()),
        ])
        .unwrap();
        w.data("usr/bin/ping", Meta::root(0o755), b"x").unwrap();
        let bytes = w.finish().unwrap();
        let mut a = tar::Archive::new(&bytes[..]);
        let mut entries = a.entries().unwrap();
        let mut e = entries.next().unwrap().unwrap();
        assert_eq!(&*e.path_bytes(), b"usr/bin/ping");
        let exts: Vec<(String, Vec<u8>)> = e
            .pax_extensions()
            .unwrap()
            .unwrap()
            .map(|x| {
                let x = x.unwrap();
                (x.key().unwrap().to_string(), x.value_bytes().to_vec())
            })
            .collect();
        assert_eq!(
            exts,
            [
                (
                    "SCHILY.xattr.security.capability".to_string(),
                    vec![1, 0, 0, 2]
                ),
                ("SCHILY.xattr.user.k".to_string(), long_value),
            ]
        );
    }

    /// The bytes are pinned: every header field (octal and base-256
    /// numbers, the checksum's format, long-name and PAX records, names and
    /// link targets kept verbatim) goes into every layer digest.
    #[test]
    fn output_bytes_are_pinned() {
        use sha2::{Digest as _, Sha256};
        let mut w = TarWriter::new(Vec::new(), 0);
        w.dir("usr/", Meta::root(0o755)).unwrap();
        w.dir("usr//lib", Meta::root(0o755)).unwrap();
        w.data("usr/a", Meta::root(0o644), b"hello").unwrap();
        w.data(&format!("usr/{}", "n".repeat(100)), Meta::root(0o600), b"")
            .unwrap();
        w.data(
            &format!("usr/{}/f", "d".repeat(150)),
            Meta::root(0o644),
            b"x",
        )
        .unwrap();
        w.symlink("usr/denormal", Meta::root(0o777), "../..//sbin/./x")
            .unwrap();
        w.symlink("usr/long", Meta::root(0o777), &"t/".repeat(70))
            .unwrap();
        w.hardlink("usr/b", Meta::root(0o644), "usr/a").unwrap();
        w.pax(&[("SCHILY.xattr.security.capability".into(), vec![1, 0, 0, 2])])
            .unwrap();
        w.data("usr/bin/ping", Meta::root(0o4755), b"ping").unwrap();
        for (uid, gid) in [(2_097_151, 2_097_152), (4_000_000_000, u32::MAX)] {
            let meta = Meta {
                uid,
                gid,
                mode: 0o7777,
            };
            w.data(&format!("usr/ids-{uid}"), meta, b"").unwrap();
        }
        for mtime in [8_589_934_591, 8_589_934_592, u64::MAX] {
            w.set_mtime(mtime);
            w.data(&format!("usr/t-{mtime}"), Meta::root(0o644), b"t")
                .unwrap();
        }
        let bytes = w.finish().unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            "7d9adf0f4b888d83de8a420f017ede09d115ef7cd819e1e03918648ce9f7d6e7"
        );
    }

    #[test]
    fn short_input_is_an_error() {
        let mut w = TarWriter::new(Vec::new(), 0);
        let err = w
            .file("f", Meta::root(0o644), 10, &mut &b"abc"[..])
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn normalizes_and_refuses_paths() {
        let cases: &[(&str, Result<&str, PathError>)] = &[
            ("usr/bin/bash", Ok("usr/bin/bash")),
            ("./usr//bin/", Ok("usr/bin")),
            ("./", Ok("")),
            (".", Ok("")),
            ("usr/./lib", Ok("usr/lib")),
            ("/etc/passwd", Err(PathError::Absolute)),
            ("../etc/passwd", Err(PathError::ParentDir)),
            ("usr/../../x", Err(PathError::ParentDir)),
            ("", Err(PathError::Empty)),
        ];
        for (raw, want) in cases {
            let got = normalize_entry_path(raw.as_bytes());
            assert_eq!(got.as_deref().map_err(Clone::clone), want.clone(), "{raw}");
        }
        assert_eq!(normalize_entry_path(b"usr/\xff"), Err(PathError::NotUtf8));
    }
}
