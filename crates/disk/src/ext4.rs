//! ext4 filesystems filled from a directory through libext2fs: the FFI seam
//! to `strata-ext2fs-sys`, and the only module of this crate with `unsafe`.
//!
//! Why not `mkfs.ext4 -d`: it writes file data one 4 KiB block per system
//! call and finds each hard link by a linear search of every inode it has
//! copied. A sysroot is hard links throughout (every deployed file is a
//! link to its object in the sysroot's repository), so at RHCOS size that
//! was 12 s of a 22 s disk build, on one core, growing with the square of
//! the file count.
//!
//! How: `mkfs.ext4` makes the empty filesystem (features, journal, UUID,
//! label and hash seed as before), then this module opens it with
//! libext2fs and, walking the tree in name order, creates each directory,
//! symlink and file, with its owner, mode, times and extended attributes
//! (capabilities among them). Each file's blocks are allocated in one
//! call, and a second thread writes its data straight into the disk file
//! at the blocks allocated while the walk goes on, gathering consecutive
//! blocks into writes of up to 16 MiB, with direct I/O where the disk
//! file's filesystem has it ([`crate::dio`]). Hard links are found in a
//! hash map. libext2fs does every metadata write; the data thread only
//! writes blocks it has allocated to a file and never reads.
//!
//! Times are clamped as [`crate::fs::clamp_times`] clamps them, but
//! read before anything reads the file, so the source tree is not touched
//! and reading it cannot change what is written. Same tree, same epoch,
//! same bytes: allocation follows the walk's order, and the final block of
//! every file is written whole, zero-padded.
//!
//! What it must not do: accept a device node, FIFO or socket (a sysroot
//! has none; they are refused, naming the path), or let a data thread
//! write before its blocks are allocated.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr;
use std::sync::mpsc;

use anyhow::{bail, Context, Result};
use strata_ext2fs_sys as sys;

use crate::fs::Ext4;

/// The block size every strata ext4 filesystem has.
const BLOCK: u64 = 4096;

/// The most blocks the data thread writes at once (16 MiB).
const CHUNK_BLOCKS: u64 = 4096;

/// Writes the filesystem `fs` describes: empty with `mkfs.ext4`, then
/// filled from `fs.source`, times clamped to `fs.epoch`. Files get the
/// owners this process sees (see [`crate::userns`]).
pub fn write(fs: &Ext4) -> Result<()> {
    strata_process::require("mkfs.ext4")?;
    let blocks = fs.size / BLOCK;
    strata_process::run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .args(["-b", &BLOCK.to_string(), "-L", &fs.label, "-U", &fs.uuid])
            .arg("-E")
            .arg(format!(
                "offset={},hash_seed={},nodiscard,root_owner=0:0",
                fs.offset, fs.uuid
            ))
            .arg(&fs.disk)
            .arg(blocks.to_string())
            .env("E2FSPROGS_FAKE_TIME", fs.epoch.to_string())
            .env("SOURCE_DATE_EPOCH", fs.epoch.to_string()),
    )
    .with_context(|| format!("creating the {} filesystem", fs.label))?;
    fill(fs).with_context(|| {
        format!(
            "filling the {} filesystem from {}",
            fs.label,
            fs.source.display()
        )
    })?;
    tracing::debug!(label = fs.label, "filesystem written");
    Ok(())
}

/// One file's data: where it comes from and the runs of blocks
/// (`physical block`, `count`) it goes to, in file order.
struct DataJob {
    source: PathBuf,
    len: u64,
    runs: Vec<(u64, u64)>,
}

fn fill(fs: &Ext4) -> Result<()> {
    let image = Image::open(&fs.disk, fs.offset, fs.epoch)?;
    let disk = crate::dio::open_for_writing(&fs.disk)?;
    let (tx, rx) = mpsc::sync_channel::<DataJob>(8192);
    let walked = std::thread::scope(|s| {
        let writer = s.spawn(|| write_data(rx, &disk, fs.offset));
        let mut walk = Walk {
            image: &image,
            epoch: fs.epoch,
            links: HashMap::new(),
            data: tx,
        };
        let walked = walk.root(&fs.source);
        // Closing the channel ends the writer once it has drained it.
        drop(walk);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the data thread panicked")));
        // A failed writer also stops the walk: its error is the cause.
        written.and(walked)
    });
    walked?;
    image.close()
}

