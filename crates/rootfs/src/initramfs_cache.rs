//! Initramfs images made before, found again by what their generator
//! read.
//!
//! Making the initramfs is most of a derive that layers Ignition (dracut:
//! 17 s of 25 at RHCOS size) and of a kubelet override rebuild, although
//! the kubelet is nothing dracut reads. The generator's output is a
//! function of what is outside the tree (the generator, its arguments,
//! the kernel version, `SOURCE_DATE_EPOCH`, the sandbox's layout: the
//! [`key`]) and of what it reads in the tree. What it reads is learned
//! from the run itself (every file opened or executed, by every process,
//! with the path it has in the sandbox: [`crate::opened`]), and
//! an entry records each such file's content, mode and owner, plus its
//! mtime where that can reach the image (files the image holds unchanged
//! at the same path, the generator's own files: dracut clamps times
//! against them). Files it rewrites (passwd, os-release) count by content
//! only: their times are the build's, and the image's copy gets its own.
//! What it only looks at without opening (a program's existence in
//! `PATH`, a module directory's listing, a link's target) is covered by
//! the tree's names: every path with its type, mode, owner, link target
//! and whether it is empty, hashed.
//!
//! An entry matches when the key and the names' hash are the same and
//! every recorded file is as recorded; then the stored image is copied
//! into place (its sha256 checked on the way) instead of running the
//! generator. Anything else is a miss that says why (the first input that
//! differs) at debug level, runs the generator and records a new entry.
//!
//! Layout, below the cache's directory (`W/cache/initramfs`):
//! `<key>/<names>.json` (an entry), `<key>/<names>.names` (the names, to
//! say which one differs when none matches), `images/<sha256>`.
//!
//! Must not: trust an entry further than its checks (a missing or altered
//! image is a miss, and the entry is dropped), or let a failure to record
//! fail the build (the image made is the build's either way).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::invocation::{image_path, Invocation};
use crate::sandbox::{open_input, Layout};

/// The version of the entries' meaning: part of every key. Bump it with
/// any change to what an entry records or how a tree is compared to it.
const FORMAT: &str = "strata-initramfs-cache-1";

/// How many entries `prune` keeps per key (per generator, arguments,
/// kernel and epoch): the newest.
pub const KEPT_PER_KEY: usize = 2;

/// The cache in a directory (`W/cache/initramfs`).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

/// One generator run, as far as it is not the tree.
#[derive(Debug)]
pub(crate) struct Run<'a> {
    /// The generator's name (`dracut`): its own files are inputs whose
    /// times count.
    pub generator: &'a str,
    /// How the generator is called.
    pub call: &'a Invocation,
    pub source_date_epoch: u64,
    pub layout: &'a Layout,
    pub env: &'a [(&'a str, &'a str)],
}

impl Run<'_> {
    /// Everything outside the tree the image depends on.
    fn key(&self) -> String {
        let mut h = Sha256::new();
        let mut field = |v: &[u8]| {
            h.update((v.len() as u64).to_le_bytes());
            h.update(v);
        };
        field(FORMAT.as_bytes());
        for arg in &self.call.argv {
            field(arg.as_bytes());
        }
        if let Some(level) = self.call.gzip {
            let block = strata_process::gzip::BLOCK;
            let deflate = strata_process::gzip::DEFLATE;
            field(format!("strata gzip {deflate} level {level} block {block}").as_bytes());
        }
        field(self.source_date_epoch.to_string().as_bytes());
        field(&[u8::from(self.layout.etc_in_usr_etc)]);
        field(&[u8::from(self.layout.os_release.is_some())]);
        for (k, v) in self.env {
            field(k.as_bytes());
            field(v.as_bytes());
        }
        hex::encode(h.finalize())
    }

    /// The image's path in the sandbox.
    fn output(&self) -> String {
        format!("/{}", image_path(&self.call.kver))
    }

    /// Whether a file's mtime can reach the image though it is not in it:
    /// the generator's own files (dracut 059's `--reproducible` clamps
    /// every time in the image to its `dracut-functions.sh`'s).
    fn generators_own(&self, path: &str) -> bool {
        let name = self.generator;
        path == format!("/usr/bin/{name}") || path.starts_with(&format!("/usr/lib/{name}/"))
    }
}

/// A file the generator read: its path in the sandbox and what it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Input {
    path: String,
    /// Its mtime counts ([`fingerprint`]).
    timed: bool,
    fingerprint: String,
}

/// The stored image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Image {
    sha256: String,
    size: u64,
    mode: u32,
}

/// What one entry records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    format: String,
    inputs: Vec<Input>,
    image: Image,
}

