//! The targeted policy's module store, made by the real `semodule`.
//!
//! RHEL's selinux-policy-targeted installs a prebuilt module store under
//! `/var/lib/selinux/targeted` (image builds move it to `/etc/selinux`).
//! The fixture's is built when the fixture is generated: Debian's
//! semodule and its libraries, unpacked from the package cache and run
//! with the machine's loader (Debian 12, the same glibc), install
//! `files/selinux-base.cil` into a scratch root. What ships is what RHEL's
//! package has: the store's `active` directory (its lock files are
//! run-time state) and the policy built from it in `/etc/selinux/targeted`
//! (the kernel policy, file contexts, text and compiled, and seusers).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::debian::DebCache;
use crate::spec::FileSpec;

/// Where RHEL's package has the store.
pub const STORE: &str = "/var/lib/selinux/targeted";
/// Where the policy the store builds goes.
pub const POLICY: &str = "/etc/selinux/targeted";

/// What semodule needs to run, by Debian package.
const TOOLS: &[&str] = &[
    "policycoreutils",
    "selinux-utils",
    "libsemanage2",
    "libsepol2",
    "libselinux1",
    "libaudit1",
    "libcap-ng0",
    "libbz2-1.0",
    "libpcre2-8-0",
];

/// The store's files, at [`STORE`]`/active/…`, and the policy built from
/// it, at [`POLICY`]`/…`.
pub fn module_store(debs: &DebCache) -> Result<Vec<FileSpec>> {
    let scratch = tempfile::tempdir()?;
    let tools = scratch.path().join("tools");
    debs.unpack_into(TOOLS, &tools)?;
    let root = scratch.path().join("root");
    std::fs::create_dir_all(root.join("var/lib/selinux"))?;
    std::fs::create_dir_all(root.join("etc/selinux/targeted"))?;
    // The file-context check and compiler: the unpacked ones.
    std::fs::write(
        root.join("etc/selinux/semanage.conf"),
        format!(
            "module-store = direct\n[setfiles]\npath = {}\nargs = -q -c $@ $<\n[end]\n\
             [sefcontext_compile]\npath = {}\nargs = $@\n[end]\n",
            tools.join("sbin/setfiles").display(),
            tools.join("usr/sbin/sefcontext_compile").display()
        ),
    )?;
    let cil = scratch.path().join("base.cil");
    std::fs::write(&cil, include_bytes!("../files/selinux-base.cil"))?;
    strata_process::run(
        Command::new(tools.join("usr/sbin/semodule"))
            .env(
                "LD_LIBRARY_PATH",
                format!(
                    "{}:{}",
                    tools.join("lib/x86_64-linux-gnu").display(),
                    tools.join("usr/lib/x86_64-linux-gnu").display()
                ),
            )
            .arg("-p")
            .arg(&root)
            .args(["-s", "targeted", "-N", "-i"])
            .arg(&cil),
    )
    .context("building the targeted policy's module store with semodule")?;
    let active = root.join("var/lib/selinux/targeted/active");
    let mut out = vec![
        FileSpec::dir(STORE, 0o700),
        FileSpec::dir(&format!("{STORE}/active"), 0o700),
    ];
    collect(&active, &format!("{STORE}/active"), &mut out)?;
    out.push(FileSpec::dir(POLICY, 0o755));
    collect(&root.join("etc/selinux/targeted"), POLICY, &mut out)?;
    Ok(out)
}

/// The tree under `dir` as file specs at `at`, sorted.
fn collect(dir: &Path, at: &str, out: &mut Vec<FileSpec>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = format!("{at}/{}", e.file_name().to_string_lossy());
        let meta = e.metadata()?;
        let mode = (meta.permissions().mode() & 0o7777) as u16;
        if meta.is_dir() {
            out.push(FileSpec::dir(&name, mode));
            collect(&path, &name, out)?;
        } else {
            out.push(FileSpec::file(&name, std::fs::read(&path)?, mode));
        }
    }
    Ok(())
}