/// The data thread: takes jobs until the channel closes, and gathers
/// what lands on consecutive blocks (the allocator mostly gives them in
/// the walk's order) into one write of up to [`CHUNK_BLOCKS`].
fn write_data(rx: mpsc::Receiver<DataJob>, disk: &std::fs::File, offset: u64) -> Result<()> {
    let mut aligned = crate::dio::Aligned::new((CHUNK_BLOCKS * BLOCK) as usize);
    let buf = aligned.get();
    // The blocks gathered: `filled` of them from physical block `start`.
    let (mut start, mut filled) = (0u64, 0u64);
    let flush = |buf: &[u8], start: u64, filled: u64| {
        disk.write_all_at(&buf[..(filled * BLOCK) as usize], offset + start * BLOCK)
            .context("writing file data into the disk file")
    };
    for job in rx {
        let src = std::fs::File::open(&job.source)
            .with_context(|| format!("opening {}", job.source.display()))?;
        let mut logical = 0u64;
        for &(physical, count) in &job.runs {
            let mut done = 0;
            while done < count {
                if filled > 0 && (start + filled != physical + done || filled == CHUNK_BLOCKS) {
                    flush(buf, start, filled)?;
                    filled = 0;
                }
                if filled == 0 {
                    start = physical + done;
                }
                let n = (count - done).min(CHUNK_BLOCKS - filled);
                let at = (logical + done) * BLOCK;
                let into = &mut buf[(filled * BLOCK) as usize..((filled + n) * BLOCK) as usize];
                let want = (n * BLOCK).min(job.len.saturating_sub(at)) as usize;
                src.read_exact_at(&mut into[..want], at).with_context(|| {
                    format!(
                        "reading {} (did it change while being copied?)",
                        job.source.display()
                    )
                })?;
                into[want..].fill(0);
                filled += n;
                done += n;
            }
            logical += count;
        }
    }
    if filled > 0 {
        flush(buf, start, filled)?;
    }
    Ok(())
}

/// The walk over the source tree, on the thread that owns the filesystem.
struct Walk<'a> {
    image: &'a Image,
    epoch: i64,
    /// Source (device, inode) of each multiply linked file already
    /// created, and its inode in the image.
    links: HashMap<(u64, u64), u32>,
    data: mpsc::SyncSender<DataJob>,
}