/// Whether a lookup found an image, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The image is in place.
    Hit,
    /// The first reason it is not.
    Miss(String),
}

impl Cache {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether an entry was recorded for `run`'s key (the generator, its
    /// arguments, the kernel and the epoch): without one, every lookup
    /// misses.
    pub(crate) fn knows(&self, run: &Run) -> bool {
        fs::read_dir(self.dir.join(run.key())).is_ok_and(|mut entries| {
            entries.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
        })
    }

    pub(crate) fn ensure_dir(&self) -> Result<()> {
        fs::create_dir_all(&self.dir).with_context(|| format!("creating {}", self.dir.display()))
    }

    fn images(&self) -> PathBuf {
        self.dir.join("images")
    }

    /// Puts the image an entry matching the tree at `root` records in
    /// place, or says why there is none.
    pub(crate) fn lookup(&self, run: &Run, root: &Path, names: &Names) -> Result<Lookup> {
        let key_dir = self.dir.join(run.key());
        let entry_path = key_dir.join(format!("{}.json", names.hash));
        let entry: Entry = match fs::read(&entry_path) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(e) => e,
                Err(e) => return Ok(self.drop_entry(&entry_path, format!("unreadable entry: {e}"))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Lookup::Miss(names.differences(&key_dir)));
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", entry_path.display())),
        };
        if entry.format != FORMAT {
            return Ok(self.drop_entry(&entry_path, "an entry of another format".into()));
        }
        // Every input hashed again, on every core (hundreds of files,
        // kernel modules among them); the first that differs, in the
        // entry's order, is the one the miss names.
        let differs = entry
            .inputs
            .par_iter()
            .map(|input| -> Result<bool> {
                let now = run
                    .layout
                    .host_path(root, &input.path)
                    .map(|host| fingerprint(root, &host, input.timed))
                    .transpose()?
                    .flatten()
                    .map(|(_, fp)| fp);
                Ok(now.as_deref() != Some(input.fingerprint.as_str()))
            })
            .collect::<Result<Vec<bool>>>()?;
        if let Some(input) = entry.inputs.iter().zip(&differs).find(|(_, d)| **d) {
            return Ok(Lookup::Miss(format!(
                "{} differs from the entry's ({} inputs)",
                input.0.path,
                entry.inputs.len()
            )));
        }
        let output = run
            .layout
            .host_path(root, &run.output())
            .context("the image's path")?;
        match self.copy_image(&entry.image, &output)? {
            None => Ok(Lookup::Hit),
            Some(why) => Ok(self.drop_entry(&entry_path, why)),
        }
    }

    /// Removes an entry that cannot be used; the miss it makes.
    fn drop_entry(&self, entry: &Path, why: String) -> Lookup {
        let _ = fs::remove_file(entry);
        Lookup::Miss(why)
    }

    /// Copies the stored image to `output`, checking its sha256; the
    /// reason when it cannot (then `output` is left as it was). Written
    /// into the file in place, as the generator writes it (a new entry in
    /// its directory would change the directory, which a layer records).
    fn copy_image(&self, image: &Image, output: &Path) -> Result<Option<String>> {
        // The entry is read from the workdir: its digest becomes a path
        // only once it is one.
        let is_digest = image.sha256.len() == 64
            && image
                .sha256
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !is_digest {
            return Ok(Some(format!(
                "the entry names no stored image ({:?} is not a sha256)",
                image.sha256
            )));
        }
        let stored = self.images().join(&image.sha256);
        let bytes = match fs::read(&stored) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Some(format!("the stored image {} is gone", image.sha256)));
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", stored.display())),
        };
        let sha256 = hex::encode(Sha256::digest(&bytes));
        if sha256 != image.sha256 || bytes.len() as u64 != image.size {
            let _ = fs::remove_file(&stored);
            return Ok(Some(format!(
                "the stored image {} holds other bytes ({sha256})",
                image.sha256
            )));
        }
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(image.mode)
            .open(output)
            .with_context(|| format!("opening {}", output.display()))?;
        out.write_all(&bytes)
            .with_context(|| format!("writing {}", output.display()))?;
        fs::set_permissions(output, fs::Permissions::from_mode(image.mode))?;
        Ok(None)
    }

    /// Records the image just made at its place in the tree at `root`,
    /// from what its run opened ([`crate::opened`]).
    pub(crate) fn record(
        &self,
        run: &Run,
        root: &Path,
        names: &Names,
        read: &BTreeMap<String, bool>,
    ) -> Result<()> {
        let output = run.output();
        let host_output = run
            .layout
            .host_path(root, &output)
            .context("the image's path")?;
        let bytes =
            fs::read(&host_output).with_context(|| format!("reading {}", host_output.display()))?;
        // Each regular member's content, by path.
        let mut members = BTreeMap::new();
        let known = strata_process::cpio::read_members(&bytes, &mut |name, mode, data| {
            if mode & 0o170_000 == 0o100_000 {
                members.insert(format!("/{name}"), hex::encode(Sha256::digest(data)));
            }
        })
        .context("reading the image's members")?;
        if !known {
            bail!("the image is compressed in a way strata does not read (only gzip)");
        }
        let inputs = inputs(run, root, read, &members, &output)?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let mode = fs::metadata(&host_output)?.permissions().mode() & 0o7777;
        let images = self.images();
        fs::create_dir_all(&images).with_context(|| format!("creating {}", images.display()))?;
        let stored = images.join(&sha256);
        if !stored.exists() {
            write_atomic(&stored, &bytes)?;
        }
        let key_dir = self.dir.join(run.key());
        fs::create_dir_all(&key_dir).with_context(|| format!("creating {}", key_dir.display()))?;
        write_atomic(
            &key_dir.join(format!("{}.names", names.hash)),
            names.lines.join("\n").as_bytes(),
        )?;
        let entry = Entry {
            format: FORMAT.to_string(),
            inputs,
            image: Image {
                sha256,
                size: bytes.len() as u64,
                mode,
            },
        };
        let json = serde_json::to_vec_pretty(&entry).context("writing an entry")?;
        write_atomic(&key_dir.join(format!("{}.json", names.hash)), &json)?;
        tracing::debug!(
            "initramfs cache: recorded {} inputs in {}",
            entry.inputs.len(),
            key_dir.display()
        );
        Ok(())
    }
}

