//! The image's rpm database in the backend its own rpm reads.
//!
//! Why it exists: strata installs with the build host's librpm (4.18), which
//! writes sqlite. RHEL 9's rpm reads that; RHEL 8's rpm (4.14) keeps its
//! database in Berkeley DB files and cannot read sqlite, so a RHEL 8 node
//! could not query or layer packages (`rpm -q`, `rpm-ostree install`, the
//! Machine Config Operator's extensions) on an image with a sqlite rpmdb.
//! Since rpm 4.17 no rpm a current host has can write Berkeley DB, so this
//! crate does what rpm's `--exportdb`/`--importdb` pair does across
//! backends: the host's rpm exports the headers, and this crate writes them
//! as the Packages file plus the 18 index files RHEL 8's rpm keeps, with
//! the same libdb version RHEL 8 ships (5.3.28).
//!
//! What it must not do: decide which backend an image gets (the manifest
//! and the base image do) or where the database lives (`strata-rootfs`).
//!
//! Architecture invariant: same headers in, same bytes out. libdb leaves
//! stale buffer bytes in pages' unused space and stamps each file with an
//! id made of its inode and the clock; the writer zeroes the one and
//! replaces the other with a digest of the file's name and content, and
//! fixes the page size rather than take the file system's block size.

mod bdb;
mod header;
mod index;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// How an rpm database is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Berkeley DB files (`Packages` and its indexes): RHEL 8 and older.
    Bdb,
    /// One sqlite file (`rpmdb.sqlite`): RHEL 9 and later.
    Sqlite,
}

impl Backend {
    /// The backend of the database in `dir`, None when there is none.
    pub fn detect(dir: &Path) -> Option<Backend> {
        if dir.join("rpmdb.sqlite").is_file() {
            Some(Backend::Sqlite)
        } else if dir.join("Packages").is_file() {
            Some(Backend::Bdb)
        } else {
            None
        }
    }

    /// The name manifests and metadata use.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Bdb => "bdb",
            Backend::Sqlite => "sqlite",
        }
    }

    /// The value of rpm's `_db_backend` macro that reads this backend with
    /// the host's rpm (which reads Berkeley DB files read-only).
    pub fn host_macro(self) -> &'static str {
        match self {
            Backend::Bdb => "bdb_ro",
            Backend::Sqlite => "sqlite",
        }
    }
}

/// Why reading or writing a database failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: Berkeley DB {what} failed: {message}")]
    Bdb {
        path: String,
        what: String,
        message: String,
    },
    #[error("{what}: malformed rpm header: {why}")]
    Header { what: String, why: String },
    #[error("{0}: no rpm database (neither rpmdb.sqlite nor Packages)")]
    NoDatabase(String),
    #[error(transparent)]
    Process(#[from] strata_process::Error),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The export stream (`rpmdb --exportdb`) of the database in `dir`: every
/// package's header, in the database's order, written by the host's rpm.
fn export_stream(dir: &Path) -> Result<Vec<u8>, Error> {
    let backend =
        Backend::detect(dir).ok_or_else(|| Error::NoDatabase(dir.display().to_string()))?;
    let dir = fs::canonicalize(dir).map_err(io(dir))?;
    let out = strata_process::run(
        Command::new("rpmdb")
            .arg("--define")
            .arg(format!("_db_backend {}", backend.host_macro()))
            .arg("--dbpath")
            .arg(&dir)
            .arg("--exportdb"),
    )?;
    Ok(out.stdout)
}

/// rpm's header magic, which starts each header of an export stream.
const MAGIC: [u8; 8] = [0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0];

fn split_export(stream: &[u8], what: &str) -> Result<Vec<Vec<u8>>, Error> {
    let mut headers = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let bad = |why: &str| Error::Header {
            what: format!("{what}, header {}", headers.len() + 1),
            why: why.to_string(),
        };
        if rest.len() < 16 || rest[..8] != MAGIC {
            return Err(bad("export stream out of step (no header magic)"));
        }
        let il = u32::from_be_bytes(rest[8..12].try_into().expect("4 bytes")) as usize;
        let dl = u32::from_be_bytes(rest[12..16].try_into().expect("4 bytes")) as usize;
        let len = il
            .checked_mul(16)
            .and_then(|n| n.checked_add(dl + 8))
            .ok_or_else(|| bad("lengths overflow"))?;
        let blob = rest.get(8..8 + len).ok_or_else(|| bad("truncated"))?;
        headers.push(blob.to_vec());
        rest = &rest[8 + len..];
    }
    Ok(headers)
}