impl Walk<'_> {
    fn root(&mut self, source: &Path) -> Result<()> {
        let meta = std::fs::symlink_metadata(source)
            .with_context(|| format!("reading {}", source.display()))?;
        if !meta.is_dir() {
            bail!("{} is not a directory", source.display());
        }
        self.attributes(ROOT_INO, source, &meta)?;
        self.children(ROOT_INO, source)
    }

    /// Everything in directory `dir` (image inode `ino`), in name order.
    fn children(&mut self, ino: u32, dir: &Path) -> Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("reading {}", dir.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let name = CString::new(entry.file_name().as_bytes())
                .with_context(|| format!("{}: a name with a NUL byte", path.display()))?;
            self.entry(ino, &name, &path, &meta)
                .with_context(|| format!("copying {}", path.display()))?;
        }
        Ok(())
    }

    fn entry(
        &mut self,
        parent: u32,
        name: &CStr,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<()> {
        let kind = meta.file_type();
        // mkfs.ext4 made lost+found; a tree that has one shares it.
        let existing = if parent == ROOT_INO {
            self.image.lookup(ROOT_INO, name)?
        } else {
            None
        };
        if kind.is_dir() {
            let ino = match existing {
                Some(ino) if self.image.is_dir(ino)? => ino,
                Some(_) => bail!("the empty filesystem already has a file of that name"),
                None => self.image.mkdir(parent, name)?,
            };
            self.attributes(ino, path, meta)?;
            return self.children(ino, path);
        }
        if existing.is_some() {
            bail!("the empty filesystem already has a file of that name");
        }
        let key = (meta.dev(), meta.ino());
        if meta.nlink() > 1 {
            if let Some(&ino) = self.links.get(&key) {
                let ftype = if kind.is_symlink() {
                    sys::EXT2_FT_SYMLINK
                } else {
                    sys::EXT2_FT_REG_FILE
                };
                return self.image.add_link(parent, name, ino, ftype);
            }
        }
        let ino = if kind.is_symlink() {
            let target = std::fs::read_link(path)?;
            let target = CString::new(target.as_os_str().as_bytes())
                .context("a symlink target with a NUL byte")?;
            let ino = self.image.symlink(parent, name, &target)?;
            self.attributes(ino, path, meta)?;
            ino
        } else if kind.is_file() {
            let (ino, runs) = self.image.file(parent, name, meta.len(), |inode| {
                set_attributes(inode, meta, self.epoch)
            })?;
            xattrs(self.image, ino, path)?;
            if !runs.is_empty() {
                self.data
                    .send(DataJob {
                        source: path.to_path_buf(),
                        len: meta.len(),
                        runs,
                    })
                    .map_err(|_| anyhow::anyhow!("the data thread stopped early"))?;
            }
            ino
        } else {
            bail!(
                "a device node, FIFO or socket, which a root filesystem strata writes may not hold"
            );
        };
        if meta.nlink() > 1 {
            self.links.insert(key, ino);
        }
        Ok(())
    }

    /// Owner, mode and times of `meta` on inode `ino`, then its xattrs.
    fn attributes(&self, ino: u32, path: &Path, meta: &std::fs::Metadata) -> Result<()> {
        let mut inode = self.image.read_inode(ino)?;
        set_attributes(&mut inode, meta, self.epoch);
        self.image.write_inode(ino, &mut inode)?;
        xattrs(self.image, ino, path)
    }
}

/// The root directory's inode.
const ROOT_INO: u32 = 2;

/// Owner, permission bits (the type bits stay) and clamped times.
fn set_attributes(inode: &mut sys::ext2_inode, meta: &std::fs::Metadata, epoch: i64) {
    let (atime, mtime) = crate::fs::clamped(meta, epoch);
    inode.i_mode = (inode.i_mode & !0o7777) | (meta.mode() & 0o7777) as u16;
    inode.i_uid = meta.uid() as u16;
    inode.i_gid = meta.gid() as u16;
    // `linux2`: the variant of `osd2` every Linux filesystem uses.
    inode.osd2.linux2.l_i_uid_high = (meta.uid() >> 16) as u16;
    inode.osd2.linux2.l_i_gid_high = (meta.gid() >> 16) as u16;
    inode.i_atime = atime as u32;
    inode.i_mtime = mtime as u32;
    inode.i_ctime = mtime as u32;
}

/// Copies the extended attributes of `path` onto inode `ino`.
fn xattrs(image: &Image, ino: u32, path: &Path) -> Result<()> {
    let values = strata_process::xattr::all(path)?;
    if values.is_empty() {
        return Ok(());
    }
    image.set_xattrs(ino, &values)
}

/// An open filesystem image; [`Image::close`] writes its metadata out.
struct Image {
    fs: sys::ext2_filsys,
    disk: String,
}

fn check(rc: sys::errcode_t, what: impl FnOnce() -> String) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: error_message returns a static, NUL-terminated string for
    // any code.
    let message = unsafe { CStr::from_ptr(sys::error_message(rc)) }.to_string_lossy();
    bail!("{}: {message}", what())
}

fn zeroed_inode() -> sys::ext2_inode {
    // SAFETY: an all-zero ext2_inode is a valid (empty) inode.
    unsafe { std::mem::zeroed() }
}