/// Why a lookup missed when no entry has the run's key.
pub(crate) const NO_ENTRY: &str = "no entry for this generator, its arguments, kernel and epoch";

/// Copies `from` to `to`; the byte count and sha256.
pub(crate) fn copy_hashing(
    from: &mut impl Read,
    to: &mut impl Write,
) -> std::io::Result<(u64, String)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        size += n as u64;
    }
    Ok((size, hex::encode(h.finalize())))
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().expect("a file in a directory");
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The tree's names: each path with its type, mode, owner, link target
/// and whether it is empty, sorted; and their hash.
#[derive(Debug)]
pub(crate) struct Names {
    lines: Vec<String>,
    hash: String,
}

impl Names {
    /// Walks the tree at `root` but what the sandbox hides (`dev`,
    /// `proc`, `tmp`), the generator's scratch space (`var/tmp`) and
    /// `skip` (its output).
    pub(crate) fn of(root: &Path, skip: &Path) -> Result<Self> {
        let mut lines = Vec::new();
        let hidden: Vec<PathBuf> = ["dev", "proc", "tmp", "var/tmp"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        walk_names(root, root, &hidden, skip, &mut lines)?;
        lines.sort();
        let mut h = Sha256::new();
        for l in &lines {
            h.update(l.as_bytes());
            h.update(b"\0");
        }
        Ok(Self {
            lines,
            hash: hex::encode(h.finalize()),
        })
    }

    /// Why no entry in `key_dir` has these names: the first name that
    /// differs from the newest entry's.
    fn differences(&self, key_dir: &Path) -> String {
        let newest = fs::read_dir(key_dir).ok().and_then(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "names"))
                .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        });
        let Some(newest) = newest else {
            return NO_ENTRY.into();
        };
        let Ok(text) = fs::read_to_string(newest.path()) else {
            return "the newest entry's names are unreadable".into();
        };
        let theirs: BTreeSet<&str> = text.lines().collect();
        let mine: BTreeSet<&str> = self.lines.iter().map(String::as_str).collect();
        let first = mine
            .symmetric_difference(&theirs)
            .next()
            .map(|l| {
                let side = if mine.contains(l) { "now" } else { "then" };
                format!("{l} ({side})")
            })
            .unwrap_or_default();
        format!(
            "the tree's names differ from the newest entry's: {} now, {} then, first {first}",
            mine.len(),
            theirs.len()
        )
    }
}

