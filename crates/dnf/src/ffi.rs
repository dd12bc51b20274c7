//! The FFI seam: the only module of `strata-dnf` that calls into libdnf.
//!
//! Why it exists: libdnf's C API hands out GObjects, glib pointer arrays,
//! borrowed strings and `GError`s. This module turns each of those into an
//! owned Rust value or an RAII handle (`g_object_unref` / `g_ptr_array_unref`
//! on drop) and every failed call into [`crate::Error::Libdnf`] carrying the
//! `GError`'s message, so that the rest of the crate is safe code.
//!
//! What it must not do: make decisions. Policy (which repos, what to verify,
//! how to order steps) lives in `dnf.rs`; this module only states the
//! ownership rules of each libdnf call it wraps. Every handle here holds raw
//! pointers and is therefore neither `Send` nor `Sync`, which is what libdnf's
//! process-global state requires.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::Once;

use strata_libdnf_sys as sys;

use crate::package::{Checksum, Package};
use crate::Error;

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
fn gcall(f: impl FnOnce(*mut *mut sys::GError) -> sys::gboolean) -> Result<(), GErr> {
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
unsafe fn opt_string(p: *const c_char) -> Option<String> {
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
    unsafe fn from_full(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Object { ptr })
    }

    fn as_ptr(&self) -> *mut T {
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

/// Process-global libdnf settings. They live in libdnf's global main config,
/// so every context sets all of them again rather than trusting leftovers.
pub(crate) struct Globals {
    pub(crate) install_weak_deps: bool,
    pub(crate) best: bool,
}

pub(crate) fn apply_globals(g: &Globals) {
    // SAFETY: plain setters of libdnf's global configuration; an empty
    // config file path makes libdnf skip the host's /etc/dnf/dnf.conf (it
    // must be set before the main config is first read, which is why the
    // caller does this before creating the first context).
    unsafe {
        sys::dnf_context_set_config_file_path(c"".as_ptr());
        sys::dnf_context_set_plugins_all_disabled(1);
        sys::dnf_context_set_install_weak_deps(g.install_weak_deps.into());
        sys::dnf_context_set_best(g.best.into());
    }
}

/// A `DnfContext`.
pub(crate) struct Context {
    obj: Object<sys::DnfContext>,
}

/// Paths and settings handed to a context before `dnf_context_setup`.
pub(crate) struct ContextSettings<'a> {
    pub(crate) repos_dir: &'a Path,
    pub(crate) cache_dir: &'a Path,
    pub(crate) solv_dir: &'a Path,
    pub(crate) lock_dir: &'a Path,
    pub(crate) install_root: &'a Path,
    pub(crate) release_ver: &'a str,
    pub(crate) arch: &'a str,
    pub(crate) rpm_macros: &'a [(String, String)],
    /// libdnf's cache age in seconds for remote metadata (`u32::MAX`: never
    /// refresh).
    pub(crate) cache_age: u32,
}

impl Context {
    pub(crate) fn new(s: &ContextSettings<'_>) -> Result<Context, Error> {
        let repos_dir = path_cstring(s.repos_dir, "repos dir")?;
        let cache_dir = path_cstring(s.cache_dir, "cache dir")?;
        let solv_dir = path_cstring(s.solv_dir, "solv dir")?;
        let lock_dir = path_cstring(s.lock_dir, "lock dir")?;
        let root = path_cstring(s.install_root, "install root")?;
        let release_ver = cstring(s.release_ver, "release_ver")?;
        let arch = cstring(s.arch, "arch")?;
        let macros = s
            .rpm_macros
            .iter()
            .map(|(k, v)| {
                Ok((
                    cstring(k, "rpm macro name")?,
                    cstring(v, "rpm macro value")?,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        // SAFETY: dnf_context_new returns a new reference; every setter
        // copies its string argument.
        unsafe {
            let obj = Object::from_full(sys::dnf_context_new())
                .ok_or_else(|| Error::InvalidOptions("dnf_context_new returned NULL".into()))?;
            let ctx = obj.as_ptr();
            sys::dnf_context_set_repo_dir(ctx, repos_dir.as_ptr());
            // An empty vars dir list: no $vars from the host or the root.
            let no_vars: [*const sys::gchar; 1] = [ptr::null()];
            sys::dnf_context_set_vars_dir(ctx, no_vars.as_ptr());
            sys::dnf_context_set_cache_dir(ctx, cache_dir.as_ptr());
            sys::dnf_context_set_solv_dir(ctx, solv_dir.as_ptr());
            sys::dnf_context_set_lock_dir(ctx, lock_dir.as_ptr());
            sys::dnf_context_set_install_root(ctx, root.as_ptr());
            sys::dnf_context_set_release_ver(ctx, release_ver.as_ptr());
            sys::dnf_context_set_arch(ctx, arch.as_ptr());
            sys::dnf_context_set_plugins_dir(ctx, ptr::null());
            // History (swdb) would write /var/lib/dnf/history.sqlite into the
            // root; images carry the rpmdb only.
            sys::dnf_context_set_write_history(ctx, 0);
            sys::dnf_context_set_check_disk_space(ctx, 0);
            sys::dnf_context_set_check_transaction(ctx, 1);
            sys::dnf_context_set_cache_age(ctx, s.cache_age);
            // libdnf's default hides every rpm message below EMERG, among
            // them the warning a failed %post logs; warnings are what the
            // transaction's output and ScriptletWatch need to see.
            sys::dnf_context_set_rpm_verbosity(ctx, c"warn".as_ptr());
            for (k, v) in &macros {
                sys::dnf_context_set_rpm_macro(ctx, k.as_ptr(), v.as_ptr());
            }
            Ok(Context { obj })
        }
    }

    fn ptr(&self) -> *mut sys::DnfContext {
        self.obj.as_ptr()
    }

    /// `dnf_context_setup`: applies rpm macros, loads the `.repo` files.
    pub(crate) fn setup(&self) -> Result<(), Error> {
        // SAFETY: valid context; NULL cancellable is allowed.
        gcall(|e| unsafe { sys::dnf_context_setup(self.ptr(), ptr::null_mut(), e) })
            .map_err(|e| e.into_error("setting up libdnf context"))
    }

    /// The repositories libdnf loaded, as (id, enabled).
    pub(crate) fn repos(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        // SAFETY: the array and its DnfRepo elements are owned by the context.
        unsafe {
            let arr = sys::dnf_context_get_repos(self.ptr());
            if arr.is_null() {
                return out;
            }
            let arr = &*arr;
            for i in 0..arr.len as usize {
                let repo = *arr.pdata.add(i) as *mut sys::DnfRepo;
                let id = opt_string(sys::dnf_repo_get_id(repo)).unwrap_or_default();
                let enabled = sys::dnf_repo_get_enabled(repo) != sys::DNF_REPO_ENABLED_NONE;
                out.push((id, enabled));
            }
        }
        out
    }

    /// Builds a fresh sack (repo metadata plus, unless `skip_rpmdb`, the
    /// rpmdb of the install root) and a fresh goal.
    ///
    /// `&mut self`: the previous sack is released here, so nothing that
    /// borrows it ([`Sack`], [`Goal`], [`PackageList`], all tied to a
    /// shared borrow of the context) can outlive the call.
    pub(crate) fn setup_sack(&mut self, skip_rpmdb: bool) -> Result<(), Error> {
        let flags = if skip_rpmdb {
            sys::DNF_CONTEXT_SETUP_SACK_FLAG_SKIP_RPMDB
        } else {
            sys::DNF_CONTEXT_SETUP_SACK_FLAG_NONE
        };
        // SAFETY: valid context. libdnf 0.69 overwrites its sack pointer
        // without releasing the previous sack (build.rs accepts 0.69 only);
        // we drop that orphaned reference ourselves once the new sack
        // exists. Nothing of ours still points into the old sack: `&mut
        // self` ends every borrow of it.
        unsafe {
            let old = sys::dnf_context_get_sack(self.ptr());
            let state = State::new()?;
            let res = gcall(|e| {
                sys::dnf_context_setup_sack_with_flags(self.ptr(), state.ptr(), flags, e)
            });
            let new = sys::dnf_context_get_sack(self.ptr());
            if !old.is_null() && old != new {
                sys::g_object_unref(old.cast());
            }
            res.map_err(|e| e.into_error("loading repositories"))
        }
    }

    pub(crate) fn sack(&self) -> Sack<'_> {
        // SAFETY: borrowed pointer, valid while the context lives and until
        // the next setup_sack, which takes `&mut self` and so cannot run
        // while this borrow lives.
        Sack {
            ptr: unsafe { sys::dnf_context_get_sack(self.ptr()) },
            _ctx: PhantomData,
        }
    }

    pub(crate) fn goal(&self) -> Goal<'_> {
        // SAFETY: borrowed, owned by the context (see `sack`).
        Goal {
            ptr: unsafe { sys::dnf_context_get_goal(self.ptr()) },
            _ctx: PhantomData,
        }
    }

    /// `dnf_context_install`: resolves `spec` (name, NEVRA, provide, file,
    /// glob) to the best match and adds it to the goal.
    pub(crate) fn install(&self, spec: &str) -> Result<(), GErr> {
        let c = CString::new(spec).map_err(|_| GErr {
            dnf_code: None,
            message: format!("package spec contains a NUL byte: {spec:?}"),
        })?;
        // SAFETY: valid context, copied string.
        gcall(|e| unsafe { sys::dnf_context_install(self.ptr(), c.as_ptr(), e) })
    }

    /// A new transaction bound to this context's repositories.
    pub(crate) fn new_transaction(&self) -> Result<Transaction<'_>, Error> {
        // SAFETY: new reference; set_repos takes its own ref on the array.
        unsafe {
            let obj = Object::from_full(sys::dnf_transaction_new(self.ptr()))
                .ok_or_else(|| Error::InvalidOptions("dnf_transaction_new returned NULL".into()))?;
            sys::dnf_transaction_set_repos(obj.as_ptr(), sys::dnf_context_get_repos(self.ptr()));
            Ok(Transaction {
                obj,
                _ctx: PhantomData,
            })
        }
    }
}

/// The context's `DnfSack`, borrowed.
pub(crate) struct Sack<'a> {
    ptr: *mut sys::DnfSack,
    _ctx: PhantomData<&'a Context>,
}

impl Sack<'_> {
    /// Excludes every available (not installed) package whose name matches
    /// one of the glob `patterns`.
    pub(crate) fn exclude_names(&self, patterns: &[String]) -> Result<(), Error> {
        if self.ptr.is_null() {
            return Err(Error::InvalidOptions("no sack to exclude from".into()));
        }
        for pat in patterns {
            let c = cstring(pat, "exclude pattern")?;
            // SAFETY: query and package set are created and freed here; the
            // sack copies the set's bitmap in add_excludes.
            unsafe {
                let q = sys::hy_query_create(self.ptr);
                let rc_name = sys::hy_query_filter(
                    q,
                    sys::HY_PKG_NAME as c_int,
                    sys::HY_GLOB as c_int,
                    c.as_ptr(),
                );
                let rc_repo = sys::hy_query_filter(
                    q,
                    sys::HY_PKG_REPONAME as c_int,
                    sys::HY_NEQ as c_int,
                    sys::HY_SYSTEM_REPO_NAME.as_ptr().cast(),
                );
                if rc_name != 0 || rc_repo != 0 {
                    sys::hy_query_free(q);
                    return Err(Error::Libdnf {
                        op: format!("excluding {pat}"),
                        code: Some(rc_name.max(rc_repo)),
                        message: "libdnf rejected the exclude query".into(),
                    });
                }
                let set = sys::hy_query_run_set(q);
                sys::hy_query_free(q);
                if !set.is_null() {
                    sys::dnf_sack_add_excludes(self.ptr, set);
                    sys::dnf_packageset_free(set);
                }
            }
        }
        Ok(())
    }

    /// Adds a local `.rpm` to the `@commandline` repository.
    pub(crate) fn add_cmdline_package(
        &self,
        path: &Path,
    ) -> Result<Object<sys::DnfPackage>, Error> {
        let c = path_cstring(path, "local rpm path")?;
        if self.ptr.is_null() {
            return Err(Error::BadLocalRpm {
                path: path.to_path_buf(),
            });
        }
        // SAFETY: a live sack (checked non-null); returns a new reference or
        // NULL when the file is unreadable.
        unsafe { Object::from_full(sys::dnf_sack_add_cmdline_package(self.ptr, c.as_ptr())) }
            .ok_or_else(|| Error::BadLocalRpm {
                path: path.to_path_buf(),
            })
    }
}