impl Image {
    fn open(disk: &Path, offset: u64, epoch: i64) -> Result<Image> {
        let shown = disk.display().to_string();
        let name = CString::new(disk.as_os_str().as_bytes())?;
        let options = CString::new(format!("offset={offset}"))?;
        let mut fs: sys::ext2_filsys = ptr::null_mut();
        // SAFETY: the strings outlive the call; `fs` is written on success.
        let rc = unsafe {
            sys::ext2fs_open2(
                name.as_ptr(),
                options.as_ptr(),
                (sys::EXT2_FLAG_RW | sys::EXT2_FLAG_64BITS) as i32,
                0,
                0,
                sys::unix_io_manager,
                &mut fs,
            )
        };
        check(rc, || {
            format!("opening the filesystem at {offset} in {shown}")
        })?;
        let image = Image { fs, disk: shown };
        // SAFETY: `fs` is open; `now` is what libext2fs stamps the
        // superblock and new inodes with instead of the clock.
        unsafe { (*image.fs).now = epoch };
        check(unsafe { sys::ext2fs_read_bitmaps(image.fs) }, || {
            format!("reading the bitmaps of {}", image.disk)
        })?;
        Ok(image)
    }

    /// Writes the bitmaps, group descriptors and superblock, and closes,
    /// without an fsync: the disk file is scratch until strata has hashed
    /// it, and an fsync would wait for all of its data to reach the disk.
    fn close(mut self) -> Result<()> {
        // SAFETY: `fs` is open; ext2fs_close2 frees it when it succeeds
        // (on failure, drop frees it).
        let rc = unsafe { sys::ext2fs_close2(self.fs, sys::EXT2_FLAG_FLUSH_NO_SYNC as i32) };
        if rc == 0 {
            self.fs = ptr::null_mut();
        }
        check(rc, || {
            format!("writing the filesystem's metadata into {}", self.disk)
        })
    }

    fn read_inode(&self, ino: u32) -> Result<sys::ext2_inode> {
        let mut inode = zeroed_inode();
        // SAFETY: `inode` is a full ext2_inode.
        check(
            unsafe { sys::ext2fs_read_inode(self.fs, ino, &mut inode) },
            || format!("reading inode {ino}"),
        )?;
        Ok(inode)
    }

    fn write_inode(&self, ino: u32, inode: &mut sys::ext2_inode) -> Result<()> {
        // SAFETY: `inode` is a full ext2_inode.
        check(
            unsafe { sys::ext2fs_write_inode(self.fs, ino, inode) },
            || format!("writing inode {ino}"),
        )
    }

    fn is_dir(&self, ino: u32) -> Result<bool> {
        Ok(u32::from(self.read_inode(ino)?.i_mode) & sys::LINUX_S_IFMT == sys::LINUX_S_IFDIR)
    }

    fn lookup(&self, dir: u32, name: &CStr) -> Result<Option<u32>> {
        let mut ino = 0;
        let len = name.to_bytes().len() as i32;
        // SAFETY: `name` is `len` bytes; no buffer is passed.
        let rc = unsafe {
            sys::ext2fs_lookup(self.fs, dir, name.as_ptr(), len, ptr::null_mut(), &mut ino)
        };
        if rc == sys::EXT2_ET_FILE_NOT_FOUND as sys::errcode_t {
            return Ok(None);
        }
        check(rc, || format!("looking up {name:?}"))?;
        Ok(Some(ino))
    }

    fn new_inode(&self, dir: u32, mode: u32) -> Result<u32> {
        let mut ino = 0;
        // SAFETY: no inode map is passed: the filesystem's own is used.
        check(
            unsafe { sys::ext2fs_new_inode(self.fs, dir, mode as i32, ptr::null_mut(), &mut ino) },
            || "allocating an inode (is the filesystem too small?)".to_string(),
        )?;
        Ok(ino)
    }

    /// Retries `op` once after growing directory `dir` when it is full.
    fn expanding(
        &self,
        dir: u32,
        what: &str,
        mut op: impl FnMut() -> sys::errcode_t,
    ) -> Result<()> {
        let mut rc = op();
        if rc == sys::EXT2_ET_DIR_NO_SPACE as sys::errcode_t {
            // SAFETY: `dir` is a directory of this filesystem.
            check(unsafe { sys::ext2fs_expand_dir(self.fs, dir) }, || {
                format!("growing directory inode {dir}")
            })?;
            rc = op();
        }
        check(rc, || what.to_string())
    }

