//! The FFI seam to Berkeley DB: the only module of this crate with `unsafe`.
//!
//! A [`Db`] is one database file created new (never opened existing), with
//! no environment: libdb keeps a private cache and writes everything out on
//! [`Db::close`]. The page size is fixed, not libdb's default of the file
//! system's block size, so the bytes do not depend on the build host.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use strata_libdb_sys as sys;

use crate::Error;

/// The page size of every file written (RHEL 8's rpm uses libdb's default,
/// 4096 on its file systems).
pub(crate) const PAGE_SIZE: u32 = 4096;

/// The access method of a database file.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Hash,
    Btree,
}

/// An open database handle; closed (and its file written) by [`Db::close`],
/// or discarded on drop.
pub(crate) struct Db {
    handle: *mut sys::DB,
    path: String,
}

fn check(rc: i32, what: &str, path: &str) -> Result<(), Error> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: db_strerror returns a static or thread-local C string for
    // any error number.
    let message = unsafe { CStr::from_ptr(sys::db_strerror(rc)) }
        .to_string_lossy()
        .into_owned();
    Err(Error::Bdb {
        path: path.to_string(),
        what: what.to_string(),
        message,
    })
}

impl Db {
    /// Creates the database file `path`, which must not exist.
    pub(crate) fn create(path: &Path, kind: Kind) -> Result<Db, Error> {
        let shown = path.display().to_string();
        let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Bdb {
            path: shown.clone(),
            what: "naming".into(),
            message: "path contains a NUL byte".into(),
        })?;
        let mut handle: *mut sys::DB = ptr::null_mut();
        // SAFETY: db_create writes a new handle into `handle` (no
        // environment); on failure it leaves it null.
        check(
            unsafe { sys::db_create(&mut handle, ptr::null_mut(), 0) },
            "db_create",
            &shown,
        )?;
        let db = Db {
            handle,
            path: shown,
        };
        let access = match kind {
            Kind::Hash => sys::DB_HASH,
            Kind::Btree => sys::DB_BTREE,
        };
        // SAFETY: `handle` is a live handle from db_create; its method
        // pointers are always set by libdb.
        unsafe {
            let set_pagesize = (*db.handle).set_pagesize.expect("DB->set_pagesize");
            check(set_pagesize(db.handle, PAGE_SIZE), "set_pagesize", &db.path)?;
            let open = (*db.handle).open.expect("DB->open");
            check(
                open(
                    db.handle,
                    ptr::null_mut(),
                    cpath.as_ptr(),
                    ptr::null(),
                    access,
                    sys::DB_CREATE | sys::DB_EXCL,
                    0o644,
                ),
                "open",
                &db.path,
            )?;
        }
        Ok(db)
    }

    /// Stores `value` under `key`; a key stored twice is a caller's bug
    /// reported as an error.
    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let mut k = dbt(key);
        let mut v = dbt(value);
        // SAFETY: the DBTs point into `key` and `value`, which outlive the
        // call; libdb copies them and does not keep the pointers.
        let rc = unsafe {
            let put = (*self.handle).put.expect("DB->put");
            put(
                self.handle,
                ptr::null_mut(),
                &mut k,
                &mut v,
                sys::DB_NOOVERWRITE,
            )
        };
        check(rc, "put", &self.path)
    }

    /// Writes the file out and releases the handle.
    pub(crate) fn close(mut self) -> Result<(), Error> {
        let handle = std::mem::replace(&mut self.handle, ptr::null_mut());
        // SAFETY: `handle` is live and is not used again (self.handle is
        // now null, so drop does nothing).
        let rc = unsafe {
            let close = (*handle).close.expect("DB->close");
            close(handle, 0)
        };
        check(rc, "close", &self.path)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: the handle is live; DB_NOSYNC discards the unwritten
            // file rather than flushing a half-built database.
            unsafe {
                if let Some(close) = (*self.handle).close {
                    close(self.handle, sys::DB_NOSYNC);
                }
            }
        }
    }
}

fn dbt(bytes: &[u8]) -> sys::DBT {
    sys::DBT {
        data: bytes.as_ptr() as *mut std::ffi::c_void,
        size: u32::try_from(bytes.len()).expect("record larger than 4 GiB"),
        ..Default::default()
    }
}