/// The context's `HyGoal`, borrowed.
pub(crate) struct Goal<'a> {
    ptr: sys::HyGoal,
    _ctx: PhantomData<&'a Context>,
}

/// Which of a solved goal's package lists to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoalList {
    /// Packages the transaction will install (installs, upgrades, downgrades,
    /// reinstalls).
    Incoming,
    /// Installed packages the transaction removes (erasures, obsoleted).
    Outgoing,
}

impl<'a> Goal<'a> {
    pub(crate) fn install_package(&self, pkg: &Object<sys::DnfPackage>) -> Result<(), Error> {
        // SAFETY: valid goal and package; the goal records the solvable id.
        let rc = unsafe { sys::hy_goal_install(self.ptr, pkg.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Libdnf {
                op: "adding local package to the goal".into(),
                code: None,
                message: format!("hy_goal_install returned {rc}"),
            })
        }
    }

    /// Number of install/remove requests in the goal.
    pub(crate) fn request_count(&self) -> i32 {
        // SAFETY: valid goal.
        unsafe { sys::hy_goal_req_length(self.ptr) }
    }

    /// `dnf_goal_depsolve` with `flags` (a `DnfGoalActions` bitmask).
    pub(crate) fn depsolve(&self, flags: sys::DnfGoalActions) -> Result<(), GErr> {
        // SAFETY: valid goal.
        gcall(|e| unsafe { sys::dnf_goal_depsolve(self.ptr, flags, e) })
    }