/// Writes `headers` as a Berkeley DB rpm database into `dir`, which must
/// exist and hold no database: `Packages` (hash, header number to header,
/// key 0 the highest number) and the index files (btree, key to the list of
/// header and tag numbers), all as RHEL 8's rpm writes them.
fn write_bdb(dir: &Path, headers: &[Vec<u8>]) -> Result<(), Error> {
    let mut written = Vec::new();
    let packages = dir.join("Packages");
    let mut db = bdb::Db::create(&packages, bdb::Kind::Hash)?;
    let count = u32::try_from(headers.len()).expect("fewer than 4 billion packages");
    db.put(&0u32.to_ne_bytes(), &count.to_ne_bytes())?;
    for (i, blob) in headers.iter().enumerate() {
        db.put(&(i as u32 + 1).to_ne_bytes(), blob)?;
    }
    db.close()?;
    written.push(packages);

    let parsed = headers
        .iter()
        .enumerate()
        .map(|(i, blob)| header::Header::parse(blob, &format!("package header {}", i + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    for (file, tag) in index::INDEXES {
        let mut entries: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (i, h) in parsed.iter().enumerate() {
            let number = i as u32 + 1;
            for (key, position) in index::keys(h, tag, &format!("package header {number}"))? {
                let items = entries.entry(key).or_default();
                items.extend_from_slice(&number.to_ne_bytes());
                items.extend_from_slice(&position.to_ne_bytes());
            }
        }
        let path = dir.join(file);
        let mut db = bdb::Db::create(&path, bdb::Kind::Btree)?;
        for (key, items) in &entries {
            db.put(key, items)?;
        }
        db.close()?;
        written.push(path);
    }
    for path in &written {
        make_reproducible(path)?;
    }
    Ok(())
}

/// Where a Berkeley DB file keeps its 20-byte unique id: in the metadata
/// page (page 0), after the LSN and eleven 32-bit and four 8-bit fields.
const FILE_ID: std::ops::Range<usize> = 52..72;

/// The page header every non-metadata page starts with: LSN, page numbers
/// (this, previous, next), entry count (u16), offset of the data area (u16),
/// level and page type.
const PAGE_HEADER: usize = 26;
const ENTRIES: usize = 20;
const DATA_OFFSET: usize = 22;
const PAGE_TYPE: usize = 25;

/// Page types: btree internal and leaf pages, overflow pages, hash pages.
const P_HASH_UNSORTED: u8 = 2;
const P_IBTREE: u8 = 3;
const P_LBTREE: u8 = 5;
const P_OVERFLOW: u8 = 7;
const P_HASH: u8 = 13;

/// Item types: data inline, or a reference to overflow (or duplicate) pages.
const B_KEYDATA: u8 = 1;
const B_OVERFLOW: u8 = 3;

/// Makes a file's bytes a function of its content alone.
///
/// libdb builds pages in reused buffers and writes them whole, so what it
/// never sets holds whatever the buffer held before: the gap between a
/// page's index array and its items, the padding that aligns btree items,
/// the unused fields of references to overflow pages, an overflow page's
/// tail. Those bytes are zeroed (db_verify and rpm read the result). And
/// libdb stamps each file with an id made of its inode and the clock: that
/// is replaced with a digest of the file's name and content, distinct
/// between the files of one database (libdb's cache tells files apart by
/// it).
fn make_reproducible(path: &Path) -> Result<(), Error> {
    let mut bytes = fs::read(path).map_err(io(path))?;
    let page = bdb::PAGE_SIZE as usize;
    if bytes.len() < page || bytes.len() % page != 0 {
        return Err(Error::Bdb {
            path: path.display().to_string(),
            what: "reading back".into(),
            message: format!("{} bytes is not a whole number of pages", bytes.len()),
        });
    }
    for p in bytes.chunks_mut(page).skip(1) {
        scrub_page(p);
    }
    bytes[FILE_ID].fill(0);
    let mut digest = Sha256::new();
    digest.update(path.file_name().unwrap_or_default().as_encoded_bytes());
    digest.update(&bytes);
    bytes[FILE_ID].copy_from_slice(&digest.finalize()[..FILE_ID.len()]);
    fs::write(path, &bytes).map_err(io(path))
}

/// Zeroes the bytes of one page that libdb does not set (see
/// [`make_reproducible`]). Offsets that do not fit the page are left alone:
/// a page this does not understand keeps its bytes.
fn scrub_page(p: &mut [u8]) {
    let size = p.len();
    let u16_at = |p: &[u8], at: usize| u16::from_ne_bytes([p[at], p[at + 1]]) as usize;
    let (entries, data) = (u16_at(p, ENTRIES), u16_at(p, DATA_OFFSET));
    let kind = p[PAGE_TYPE];
    let index_end = PAGE_HEADER + 2 * entries;
    let zero = |p: &mut [u8], from: usize, to: usize| {
        if from <= to && to <= size {
            p[from..to].fill(0);
        }
    };
    match kind {
        P_OVERFLOW => zero(p, PAGE_HEADER + data, size),
        P_HASH_UNSORTED | P_IBTREE | P_LBTREE | P_HASH if index_end <= data && data <= size => {
            zero(p, index_end, data);
            let mut offsets: Vec<usize> = (0..entries)
                .map(|i| u16_at(p, PAGE_HEADER + 2 * i))
                .collect();
            offsets.sort_unstable();
            offsets.dedup();
            for (n, &o) in offsets.iter().enumerate() {
                let end = offsets.get(n + 1).copied().unwrap_or(size);
                if o < data || end > size || end < o + 4 {
                    continue;
                }
                let align4 = |n: usize| (n + 3) & !3;
                match kind {
                    // Hash items: a type byte, then the data; a reference
                    // to overflow pages has three unused bytes after it.
                    P_HASH | P_HASH_UNSORTED => {
                        if p[o] == B_OVERFLOW {
                            zero(p, o + 1, o + 4);
                        }
                    }
                    // Btree leaf items: length, type, data, padded to 4; a
                    // reference: unused (2), type, unused (1), page, length.
                    P_LBTREE => match p[o + 2] & 0x7f {
                        B_KEYDATA => zero(
                            p,
                            o + 3 + u16_at(p, o),
                            (o + align4(3 + u16_at(p, o))).min(end),
                        ),
                        _ => {
                            zero(p, o, o + 2);
                            zero(p, o + 3, o + 4);
                        }
                    },
                    // Btree internal items: length, type, unused, child
                    // page, record count, key, padded to 4.
                    _ => {
                        let len = u16_at(p, o);
                        zero(p, o + 3, o + 4);
                        if p[o + 2] & 0x7f == B_OVERFLOW && len >= 4 {
                            zero(p, o + 12, o + 14);
                            zero(p, o + 15, o + 16);
                        }
                        zero(p, o + 12 + len, (o + align4(12 + len)).min(end));
                    }
                }
            }
        }
        _ => {}
    }
}

/// Rewrites the database in `dir` into backend `to` in place (nothing to do
/// when it already is). The new database is built beside the old one and
/// then swapped in (see [`swap_in`]); on error while building, the old
/// database is left as it was.
pub fn convert(dir: &Path, to: Backend) -> Result<(), Error> {
    let from = Backend::detect(dir).ok_or_else(|| Error::NoDatabase(dir.display().to_string()))?;
    if from == to {
        return Ok(());
    }
    let stream = export_stream(dir)?;
    let staging = staging_beside(dir)?;
    let built = match to {
        Backend::Bdb => split_export(&stream, &dir.display().to_string())
            .and_then(|headers| write_bdb(&staging, &headers)),
        Backend::Sqlite => import_sqlite(&staging, &stream),
    };
    swap_in(dir, &staging, built)?;
    tracing::debug!(dir = %dir.display(), from = from.as_str(), to = to.as_str(), "rpmdb converted");
    Ok(())
}

/// Like [`convert`], and always rewrites: files librpm recorded as skipped
/// for being net-shared (`%_netsharedpath`, state 3) are recorded as
/// installed (state 0), as they are in the tree (compose places them
/// itself; see its package cache). Nothing else of a header changes; the
/// file states lie outside the signed part of the header.
pub fn convert_placed(dir: &Path, to: Backend) -> Result<(), Error> {
    let from = Backend::detect(dir).ok_or_else(|| Error::NoDatabase(dir.display().to_string()))?;
    let what = dir.display().to_string();
    let mut headers = split_export(&export_stream(dir)?, &what)?;
    for (i, h) in headers.iter_mut().enumerate() {
        net_shared_to_installed(h).map_err(|why| Error::Header {
            what: format!("{what}, header {}", i + 1),
            why: why.to_string(),
        })?;
    }
    let staging = staging_beside(dir)?;
    let built = match to {
        Backend::Bdb => write_bdb(&staging, &headers),
        Backend::Sqlite => {
            let mut stream = Vec::new();
            for h in &headers {
                stream.extend_from_slice(&MAGIC);
                stream.extend_from_slice(h);
            }
            import_sqlite(&staging, &stream)
        }
    };
    swap_in(dir, &staging, built)?;
    tracing::debug!(dir = %dir.display(), from = from.as_str(), to = to.as_str(), "rpmdb rewritten");
    Ok(())
}

/// rpm's tag of the per-file install states, and the two states.
const RPMTAG_FILESTATES: u32 = 1029;
const STATE_NORMAL: u8 = 0;
const STATE_NETSHARED: u8 = 3;

/// Sets every net-shared file state of the header `blob` (index length,
/// data length, index, data) to normal.
fn net_shared_to_installed(blob: &mut [u8]) -> Result<(), &'static str> {
    let word = |b: &[u8], at: usize| -> Result<usize, &'static str> {
        b.get(at..at + 4)
            .map(|w| u32::from_be_bytes(w.try_into().expect("4 bytes")) as usize)
            .ok_or("truncated")
    };
    let il = word(blob, 0)?;
    let data = il
        .checked_mul(16)
        .and_then(|n| n.checked_add(8))
        .ok_or("index too long")?;
    for i in 0..il {
        let at = 8 + i * 16;
        if word(blob, at)? != RPMTAG_FILESTATES as usize {
            continue;
        }
        // CHAR or INT8: one byte per file.
        if !matches!(word(blob, at + 4)?, 1 | 2) {
            return Err("file states of an unexpected type");
        }
        let (offset, count) = (word(blob, at + 8)?, word(blob, at + 12)?);
        let start = data.checked_add(offset).ok_or("offset too large")?;
        let states = blob
            .get_mut(start..start.saturating_add(count))
            .filter(|s| s.len() == count)
            .ok_or("file states beyond the header")?;
        for s in states.iter_mut().filter(|s| **s == STATE_NETSHARED) {
            *s = STATE_NORMAL;
        }
    }
    Ok(())
}

/// Replaces the database in `dir` with a copy of the one in `from` (a
/// conversion made once and used for several trees).
pub fn replace(dir: &Path, from: &Path) -> Result<(), Error> {
    if Backend::detect(from).is_none() {
        return Err(Error::NoDatabase(from.display().to_string()));
    }
    let staging = staging_beside(dir)?;
    let copied = files_in(from).and_then(|files| {
        files.iter().try_for_each(|f| {
            let dest = staging.join(f.file_name().unwrap_or_default());
            fs::copy(f, &dest).map(|_| ()).map_err(io(&dest))
        })
    });
    swap_in(dir, &staging, copied)
}

/// A new, empty directory beside `dir` to build a database in.
fn staging_beside(dir: &Path) -> Result<PathBuf, Error> {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let staging = dir.with_file_name(format!(".{name}.strata-new"));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    fs::create_dir(&staging).map_err(io(&staging))?;
    Ok(staging)
}

/// Once `built` says the database in `staging` is whole, replaces the files
/// of `dir` with it, file by file: the directory itself stays, so this
/// works on an overlay that cannot rename a lower directory. A failed build
/// leaves `dir` as it was.
fn swap_in(dir: &Path, staging: &Path, built: Result<(), Error>) -> Result<(), Error> {
    if let Err(e) = built {
        let _ = fs::remove_dir_all(staging);
        return Err(e);
    }
    for path in files_in(dir)? {
        fs::remove_file(&path).map_err(io(&path))?;
    }
    for path in files_in(staging)? {
        let dest = dir.join(path.file_name().unwrap_or_default());
        fs::rename(&path, &dest).map_err(io(&dest))?;
    }
    fs::remove_dir(staging).map_err(io(staging))
}

/// The files of a database directory (it holds nothing else).
fn files_in(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.is_dir() {
            return Err(Error::Io {
                path: path.display().to_string(),
                source: std::io::Error::other("a directory inside the rpm database"),
            });
        }
        out.push(path);
    }
    out.sort();
    Ok(out)
}

