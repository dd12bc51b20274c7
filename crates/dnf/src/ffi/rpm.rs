//! librpm itself, beside libdnf: what rpm prints and logs during a
//! transaction (caught in a temporary file, then passed on or read back)
//! and a keyring that checks package signatures against exactly the keys
//! strata adds.
//!
//! Why it exists: these calls go to librpm's process-global log and its
//! keyring API, not to a libdnf object, and have ownership rules of their
//! own (C `FILE` streams, a keyring freed on drop).
//!
//! What it must not do: decide which keys a package must be signed by
//! (`dnf.rs` does, per repository) or what a scriptlet failure means.

#![allow(unsafe_code)]

use std::path::Path;
use std::ptr::NonNull;

use strata_libdnf_sys as sys;

use super::glib::{gcall, path_cstring};
use crate::error::Error;

/// A temporary file librpm writes into through a C `FILE`, read back as
/// text once the stream is closed.
struct RpmFile {
    file: std::fs::File,
    stream: NonNull<sys::FILE>,
}

impl RpmFile {
    fn new() -> Option<RpmFile> {
        use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
        let file = tempfile::tempfile().ok()?;
        let fd = rustix::io::dup(&file).ok()?.into_raw_fd();
        // SAFETY: fdopen takes ownership of `fd` (a fresh duplicate);
        // `read_back` closes the stream.
        match NonNull::new(unsafe { sys::fdopen(fd, c"w".as_ptr()) }) {
            Some(stream) => Some(RpmFile { file, stream }),
            None => {
                // SAFETY: fdopen failed, so `fd` is still ours.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
                None
            }
        }
    }

    /// Closes the stream (rpm must no longer hold it) and returns what
    /// was written.
    fn read_back(mut self) -> Option<String> {
        use std::io::{Read, Seek};
        // SAFETY: the stream `new` opened, closed once here.
        unsafe { sys::fclose(self.stream.as_ptr()) };
        let mut text = String::new();
        self.file.seek(std::io::SeekFrom::Start(0)).ok()?;
        self.file.read_to_string(&mut text).ok()?;
        Some(text)
    }
}

/// What librpm prints itself while a transaction runs (its warnings to
/// stderr, which would cut through a terminal's live region), caught in
/// an [`RpmFile`] instead and passed on through `tracing` when the
/// transaction ends: errors as errors, warnings as warnings, the rest at
/// debug. rpm's `NOKEY` warnings go to debug: the install root's rpm
/// keyring is empty by design, and strata's policy has checked every
/// package's signature against the manifest's keys before the install.
/// Messages libdnf's own rpmlog callbacks take never reach the file.
pub(super) struct RpmLogCapture {
    /// The file, and the log file rpm had before.
    file: Option<(RpmFile, *mut sys::FILE)>,
}

impl RpmLogCapture {
    pub(super) fn start() -> RpmLogCapture {
        let file = RpmFile::new().map(|f| {
            // SAFETY: the stream stays open until `finish` puts the
            // previous log file back.
            let previous = unsafe { sys::rpmlogSetFile(f.stream.as_ptr()) };
            (f, previous)
        });
        RpmLogCapture { file }
    }

    pub(super) fn finish(self) {
        let Some((file, previous)) = self.file else {
            return;
        };
        // SAFETY: rpm's previous log file, back before ours is closed.
        unsafe { sys::rpmlogSetFile(previous) };
        let Some(text) = file.read_back() else {
            return;
        };
        for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
            if let Some(m) = line.strip_prefix("error: ") {
                tracing::error!(target: "rpm", "{m}");
            } else if let Some(m) = line.strip_prefix("warning: ") {
                if m.ends_with(": NOKEY") {
                    tracing::debug!(target: "rpm", "{m}");
                } else {
                    tracing::warn!(target: "rpm", "{m}");
                }
            } else {
                tracing::debug!(target: "rpm", "{line}");
            }
        }
    }
}

/// The scriptlet failures rpm logs while a transaction runs. rpm keeps
/// every message of warning priority or above in memory, whoever else
/// listens (libdnf replaces rpmlog's callback while it checks signatures),
/// so the watch clears that list when it starts and reads it back when it
/// finishes. rpm says `%post(NEVRA) scriptlet failed, exit status N` (an
/// error for the scriptlets that stop the install, a warning for the
/// others). The list is the process's: one transaction at a time.
pub(crate) struct ScriptletWatch(());

impl ScriptletWatch {
    pub(crate) fn start() -> ScriptletWatch {
        // SAFETY: clears rpmlog's saved records; no pointers involved.
        unsafe { sys::rpmlogClose() };
        ScriptletWatch(())
    }

    /// The failure messages logged since `start`, in order.
    pub(crate) fn finish(self) -> Vec<String> {
        let Some(file) = RpmFile::new() else {
            return Vec::new();
        };
        // SAFETY: rpm writes its saved records through the open stream.
        unsafe { sys::rpmlogPrint(file.stream.as_ptr()) };
        file.read_back()
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| l.contains(" scriptlet failed, "))
            .map(str::to_string)
            .collect()
    }
}

/// An rpm keyring holding exactly the public keys we add to it; used to check
/// package signatures per repository, independently of the host's keys.
pub(crate) struct Keyring {
    ptr: NonNull<sys::rpmKeyring_s>,
}

impl Keyring {
    pub(crate) fn new() -> Result<Keyring, Error> {
        // SAFETY: new keyring, freed on drop.
        NonNull::new(unsafe { sys::rpmKeyringNew() })
            .map(|ptr| Keyring { ptr })
            .ok_or_else(|| Error::InvalidOptions("rpmKeyringNew returned NULL".into()))
    }

    /// Adds an ASCII-armored public key file.
    pub(crate) fn add_key_file(&self, path: &Path) -> Result<(), Error> {
        // libdnf silently skips symlinks here, which would leave the keyring
        // empty and fail every package with a confusing message.
        let real = std::fs::canonicalize(path)
            .map_err(|e| Error::io(format!("resolving gpg key {}", path.display()), e))?;
        let c = path_cstring(&real, "gpg key path")?;
        // SAFETY: valid keyring and path.
        gcall(|e| unsafe { sys::dnf_keyring_add_public_key(self.ptr.as_ptr(), c.as_ptr(), e) })
            .map_err(|e| e.into_error(&format!("importing gpg key {}", path.display())))
    }

    /// Checks that `path` carries a valid signature by a key in this keyring;
    /// the error message is librpm's.
    pub(crate) fn check_file(&self, path: &Path) -> Result<(), String> {
        let c = path_cstring(path, "package path").map_err(|e| e.to_string())?;
        // SAFETY: valid keyring and path.
        gcall(|e| unsafe {
            sys::dnf_keyring_check_untrusted_file(self.ptr.as_ptr(), c.as_ptr(), e)
        })
        .map_err(|e| e.message.trim().to_string())
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        // SAFETY: we own the keyring.
        unsafe {
            sys::rpmKeyringFree(self.ptr.as_ptr());
        }
    }
}