    pub(crate) fn packages(&self, which: GoalList) -> PackageList<'a> {
        use sys::*;
        // SAFETY: variadic list of DnfPackageInfo terminated by -1 (read by
        // libdnf as gint); returns a new array owning refs to its packages.
        let arr = unsafe {
            match which {
                GoalList::Incoming => dnf_goal_get_packages(
                    self.ptr,
                    DNF_PACKAGE_INFO_INSTALL as c_int,
                    DNF_PACKAGE_INFO_REINSTALL as c_int,
                    DNF_PACKAGE_INFO_DOWNGRADE as c_int,
                    DNF_PACKAGE_INFO_UPDATE as c_int,
                    -1 as c_int,
                ),
                GoalList::Outgoing => dnf_goal_get_packages(
                    self.ptr,
                    DNF_PACKAGE_INFO_REMOVE as c_int,
                    DNF_PACKAGE_INFO_OBSOLETE as c_int,
                    -1 as c_int,
                ),
            }
        };
        PackageList {
            arr: NonNull::new(arr),
            _ctx: PhantomData,
        }
    }
}

/// A `GPtrArray` of `DnfPackage`s that owns its references.
pub(crate) struct PackageList<'a> {
    arr: Option<NonNull<sys::GPtrArray>>,
    _ctx: PhantomData<&'a Context>,
}

