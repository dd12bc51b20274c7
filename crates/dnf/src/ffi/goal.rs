//! The context's goal (what to install) and what it resolves to: lists of
//! packages, each read into an owned [`Package`], and the repositories
//! their files come from.
//!
//! Why it exists: a solved goal hands out glib pointer arrays of
//! `DnfPackage`s; this module owns those arrays and copies what the crate
//! needs out of them, never handing a raw package pointer on.
//!
//! What it must not do: run the transaction (`transaction.rs`) or judge the
//! packages (policy, signatures: `dnf.rs`).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::ptr::{self, NonNull};

use strata_libdnf_sys as sys;

use super::glib::{gcall, opt_string, GErr, Object};
use crate::error::Error;
use crate::package::{Checksum, Package};

/// The context's `HyGoal`, borrowed.
pub(crate) struct Goal<'a> {
    pub(super) ptr: sys::HyGoal,
    pub(super) _ctx: PhantomData<&'a sys::DnfContext>,
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
    _ctx: PhantomData<&'a sys::DnfContext>,
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

    pub(super) fn as_ptr(&self) -> *mut sys::GPtrArray {
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
    /// `Transaction::ensure_repos` attached it to its repository: the
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