fn walk_names(
    root: &Path,
    dir: &Path,
    hidden: &[PathBuf],
    skip: &Path,
    out: &mut Vec<String>,
) -> Result<()> {
    let rd = fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in rd {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        let path = e.path();
        if path == skip {
            continue;
        }
        let m =
            fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        let rel = path.strip_prefix(root).expect("below the root");
        // Names are bytes: an escape keeps each on one line.
        let name = rel.as_os_str().as_bytes().escape_ascii().to_string();
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            "d"
        } else if ft.is_symlink() {
            "l"
        } else if ft.is_file() {
            if m.len() == 0 {
                "e"
            } else {
                "f"
            }
        } else {
            "o"
        };
        let mut line = format!(
            "{name} {kind} {:o} {}:{}",
            m.mode() & 0o7777,
            m.uid(),
            m.gid()
        );
        if ft.is_symlink() {
            let target = fs::read_link(&path)?;
            line.push_str(" -> ");
            line.push_str(&target.as_os_str().as_bytes().escape_ascii().to_string());
        }
        out.push(line);
        if ft.is_dir() && !hidden.contains(&path) {
            walk_names(root, &path, hidden, skip, out)?;
        }
    }
    Ok(())
}

/// What a file is, as an entry records it: sha256 of its content, mode,
/// owner, and with `timed` its mtime; with the sha256 alone. `None` when
/// it is not a regular file (or not there). Paths below `root` resolve in
/// it (its symlinks never leave it).
fn fingerprint(root: &Path, host: &Path, timed: bool) -> Result<Option<(String, String)>> {
    let file = match open_input(root, host) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Ok(None)
        }
        Err(e) => return Err(e).with_context(|| format!("opening {}", host.display())),
    };
    let m = file.metadata()?;
    if !m.is_file() {
        return Ok(None);
    }
    let (_, sha256) = copy_hashing(&mut &file, &mut std::io::sink())
        .with_context(|| format!("reading {}", host.display()))?;
    let mut fp = format!("{sha256} {:o} {}:{}", m.mode() & 0o7777, m.uid(), m.gid());
    if timed {
        fp.push_str(&format!(" {}", m.mtime()));
    }
    Ok(Some((sha256, fp)))
}

fn fingerprint_timed(root: &Path, host: &Path) -> Result<Option<String>> {
    Ok(fingerprint(root, host, true)?.map(|(_, fp)| fp))
}

/// The files the trace shows read or executed, as inputs: each file the
/// sandbox maps to the host (not the output, not the generator's scratch
/// space), with the interpreters the kernel loaded for what was executed.
fn inputs(
    run: &Run,
    root: &Path,
    read: &BTreeMap<String, bool>,
    members: &BTreeMap<String, String>,
    output: &str,
) -> Result<Vec<Input>> {
    let mut todo: Vec<(String, bool)> = read.iter().map(|(p, x)| (p.clone(), *x)).collect();
    let mut seen: BTreeMap<String, Input> = BTreeMap::new();
    while let Some((path, executed)) = todo.pop() {
        if path == output || path.starts_with("/var/tmp/") || seen.contains_key(&path) {
            continue;
        }
        let Some(host) = run.layout.host_path(root, &path) else {
            continue;
        };
        let Some((sha256, fingerprint)) = fingerprint(root, &host, false)? else {
            continue;
        };
        // A file the image holds as it is (a copy, whose time can be
        // kept), or one of the generator's own, counts with its mtime.
        let timed = members.get(&path) == Some(&sha256) || run.generators_own(&path);
        let fingerprint = if timed {
            fingerprint_timed(root, &host)?.unwrap_or(fingerprint)
        } else {
            fingerprint
        };
        if executed {
            let mut head = Vec::new();
            open_input(root, &host)?.take(4096).read_to_end(&mut head)?;
            if let Some(interpreter) = interpreter(&head) {
                todo.push((interpreter, true));
            }
        }
        seen.insert(
            path.clone(),
            Input {
                path,
                timed,
                fingerprint,
            },
        );
    }
    Ok(seen.into_values().collect())
}

/// The program the kernel loads to run a file that starts with `head`:
/// a script's `#!` interpreter, or an ELF executable's `PT_INTERP` (the
/// dynamic loader, which no traced call opens). Written out rather than
/// taken from an ELF crate: one field of the program headers is all it
/// reads.
fn interpreter(head: &[u8]) -> Option<String> {
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?;
        let path = line.split_whitespace().next()?;
        return path.starts_with('/').then(|| path.to_string());
    }
    // ELF64, little-endian.
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(ph)? != PT_INTERP {
            continue;
        }
        let offset = usize::try_from(u64_at(ph + 8)?).ok()?;
        let size = usize::try_from(u64_at(ph + 32)?).ok()?;
        let bytes = head.get(offset..offset.checked_add(size)?)?;
        let path = std::str::from_utf8(bytes.strip_suffix(b"\0").unwrap_or(bytes)).ok()?;
        return path.starts_with('/').then(|| path.to_string());
    }
    None
}

