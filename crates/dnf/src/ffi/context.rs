//! The `DnfContext`: its process-global settings, its creation with
//! strata's private paths, repository loading and the sack of packages it
//! loads.
//!
//! Why it exists: the context owns everything else libdnf hands out (the
//! sack, the goal, the repositories); the handles that borrow from it are
//! created here, tied to a shared borrow of the context, and
//! [`Context::setup_sack`] takes `&mut self` so that none outlives the sack
//! it points into.
//!
//! What it must not do: read the host's dnf configuration, or decide which
//! repositories or packages to use (the caller in `dnf.rs` does).

#![allow(unsafe_code)]

use std::ffi::{c_int, CString};
use std::marker::PhantomData;
use std::path::Path;
use std::ptr;

use strata_libdnf_sys as sys;

use super::glib::{cstring, gcall, opt_string, path_cstring, GErr, Object};
use super::goal::Goal;
use super::transaction::{State, Transaction};
use crate::error::Error;

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