/// Imports an export stream into a new sqlite database in `dir` with the
/// host's rpm, leaving only the database file.
fn import_sqlite(dir: &Path, stream: &[u8]) -> Result<(), Error> {
    let abs = fs::canonicalize(dir).map_err(io(dir))?;
    strata_process::run_with_input(
        Command::new("rpmdb")
            .args(["--define", "_db_backend sqlite", "--dbpath"])
            .arg(&abs)
            .arg("--importdb"),
        Some(stream),
    )?;
    for path in files_in(dir)? {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let empty = fs::metadata(&path).map(|m| m.len() == 0).unwrap_or(false);
        // Lock files, and sqlite's log once checkpointed (empty) with its
        // shared-memory index: run-time state, not the database.
        if name == ".rpm.lock"
            || name == "rpmdb.sqlite-shm"
            || (name == "rpmdb.sqlite-wal" && empty)
        {
            fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header blob with one tag: index length, data length, the index
    /// entry (tag, type, offset, count), the data.
    fn blob(tag: u32, kind: u32, data: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [1, data.len() as u32, tag, kind, 0, data.len() as u32] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn net_shared_file_states_become_installed_and_nothing_else_changes() {
        let mut b = blob(RPMTAG_FILESTATES, 2, &[0, 3, 2, 3, 1]);
        net_shared_to_installed(&mut b).unwrap();
        assert_eq!(b, blob(RPMTAG_FILESTATES, 2, &[0, 0, 2, 0, 1]));
        let other = blob(1000, 2, &[3, 3]);
        let mut b = other.clone();
        net_shared_to_installed(&mut b).unwrap();
        assert_eq!(b, other);
    }

    #[test]
    fn a_header_whose_file_states_lie_beyond_it_is_refused() {
        let mut b = blob(RPMTAG_FILESTATES, 2, &[3, 3]);
        b.truncate(b.len() - 1);
        assert!(net_shared_to_installed(&mut b).is_err());
        let mut b = blob(RPMTAG_FILESTATES, 4, &[3, 3, 3, 3]);
        assert!(net_shared_to_installed(&mut b).is_err());
    }
}