impl PackageList<'_> {
    pub(crate) fn len(&self) -> usize {
        // SAFETY: valid array.
        self.arr.map_or(0, |a| unsafe { a.as_ref().len as usize })
    }

    /// Package `i`; panics (never reads past the array) when `i` is not
    /// below [`PackageList::len`].
    fn get(&self, i: usize) -> *mut sys::DnfPackage {
        let len = self.len();
        assert!(i < len, "package index {i} out of {len}");
        let a = self.arr.expect("a non-empty list has an array");
        // SAFETY: `i < len`, checked above.
        unsafe { *a.as_ref().pdata.add(i) as *mut sys::DnfPackage }
    }

    fn as_ptr(&self) -> *mut sys::GPtrArray {
        self.arr.map_or(ptr::null_mut(), |a| a.as_ptr())
    }

    /// Whether package `i` ships the file `path` (as its repodata lists
    /// it: every file for libdnf's file lists, `/usr/bin` and `/etc` ones
    /// at least).
    pub(crate) fn has_file(&self, i: usize, path: &str) -> bool {
        let p = self.get(i);
        // SAFETY: `p` is a live DnfPackage; the returned NULL-terminated
        // array and its strings are the caller's, freed here.
        unsafe {
            let files = sys::dnf_package_get_files(p);
            if files.is_null() {
                return false;
            }
            let mut found = false;
            let mut at = files;
            while !(*at).is_null() {
                if CStr::from_ptr(*at).to_bytes() == path.as_bytes() {
                    found = true;
                    break;
                }
                at = at.add(1);
            }
            sys::g_strfreev(files);
            found
        }
    }

    /// Where libdnf reads package `i`'s file from, once
    /// [`Transaction::ensure_repos`] attached it to its repository: the
    /// repository, and the package's location there. `None` for a package
    /// with no repository (a local file) or with a base URL of its own
    /// (its file is not found through the repository's paths).
    pub(crate) fn source(&self, i: usize) -> Option<(Repo<'_>, String)> {
        let p = self.get(i);
        // SAFETY: live package; the repository is owned by the context,
        // which outlives the list; borrowed strings are copied.
        unsafe {
            let repo = NonNull::new(sys::dnf_package_get_repo(p))?;
            if !sys::dnf_package_get_baseurl(p).is_null() {
                return None;
            }
            let location = opt_string(sys::dnf_package_get_location(p))?;
            Some((
                Repo {
                    ptr: repo,
                    _list: PhantomData,
                },
                location,
            ))
        }
    }

    /// Reads package `i`'s metadata.
    pub(crate) fn package(&self, i: usize) -> Package {
        let p = self.get(i);
        // SAFETY: `p` is a live DnfPackage owned by the array; every getter
        // returns a borrowed string or a number, except hy_chksum_str whose
        // g_malloc'd result is freed here.
        unsafe {
            let s = |f: unsafe extern "C" fn(*mut sys::DnfPackage) -> *const c_char| {
                opt_string(f(p)).unwrap_or_default()
            };
            let mut ctype: c_int = 0;
            let raw = sys::dnf_package_get_chksum(p, &mut ctype);
            let checksum = if raw.is_null() {
                None
            } else {
                let hex = sys::hy_chksum_str(raw, ctype);
                let kind = opt_string(sys::hy_chksum_name(ctype));
                let out = match (kind, opt_string(hex)) {
                    (Some(kind), Some(hex)) => Some(Checksum { kind, hex }),
                    _ => None,
                };
                sys::g_free(hex.cast());
                out
            };
            let source_rpm = opt_string(sys::dnf_package_get_sourcerpm(p));
            Package {
                name: s(sys::dnf_package_get_name),
                epoch: sys::dnf_package_get_epoch(p),
                version: s(sys::dnf_package_get_version),
                release: s(sys::dnf_package_get_release),
                arch: s(sys::dnf_package_get_arch),
                nevra: s(sys::dnf_package_get_nevra),
                repo_id: s(sys::dnf_package_get_reponame),
                checksum,
                download_size: sys::dnf_package_get_downloadsize(p),
                install_size: sys::dnf_package_get_installsize(p),
                source_rpm,
                build_time: sys::dnf_package_get_buildtime(p),
                location: s(sys::dnf_package_get_location),
                local_path: None,
            }
        }
    }

    /// Where package `i`'s file is (local repo) or will be (remote repo,
    /// under the cache dir); known once `Transaction::ensure_repos` ran.
    pub(crate) fn file_name(&self, i: usize) -> Option<PathBuf> {
        let p = self.get(i);
        // SAFETY: live package; borrowed string copied.
        unsafe { opt_string(sys::dnf_package_get_filename(p)) }.map(PathBuf::from)
    }

    /// NEVRAs of the installed packages that package `i` replaces (older
    /// versions it upgrades or downgrades, packages it obsoletes).
    pub(crate) fn replaced_by(&self, goal: &Goal<'_>, i: usize) -> Vec<String> {
        let p = self.get(i);
        // SAFETY: live goal and package; the returned array owns refs to its
        // packages and is unreffed here.
        unsafe {
            let arr = sys::hy_goal_list_obsoleted_by_package(goal.ptr, p);
            let list = PackageList {
                arr: NonNull::new(arr),
                _ctx: PhantomData,
            };
            (0..list.len())
                .filter_map(|j| opt_string(sys::dnf_package_get_nevra(list.get(j))))
                .collect()
        }
    }

    /// The paths package `i` contains (from the filelists metadata).
    pub(crate) fn files(&self, i: usize) -> Vec<String> {
        let p = self.get(i);
        let mut out = Vec::new();
        // SAFETY: live package; the NULL-terminated array is ours to free.
        unsafe {
            let arr = sys::dnf_package_get_files(p);
            if arr.is_null() {
                return out;
            }
            let mut cur = arr;
            while !(*cur).is_null() {
                if let Some(f) = opt_string(*cur) {
                    out.push(f);
                }
                cur = cur.add(1);
            }
            sys::g_strfreev(arr);
        }
        out
    }

    /// `dnf_package_check_filename`: whether package `i`'s file exists and
    /// matches the repodata checksum.
    pub(crate) fn check_file(&self, i: usize) -> Result<bool, Error> {
        let p = self.get(i);
        let mut valid: sys::gboolean = 0;
        // SAFETY: live package; `valid` outlives the call.
        gcall(|e| unsafe { sys::dnf_package_check_filename(p, &mut valid, e) })
            .map_err(|e| e.into_error("checking downloaded package"))?;
        Ok(valid != 0)
    }
}