/// Drops all but the newest [`KEPT_PER_KEY`] entries of each key, then
/// the stored images no entry names; returns how many files went and
/// their bytes.
pub fn prune(dir: &Path) -> Result<(usize, u64)> {
    let mut removed = (0usize, 0u64);
    let mut remove = |path: &Path| {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if fs::remove_file(path).is_ok() {
            removed.0 += 1;
            removed.1 += size;
        }
    };
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut named = BTreeSet::new();
    for key_dir in rd.flatten() {
        if key_dir.file_name() == "images" || !key_dir.path().is_dir() {
            continue;
        }
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(key_dir.path())?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| {
                let t = fs::metadata(&p)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                (t, p)
            })
            .collect();
        entries.sort();
        let kept = entries.len().saturating_sub(KEPT_PER_KEY);
        for (i, (_, entry)) in entries.iter().enumerate() {
            if i < kept {
                remove(entry);
                remove(&entry.with_extension("names"));
                continue;
            }
            if let Some(e) = fs::read(entry)
                .ok()
                .and_then(|b| serde_json::from_slice::<Entry>(&b).ok())
            {
                named.insert(e.image.sha256);
            }
        }
    }
    if let Ok(rd) = fs::read_dir(dir.join("images")) {
        for image in rd.flatten() {
            if !named.contains(image.file_name().to_string_lossy().as_ref()) {
                remove(&image.path());
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_whose_image_is_not_a_digest_is_a_miss_that_touches_nothing() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let cache = Cache::new(&t.path().join("cache"));
        fs::create_dir_all(cache.images()).unwrap();
        let output = t.path().join("initramfs.img");
        fs::write(&output, "old").unwrap();
        let image = Image {
            sha256: "../../victim".into(),
            size: 4,
            mode: 0o600,
        };
        let why = cache.copy_image(&image, &output).unwrap();
        assert!(why.unwrap().contains("not a sha256"));
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(fs::read_to_string(&output).unwrap(), "old");
    }

    #[test]
    fn interpreters_of_scripts_and_elf_executables() {
        assert_eq!(
            interpreter(b"#!/bin/bash -e\necho").as_deref(),
            Some("/bin/bash")
        );
        assert_eq!(interpreter(b"#!bash\n"), None);
        assert_eq!(interpreter(b"plain text"), None);
        // This test's own program is an ELF executable with a loader.
        let exe = fs::read(std::env::current_exe().unwrap()).unwrap();
        let loader = interpreter(&exe[..4096]).expect("a PT_INTERP");
        assert!(loader.contains("ld-linux"), "{loader}");
    }

    #[test]
    fn names_see_types_modes_links_and_emptiness_but_not_content() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::create_dir_all(root.join("var/tmp/dracut.1")).unwrap();
        fs::write(root.join("usr/bin/kubelet"), "1").unwrap();
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        let skip = root.join("out.img");
        let first = Names::of(root, &skip).unwrap();
        fs::write(root.join("usr/bin/kubelet"), "2").unwrap();
        fs::write(&skip, "image").unwrap();
        fs::write(root.join("var/tmp/dracut.1/x"), "scratch").unwrap();
        assert_eq!(Names::of(root, &skip).unwrap().hash, first.hash);
        let empty = |r: &Path| fs::write(r.join("usr/bin/kubelet"), "").unwrap();
        let mode = |r: &Path| {
            fs::set_permissions(r.join("usr/bin/kubelet"), fs::Permissions::from_mode(0o700))
                .unwrap()
        };
        let link = |r: &Path| {
            fs::remove_file(r.join("bin")).unwrap();
            std::os::unix::fs::symlink("usr/sbin", r.join("bin")).unwrap();
        };
        let added = |r: &Path| fs::write(r.join("usr/bin/crio"), "c").unwrap();
        let changes: [&dyn Fn(&Path); 4] = [&empty, &mode, &link, &added];
        for change in changes {
            let t = tempfile::tempdir().unwrap();
            fs::create_dir_all(t.path().join("usr/bin")).unwrap();
            fs::create_dir_all(t.path().join("var/tmp")).unwrap();
            fs::write(t.path().join("usr/bin/kubelet"), "1").unwrap();
            std::os::unix::fs::symlink("usr/bin", t.path().join("bin")).unwrap();
            let before = Names::of(t.path(), &skip).unwrap();
            change(t.path());
            assert_ne!(Names::of(t.path(), &skip).unwrap().hash, before.hash);
        }
    }
}