    fn mkdir(&self, parent: u32, name: &CStr) -> Result<u32> {
        let ino = self.new_inode(parent, sys::LINUX_S_IFDIR | 0o755)?;
        // SAFETY: `ino` is free; ext2fs_mkdir marks it used.
        self.expanding(parent, "creating the directory", || unsafe {
            sys::ext2fs_mkdir(self.fs, parent, ino, name.as_ptr())
        })?;
        Ok(ino)
    }

    fn symlink(&self, parent: u32, name: &CStr, target: &CStr) -> Result<u32> {
        let ino = self.new_inode(parent, sys::LINUX_S_IFLNK | 0o777)?;
        // SAFETY: `ino` is free; ext2fs_symlink marks it used.
        self.expanding(parent, "creating the symlink", || unsafe {
            sys::ext2fs_symlink(self.fs, parent, ino, name.as_ptr(), target.as_ptr())
        })?;
        Ok(ino)
    }

    /// Another name for inode `ino`.
    fn add_link(&self, parent: u32, name: &CStr, ino: u32, ftype: u32) -> Result<()> {
        // SAFETY: `ino` is an inode of this filesystem.
        self.expanding(parent, "linking", || unsafe {
            sys::ext2fs_link(self.fs, parent, name.as_ptr(), ino, ftype as i32)
        })?;
        let mut inode = self.read_inode(ino)?;
        inode.i_links_count += 1;
        self.write_inode(ino, &mut inode)
    }

    /// A regular file of `len` bytes, its attributes set by `attributes`,
    /// its blocks allocated: the inode and the runs its data goes to.
    fn file(
        &self,
        parent: u32,
        name: &CStr,
        len: u64,
        attributes: impl FnOnce(&mut sys::ext2_inode),
    ) -> Result<(u32, Vec<(u64, u64)>)> {
        let ino = self.new_inode(parent, sys::LINUX_S_IFREG | 0o644)?;
        // SAFETY: `ino` is free.
        self.expanding(parent, "linking the file", || unsafe {
            sys::ext2fs_link(
                self.fs,
                parent,
                name.as_ptr(),
                ino,
                sys::EXT2_FT_REG_FILE as i32,
            )
        })?;
        // SAFETY: marks `ino` used, as a file.
        unsafe { sys::ext2fs_inode_alloc_stats2(self.fs, ino, 1, 0) };
        let mut inode = zeroed_inode();
        inode.i_mode = sys::LINUX_S_IFREG as u16;
        inode.i_links_count = 1;
        attributes(&mut inode);
        // SAFETY: `inode` is a full ext2_inode.
        check(
            unsafe { sys::ext2fs_inode_size_set(self.fs, &mut inode, len as i64) },
            || "setting the size".to_string(),
        )?;
        inode.i_flags |= sys::EXT4_EXTENTS_FL;
        let mut handle: sys::ext2_extent_handle_t = ptr::null_mut();
        // SAFETY: opening an extent handle on an inode with no tree writes
        // an empty tree's header into it.
        check(
            unsafe { sys::ext2fs_extent_open2(self.fs, ino, &mut inode, &mut handle) },
            || "starting the extent tree".to_string(),
        )?;
        // SAFETY: `handle` came from ext2fs_extent_open2.
        unsafe { sys::ext2fs_extent_free(handle) };
        // SAFETY: `inode` is a full ext2_inode.
        check(
            unsafe { sys::ext2fs_write_new_inode(self.fs, ino, &mut inode) },
            || format!("writing inode {ino}"),
        )?;
        let blocks = len.div_ceil(BLOCK);
        if blocks == 0 {
            return Ok((ino, Vec::new()));
        }
        let flags = sys::EXT2_FALLOCATE_FORCE_INIT | sys::EXT2_FALLOCATE_INIT_BEYOND_EOF;
        // SAFETY: `inode` is this inode's current state; the goal !0 lets
        // libext2fs choose near the inode's group.
        check(
            unsafe { sys::ext2fs_fallocate(self.fs, flags as i32, ino, &mut inode, !0, 0, blocks) },
            || format!("allocating {blocks} blocks (is the filesystem too small?)"),
        )?;
        self.write_inode(ino, &mut inode)?;
        let runs = self.runs(ino, &mut inode)?;
        let mapped: u64 = runs.iter().map(|r| r.1).sum();
        if mapped != blocks {
            bail!("libext2fs mapped {mapped} of the file's {blocks} blocks");
        }
        Ok((ino, runs))
    }

