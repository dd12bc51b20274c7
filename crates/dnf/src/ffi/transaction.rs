//! The `DnfTransaction` strata creates for each install: its flags,
//! matching packages to repositories, download with progress, and the rpm
//! transaction itself with librpm's messages passed on through `tracing`.
//!
//! Why it exists: a transaction runs long, calls back into Rust (download
//! progress) and makes librpm print; keeping the callback's lifetime rules
//! and the `DnfState` objects it needs in one place keeps them checkable.
//!
//! What it must not do: solve the goal again (libdnf is told not to) or
//! decide what a failure means (scriptlets and full filesystems are named by
//! `transaction_output.rs`).

#![allow(unsafe_code)]

use std::marker::PhantomData;

use strata_libdnf_sys as sys;

use super::glib::{gcall, Object};
use super::goal::{Goal, PackageList};
use super::rpm::RpmLogCapture;
use crate::error::Error;

/// A `DnfState` progress object; also carries the rpmdb lock, released when
/// the state is dropped.
pub(crate) struct State {
    obj: Object<sys::DnfState>,
}

impl State {
    pub(crate) fn new() -> Result<State, Error> {
        // SAFETY: new reference.
        unsafe { Object::from_full(sys::dnf_state_new()) }
            .map(|obj| State { obj })
            .ok_or_else(|| Error::InvalidOptions("dnf_state_new returned NULL".into()))
    }

    pub(super) fn ptr(&self) -> *mut sys::DnfState {
        self.obj.as_ptr()
    }
}

/// A `DnfTransaction`, created by us rather than the context's cached one, so
/// that each depsolve starts from a clean rpm transaction set.
pub(crate) struct Transaction<'a> {
    pub(super) obj: Object<sys::DnfTransaction>,
    pub(super) _ctx: PhantomData<&'a sys::DnfContext>,
}

impl Transaction<'_> {
    fn ptr(&self) -> *mut sys::DnfTransaction {
        self.obj.as_ptr()
    }

    /// `flags` is a `DnfTransactionFlag` bitmask.
    pub(crate) fn set_flags(&self, flags: u64) {
        // SAFETY: valid transaction.
        unsafe {
            sys::dnf_transaction_set_flags(self.ptr(), flags);
            // The goal was solved by us with our own flags; libdnf must not
            // re-solve it with its defaults (which would pull weak deps back).
            sys::dnf_transaction_set_dont_solve_goal(self.ptr(), 1);
        }
    }

    /// Attaches each package to its `DnfRepo` so that its local file name is
    /// known.
    pub(crate) fn ensure_repos(&self, list: &PackageList<'_>) -> Result<(), Error> {
        if list.len() == 0 {
            return Ok(());
        }
        // SAFETY: valid transaction and array.
        gcall(|e| unsafe { sys::dnf_transaction_ensure_repo_list(self.ptr(), list.as_ptr(), e) })
            .map_err(|e| e.into_error("matching packages to repositories"))
    }

    /// `dnf_transaction_depsolve` (not re-solving, see `set_flags`): finds
    /// which packages still need downloading and checks the others.
    pub(crate) fn prepare(&self, goal: &Goal<'_>) -> Result<(), Error> {
        let state = State::new()?;
        // SAFETY: valid transaction, goal and state.
        gcall(|e| unsafe { sys::dnf_transaction_depsolve(self.ptr(), goal.ptr, state.ptr(), e) })
            .map_err(|e| e.into_error("checking packages"))
    }

    /// `dnf_transaction_download`: downloads the packages `prepare` found
    /// missing into their repository's cache directory (librepo verifies each
    /// against the repodata checksum). `on_percent` hears how far it is
    /// (0–100), while it runs only.
    pub(crate) fn download(&self, on_percent: &mut dyn FnMut(u32)) -> Result<(), Error> {
        let state = State::new()?;
        let mut callback: &mut dyn FnMut(u32) = on_percent;
        let data = (&mut callback as *mut &mut dyn FnMut(u32)).cast::<std::ffi::c_void>();
        // SAFETY: the handler's type is the signal's (instance, guint,
        // user data), as GLib's callbacks are cast to GCallback; `data`
        // points at `callback`, which outlives the handler: it is
        // disconnected below, before `callback` goes out of scope, and the
        // signal is emitted only from within dnf_transaction_download, on
        // this thread.
        let handler = unsafe {
            let f: unsafe extern "C" fn(
                *mut sys::DnfState,
                std::ffi::c_uint,
                *mut std::ffi::c_void,
            ) = percentage_changed;
            sys::g_signal_connect_data(
                state.ptr().cast(),
                c"percentage-changed".as_ptr(),
                Some(std::mem::transmute::<
                    unsafe extern "C" fn(
                        *mut sys::DnfState,
                        std::ffi::c_uint,
                        *mut std::ffi::c_void,
                    ),
                    unsafe extern "C" fn(),
                >(f)),
                data,
                None,
                0,
            )
        };
        // SAFETY: valid transaction and state.
        let result =
            gcall(|e| unsafe { sys::dnf_transaction_download(self.ptr(), state.ptr(), e) })
                .map_err(|e| e.into_error("downloading packages"));
        if handler != 0 {
            // SAFETY: the handler connected above, on a live instance.
            unsafe { sys::g_signal_handler_disconnect(state.ptr().cast(), handler) };
        }
        result
    }

    /// `dnf_transaction_commit`: the rpm transaction into the install root.
    pub(crate) fn commit(&self, goal: &Goal<'_>) -> Result<(), Error> {
        let state = State::new()?;
        let log = RpmLogCapture::start();
        // SAFETY: valid transaction, goal and state.
        let done =
            gcall(|e| unsafe { sys::dnf_transaction_commit(self.ptr(), goal.ptr, state.ptr(), e) })
                .map_err(|e| e.into_error("running the rpm transaction"));
        log.finish();
        done
    }
}

/// DnfState's `percentage-changed` handler: calls the closure `data`
/// points at (see [`Transaction::download`]).
unsafe extern "C" fn percentage_changed(
    _state: *mut sys::DnfState,
    percent: std::ffi::c_uint,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is the `&mut dyn FnMut(u32)` `download` passed, alive
    // while the handler is connected.
    let callback = unsafe { &mut *data.cast::<&mut dyn FnMut(u32)>() };
    callback(percent);
}
