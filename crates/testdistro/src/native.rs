//! The fixture's own native programs: what a RHEL system has and Debian
//! does not package, compiled from `native/` with the machine's C compiler.
//! Reproducible for one compiler version (no build id, no paths, no time),
//! which is why the compiler's version is part of the fixture's cache key.

use std::process::Command;

use anyhow::{Context, Result};

const NSS_ALTFILES: &str = include_str!("../native/nss_altfiles.c");

/// `cc --version`'s first line.
pub fn compiler_version() -> Result<String> {
    strata_process::require("cc")?;
    let out = strata_process::stdout(Command::new("cc").arg("--version"))?;
    Ok(out.lines().next().unwrap_or("").to_string())
}

/// `libnss_altfiles.so.2`: the NSS service `altfiles`.
pub fn nss_altfiles() -> Result<Vec<u8>> {
    let dir = tempfile::tempdir().context("temporary directory for the C compiler")?;
    let src = dir.path().join("nss_altfiles.c");
    let out = dir.path().join("libnss_altfiles.so.2");
    std::fs::write(&src, NSS_ALTFILES)?;
    strata_process::run(
        Command::new("cc")
            .current_dir(dir.path())
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"])
            .args(["-Wl,-soname,libnss_altfiles.so.2", "-Wl,--build-id=none"])
            .args(["-o", "libnss_altfiles.so.2", "nss_altfiles.c"]),
    )?;
    std::fs::read(&out).with_context(|| format!("reading {}", out.display()))
}