    /// The physical runs of inode `ino`'s blocks, in logical order.
    fn runs(&self, ino: u32, inode: &mut sys::ext2_inode) -> Result<Vec<(u64, u64)>> {
        let mut handle: sys::ext2_extent_handle_t = ptr::null_mut();
        // SAFETY: `inode` has an extent tree.
        check(
            unsafe { sys::ext2fs_extent_open2(self.fs, ino, inode, &mut handle) },
            || "reading the extent tree".to_string(),
        )?;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut op = sys::EXT2_EXTENT_ROOT;
        let mut next_logical = 0;
        let result = loop {
            let mut extent = sys::ext2fs_extent::default();
            // SAFETY: `handle` is open; `extent` is written on success.
            let rc = unsafe { sys::ext2fs_extent_get(handle, op as i32, &mut extent) };
            if rc == sys::EXT2_ET_EXTENT_NO_NEXT as sys::errcode_t {
                break Ok(());
            }
            if let Err(e) = check(rc, || "reading the extent tree".to_string()) {
                break Err(e);
            }
            op = sys::EXT2_EXTENT_NEXT_LEAF;
            if extent.e_flags & sys::EXT2_EXTENT_FLAGS_LEAF == 0 {
                continue;
            }
            if extent.e_lblk != next_logical || extent.e_flags & sys::EXT2_EXTENT_FLAGS_UNINIT != 0
            {
                break Err(anyhow::anyhow!(
                    "libext2fs allocated the file a hole or an unwritten extent at block {}",
                    extent.e_lblk
                ));
            }
            next_logical += u64::from(extent.e_len);
            match runs.last_mut() {
                Some(last) if last.0 + last.1 == extent.e_pblk => last.1 += u64::from(extent.e_len),
                _ => runs.push((extent.e_pblk, u64::from(extent.e_len))),
            }
        };
        // SAFETY: `handle` came from ext2fs_extent_open2.
        unsafe { sys::ext2fs_extent_free(handle) };
        result.map(|()| runs)
    }

