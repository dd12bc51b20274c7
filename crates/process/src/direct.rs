//! Files written around the page cache.
//!
//! On a virtual machine, fresh page cache is what a large write costs
//! most: buffered writes of 2.7 GB into a file on ext4 spent 6-7 s in the
//! kernel taking new pages, where direct ones took 0.2 s of CPU. So the
//! large outputs (a disk's root filesystem, an OCI archive, a compressed
//! disk) are written with direct I/O where their filesystem has it
//! (tmpfs before Linux 6.6 has not: the callers then write buffered).
//! Direct transfers need block-aligned offsets, lengths and memory;
//! [`Aligned`] gives the memory.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The alignment direct transfers need (the largest logical block size).
pub const ALIGN: usize = 4096;

/// `path` opened for writing with direct I/O, or `None` where its
/// filesystem has none.
pub fn open_direct(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path);
    match opened {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `len` bytes of block-aligned memory.
pub struct Aligned {
    backing: Vec<u8>,
    skip: usize,
    len: usize,
}

impl Aligned {
    pub fn new(len: usize) -> Aligned {
        let backing = vec![0u8; len + ALIGN];
        let skip = backing.as_ptr().align_offset(ALIGN);
        Aligned { backing, skip, len }
    }

    pub fn get(&mut self) -> &mut [u8] {
        &mut self.backing[self.skip..self.skip + self.len]
    }
}
