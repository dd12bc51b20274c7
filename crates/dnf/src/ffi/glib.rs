//! glib's ownership rules, once: a `GError` becomes a [`GErr`] and is
//! freed, a GObject reference becomes an [`Object`] released on drop, a
//! borrowed C string is copied, and libdnf's and librepo's glib log
//! messages go to `tracing`.
//!
//! Why it exists: every other handle of the seam is built from these, so
//! each of those rules is written (and its `unsafe` justified) in one place.
//!
//! What it must not do: know libdnf's objects. It names no `Dnf*` type
//! beyond `DnfError`'s domain (which tells libdnf's error codes apart).

#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Once;

use strata_libdnf_sys as sys;

use crate::error::Error;

/// A failed libdnf call: the `GError` it returned, converted and freed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GErr {
    /// libdnf's `DnfError` code when the error is in libdnf's domain.
    pub(crate) dnf_code: Option<i32>,
    pub(crate) message: String,
}

impl GErr {
    /// Takes ownership of `err` (frees it) and copies its message.
    fn take(err: *mut sys::GError) -> GErr {
        if err.is_null() {
            return GErr {
                dnf_code: None,
                message: "libdnf reported failure without an error message".to_string(),
            };
        }
        // SAFETY: `err` is a valid GError handed to us by libdnf; we read its
        // fields, then free it exactly once.
        unsafe {
            let e = &*err;
            let message = opt_string(e.message).unwrap_or_default().trim().to_string();
            let dnf_code = (e.domain == sys::dnf_error_quark()).then_some(e.code);
            sys::g_error_free(err);
            GErr { dnf_code, message }
        }
    }

    pub(crate) fn into_error(self, op: &str) -> Error {
        Error::Libdnf {
            op: op.to_string(),
            code: self.dnf_code,
            message: self.message,
        }
    }

    pub(crate) fn is(&self, code: sys::DnfError) -> bool {
        self.dnf_code == Some(code as i32)
    }
}

/// Runs a libdnf call that reports failure through `GError **` and a
/// `gboolean` result.
pub(super) fn gcall(f: impl FnOnce(*mut *mut sys::GError) -> sys::gboolean) -> Result<(), GErr> {
    let mut err: *mut sys::GError = ptr::null_mut();
    let ok = f(&mut err);
    if ok != 0 {
        if !err.is_null() {
            // A buggy callee may set an error and still succeed; drop it.
            // SAFETY: owned GError returned to us.
            unsafe { sys::g_error_free(err) };
        }
        Ok(())
    } else {
        Err(GErr::take(err))
    }
}

/// Copies a borrowed C string; `None` for NULL.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string valid for the call.
pub(super) unsafe fn opt_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

/// Converts a string for libdnf; the crate validates inputs beforehand, so a
/// NUL byte here is reported as an invalid option rather than a panic.
pub(crate) fn cstring(s: &str, what: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::InvalidOptions(format!("{what} contains a NUL byte: {s:?}")))
}

pub(crate) fn path_cstring(p: &Path, what: &str) -> Result<CString, Error> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::InvalidOptions(format!("{what} contains a NUL byte: {}", p.display())))
}

/// An owned reference to a GObject, released with `g_object_unref`.
pub(crate) struct Object<T> {
    ptr: NonNull<T>,
}

impl<T> Object<T> {
    /// # Safety
    /// `ptr` must be a GObject instance whose reference the caller owns.
    pub(super) unsafe fn from_full(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Object { ptr })
    }

    pub(super) fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }
}

impl<T> Drop for Object<T> {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { sys::g_object_unref(self.ptr.as_ptr().cast()) }
    }
}

/// Routes libdnf's and librepo's glib log messages into `tracing` instead of
/// glib's default stderr printer. Installed once per process, for those two
/// log domains only, so other glib users in the process are unaffected.
pub(crate) fn install_log_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for domain in [c"libdnf", c"librepo"] {
            let levels = sys::G_LOG_LEVEL_MASK | sys::G_LOG_FLAG_FATAL | sys::G_LOG_FLAG_RECURSION;
            // SAFETY: static domain string, a handler that never unwinds.
            unsafe {
                sys::g_log_set_handler(domain.as_ptr(), levels, Some(log_handler), ptr::null_mut());
            }
        }
    });
}

unsafe extern "C" fn log_handler(
    domain: *const sys::gchar,
    level: sys::GLogLevelFlags,
    message: *const sys::gchar,
    _data: sys::gpointer,
) {
    // SAFETY: glib passes valid (or NULL) strings for the duration of the call.
    let (domain, message) = unsafe {
        (
            opt_string(domain).unwrap_or_default(),
            opt_string(message).unwrap_or_default(),
        )
    };
    if level & (sys::G_LOG_LEVEL_ERROR | sys::G_LOG_LEVEL_CRITICAL) != 0 {
        tracing::error!(target: "strata_dnf::libdnf", %domain, "{message}");
    } else if level & sys::G_LOG_LEVEL_WARNING != 0 {
        tracing::warn!(target: "strata_dnf::libdnf", %domain, "{message}");
    } else if level & (sys::G_LOG_LEVEL_MESSAGE | sys::G_LOG_LEVEL_INFO) != 0 {
        // Banners and progress chatter (librepo's version line): what
        // strata itself reports at info says the same in its own words.
        tracing::debug!(target: "strata_dnf::libdnf", %domain, "{message}");
    } else {
        tracing::trace!(target: "strata_dnf::libdnf", %domain, "{message}");
    }
}