    fn set_xattrs(&self, ino: u32, xattrs: &[(CString, Vec<u8>)]) -> Result<()> {
        let mut handle: *mut sys::ext2_xattr_handle = ptr::null_mut();
        // SAFETY: `ino` is an inode of this filesystem.
        check(
            unsafe { sys::ext2fs_xattrs_open(self.fs, ino, &mut handle) },
            || "opening the xattrs".to_string(),
        )?;
        // SAFETY: `handle` is open; each name and value outlives its call.
        let mut result = check(unsafe { sys::ext2fs_xattrs_read(handle) }, || {
            "reading the xattrs".to_string()
        });
        for (name, value) in xattrs {
            if result.is_err() {
                break;
            }
            result = check(
                unsafe {
                    sys::ext2fs_xattr_set(handle, name.as_ptr(), value.as_ptr().cast(), value.len())
                },
                || format!("setting xattr {name:?}"),
            );
        }
        // SAFETY: `handle` is open; closing writes what was set.
        let closed = check(unsafe { sys::ext2fs_xattrs_close(&mut handle) }, || {
            "writing the xattrs".to_string()
        });
        result.and(closed)
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if !self.fs.is_null() {
            // An error path: the disk file is discarded by the caller.
            // SAFETY: `fs` is open.
            unsafe { sys::ext2fs_free(self.fs) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const EPOCH: i64 = 1_700_000_000;

    fn debugfs(image: &str, request: &str) -> String {
        strata_process::stdout(Command::new("debugfs").args(["-R", request, image]))
            .unwrap_or_else(|e| panic!("debugfs -R {request:?}: {e:#}"))
    }

    /// What `stat` in debugfs says after `field`, up to the next space.
    fn stat_field(stat: &str, field: &str) -> String {
        let at = stat
            .find(field)
            .unwrap_or_else(|| panic!("no {field} in {stat}"));
        stat[at + field.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }

    /// Every kind of entry a sysroot has, owners and modes a real tree
    /// has (setuid, a system user above 65535, capabilities), sizes on
    /// and off block boundaries, hard links to files and to symlinks, and
    /// a directory that outgrows its first block.
    fn make_tree(root: &Path) {
        let a = root.join("a");
        std::fs::create_dir_all(a.join("deeper")).unwrap();
        std::fs::create_dir_all(root.join("b")).unwrap();
        std::fs::create_dir_all(root.join("many")).unwrap();
        std::fs::write(a.join("empty"), b"").unwrap();
        std::fs::write(a.join("small"), b"hello").unwrap();
        std::fs::write(a.join("block"), vec![7u8; 4096]).unwrap();
        let big: Vec<u8> = (0..(5u32 << 20) + 3)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        std::fs::write(a.join("big"), &big).unwrap();
        std::fs::hard_link(a.join("big"), root.join("b/big-again")).unwrap();
        std::fs::hard_link(a.join("big"), a.join("deeper/big-third")).unwrap();
        std::os::unix::fs::symlink("small", a.join("short")).unwrap();
        std::os::unix::fs::symlink("x".repeat(200), a.join("long")).unwrap();
        // linkat without AT_SYMLINK_FOLLOW: a second name of the symlink.
        std::fs::hard_link(a.join("short"), root.join("b/short-again")).unwrap();
        for i in 0..3000 {
            std::fs::write(root.join(format!("many/file-{i:05}")), i.to_string()).unwrap();
        }
        std::fs::set_permissions(a.join("small"), std::fs::Permissions::from_mode(0o4755)).unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o750)).unwrap();
        rustix::fs::chown(
            a.join("small").as_path(),
            Some(rustix::fs::Uid::from_raw(1_000_100)),
            Some(rustix::fs::Gid::from_raw(70_001)),
        )
        .unwrap();
        rustix::fs::lsetxattr(
            a.join("small").as_path(),
            "user.strata",
            b"a value",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        // cap_net_bind_service=ep, as setcap writes it (VFS_CAP_REVISION_2).
        let mut cap = vec![0u8; 20];
        cap[..4].copy_from_slice(&0x0200_0001u32.to_le_bytes());
        cap[4..8].copy_from_slice(&(1u32 << 10).to_le_bytes());
        rustix::fs::lsetxattr(
            a.join("block").as_path(),
            "security.capability",
            &cap,
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        // One file older than the epoch keeps its times.
        let old = rustix::fs::Timespec {
            tv_sec: 1_000,
            tv_nsec: 0,
        };
        rustix::fs::utimensat(
            rustix::fs::CWD,
            a.join("empty").as_path(),
            &rustix::fs::Timestamps {
                last_access: old,
                last_modification: old,
            },
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }

    fn image(dir: &Path, name: &str, source: &Path) -> (PathBuf, String) {
        let fs = Ext4 {
            disk: dir.join(name),
            offset: 1 << 20,
            size: 64 << 20,
            label: "root".to_string(),
            uuid: "4f68bce3-e8cd-4db1-96e7-fbcaf984b709".to_string(),
            source: source.to_path_buf(),
            epoch: EPOCH,
        };
        std::fs::File::create(&fs.disk)
            .unwrap()
            .set_len(fs.offset + fs.size + (1 << 20))
            .unwrap();
        write(&fs).unwrap();
        let spec = format!("{}?offset={}", fs.disk.display(), fs.offset);
        (fs.disk, spec)
    }

    #[test]
    fn a_tree_reads_back_as_it_was_with_times_clamped_and_the_same_bytes_twice() {
        assert!(
            rustix::process::geteuid().is_root(),
            "needs root: the tree it copies has files of other owners and a capability"
        );
        for tool in ["mkfs.ext4", "fsck.ext4", "debugfs"] {
            strata_process::require(tool).unwrap();
        }
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        make_tree(&src);
        let (disk, spec) = image(t.path(), "one.img", &src);

        let fsck = Command::new("fsck.ext4")
            .args(["-fn", &spec])
            .output()
            .unwrap();
        assert!(
            fsck.status.success(),
            "fsck.ext4: {}",
            String::from_utf8_lossy(&fsck.stdout)
        );

        let out = t.path().join("out");
        std::fs::create_dir(&out).unwrap();
        debugfs(&spec, &format!("rdump /a /b /many {}", out.display()));
        let mut seen = 0;
        for entry in [
            "a",
            "a/deeper",
            "a/empty",
            "a/small",
            "a/block",
            "a/big",
            "a/deeper/big-third",
            "b/big-again",
            "a/short",
            "a/long",
            "b/short-again",
            "many",
            "many/file-02999",
        ] {
            let (want, got) = (src.join(entry), out.join(entry));
            let (w, g) = (
                std::fs::symlink_metadata(&want).unwrap(),
                std::fs::symlink_metadata(&got).unwrap(),
            );
            assert_eq!(w.file_type(), g.file_type(), "{entry}");
            if w.file_type().is_symlink() {
                assert_eq!(
                    std::fs::read_link(&want).unwrap(),
                    std::fs::read_link(&got).unwrap(),
                    "{entry}"
                );
                continue;
            }
            assert_eq!(w.mode() & 0o7777, g.mode() & 0o7777, "{entry}");
            assert_eq!((w.uid(), w.gid()), (g.uid(), g.gid()), "{entry}");
            assert_eq!(crate::fs::clamped(&w, EPOCH).1, g.mtime(), "{entry}");
            if w.is_file() {
                assert_eq!(
                    std::fs::read(&want).unwrap(),
                    std::fs::read(&got).unwrap(),
                    "{entry}"
                );
            }
            seen += 1;
        }
        assert_eq!(seen, 10);
        assert_eq!(std::fs::read_dir(out.join("many")).unwrap().count(), 3000);
        assert_eq!(
            std::fs::symlink_metadata(out.join("a/empty"))
                .unwrap()
                .mtime(),
            1_000
        );

        // One inode for each set of hard links, symlinks too.
        let big = debugfs(&spec, "stat /a/big");
        assert_eq!(stat_field(&big, "Links:"), "3", "{big}");
        for other in ["/b/big-again", "/a/deeper/big-third"] {
            assert_eq!(
                stat_field(&debugfs(&spec, &format!("stat {other}")), "Inode:"),
                stat_field(&big, "Inode:")
            );
        }
        let short = debugfs(&spec, "stat /a/short");
        assert_eq!(stat_field(&short, "Links:"), "2", "{short}");
        assert_eq!(
            stat_field(&debugfs(&spec, "stat /b/short-again"), "Inode:"),
            stat_field(&short, "Inode:")
        );

        let xattr = debugfs(&spec, "ea_get /a/small user.strata");
        assert!(xattr.contains("a value"), "{xattr}");
        let caps = debugfs(&spec, "ea_list /a/block");
        assert!(caps.contains("security.capability"), "{caps}");
        let root = debugfs(&spec, "stat /");
        assert!(root.contains("User:     0   Group:     0"), "{root}");

        let (again, _) = image(t.path(), "two.img", &src);
        assert!(
            std::fs::read(&disk).unwrap() == std::fs::read(&again).unwrap(),
            "two writes of one tree differ"
        );
    }

    #[test]
    fn a_device_node_is_refused_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir(&src).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            src.join("fifo").as_path(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let fs = Ext4 {
            disk: t.path().join("disk.img"),
            offset: 0,
            size: 16 << 20,
            label: "root".to_string(),
            uuid: "4f68bce3-e8cd-4db1-96e7-fbcaf984b709".to_string(),
            source: src.clone(),
            epoch: EPOCH,
        };
        std::fs::File::create(&fs.disk)
            .unwrap()
            .set_len(fs.size)
            .unwrap();
        let err = format!("{:#}", write(&fs).unwrap_err());
        assert!(
            err.contains(&src.join("fifo").display().to_string()) && err.contains("FIFO"),
            "{err}"
        );
    }
}