impl Drop for PackageList<'_> {
    fn drop(&mut self) {
        if let Some(a) = self.arr {
            // SAFETY: we own the array reference.
            unsafe { sys::g_ptr_array_unref(a.as_ptr()) }
        }
    }
}

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

    fn ptr(&self) -> *mut sys::DnfState {
        self.obj.as_ptr()
    }
}

/// A repository's location and packages directory.
pub(crate) type RepoPaths = (Option<String>, Option<String>);

/// A repository of the context, borrowed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Repo<'a> {
    ptr: NonNull<sys::DnfRepo>,
    _list: PhantomData<&'a ()>,
}

impl Repo<'_> {
    /// Whether its packages are read in place (`file://`, media) rather
    /// than downloaded into its packages directory.
    pub(crate) fn is_local(self) -> bool {
        // SAFETY: live repository.
        unsafe { sys::dnf_repo_is_local(self.ptr.as_ptr()) != 0 }
    }

    /// Its location and its packages directory.
    pub(crate) fn paths(self) -> RepoPaths {
        // SAFETY: live repository; borrowed strings copied.
        unsafe {
            (
                opt_string(sys::dnf_repo_get_location(self.ptr.as_ptr())),
                opt_string(sys::dnf_repo_get_packages(self.ptr.as_ptr())),
            )
        }
    }

    /// Sets where libdnf finds its package files from now on: the location
    /// (a local repository's files are `location/<href>`) or the packages
    /// directory (a remote one's are `packages/<basename>`). Setting the
    /// location also moves the packages directory, so the packages
    /// directory is set after it.
    pub(crate) fn set_paths(
        self,
        location: Option<&str>,
        packages: Option<&str>,
    ) -> Result<(), Error> {
        let c = |s: &str| {
            CString::new(s)
                .map_err(|_| Error::InvalidOptions(format!("a path with a NUL byte: {s:?}")))
        };
        // SAFETY: live repository; libdnf copies the strings.
        unsafe {
            if let Some(l) = location {
                sys::dnf_repo_set_location(self.ptr.as_ptr(), c(l)?.as_ptr());
            }
            if let Some(p) = packages {
                sys::dnf_repo_set_packages(self.ptr.as_ptr(), c(p)?.as_ptr());
            }
        }
        Ok(())
    }
}

/// A `DnfTransaction`, created by us rather than the context's cached one, so
/// that each depsolve starts from a clean rpm transaction set.
pub(crate) struct Transaction<'a> {
    obj: Object<sys::DnfTransaction>,
    _ctx: PhantomData<&'a Context>,
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
struct RpmLogCapture {
    /// The file, and the log file rpm had before.
    file: Option<(RpmFile, *mut sys::FILE)>,
}

impl RpmLogCapture {
    fn start() -> RpmLogCapture {
        let file = RpmFile::new().map(|f| {
            // SAFETY: the stream stays open until `finish` puts the
            // previous log file back.
            let previous = unsafe { sys::rpmlogSetFile(f.stream.as_ptr()) };
            (f, previous)
        });
        RpmLogCapture { file }
    }

    fn finish(self) {
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
