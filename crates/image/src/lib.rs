//! `strata-image`: builds strata's own container image (`make image`).
//!
//! A Debian 12 userland made by mmdebstrap from Debian's packages (the
//! programs strata runs, as `ci/install-deps` installs them, and the
//! packages of the libraries the strata binary links), the binary on top
//! without its DWARF, written with strata's own OCI code
//! ([`strata_oscontainer::write_image`]: deterministic tar and gzip, the
//! config's entrypoint, environment and labels) into `OUT/oci` (tag
//! `strata`) and as an OCI archive `OUT/strata.ociarchive`. It prints what
//! it wrote as one JSON object on stdout.
//!
//! Nothing here reads the clock: every time in the image is
//! SOURCE_DATE_EPOCH (default: the time of the checkout's commit), and
//! mmdebstrap honours the same variable, so the same commit and the same
//! Debian archive give the same image. `--reuse-rootfs` writes the image
//! again from the userland already built.
//!
//! It is a build tool of this repository, not a `strata` command. It needs
//! root: mmdebstrap's root mode keeps the userland's owners.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};
use clap::Parser;
use strata_oscontainer::{DerivedLayer, ImageOptions, ImageRef};

mod apt;
mod userland;

/// The command line, as parsed.
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(
    name = "strata-image",
    about = "Builds strata's own OCI image: a Debian 12 userland and the strata binary"
)]
pub struct Args {
    /// Where the userland, the layout and the archive are written.
    #[arg(long, env = "STRATA_IMAGE_DIR", default_value = "target/image")]
    pub out: PathBuf,
    /// The directory holding the release `strata` binary.
    #[arg(long, env = "STRATA_IMAGE_BIN", default_value = "target/release")]
    pub bin: PathBuf,
    /// Debian's archive (default: the one the machine's apt sources name
    /// for bookworm, else deb.debian.org).
    #[arg(long, env = "STRATA_IMAGE_MIRROR")]
    pub mirror: Option<String>,
    /// Debian's security archive (default: as for `--mirror`, for
    /// bookworm-security).
    #[arg(long, env = "STRATA_IMAGE_SECURITY_MIRROR")]
    pub security_mirror: Option<String>,
    /// The image's one time (default: the checkout's commit time).
    #[arg(long, env = "SOURCE_DATE_EPOCH")]
    pub source_date_epoch: Option<u64>,
    /// Write the image again from the userland already in OUT/rootfs.
    #[arg(long)]
    pub reuse_rootfs: bool,
}

/// Parses `argv`, builds the userland (unless reused), writes the image
/// and the archive, prints what was written as JSON.
pub fn run(argv: impl IntoIterator<Item = OsString>) -> Result<()> {
    let args = Args::try_parse_from(argv)?;
    ensure!(
        rustix::process::geteuid().is_root(),
        "needs root (mmdebstrap's root mode keeps the userland's owners)"
    );
    for tool in ["mmdebstrap", "objcopy", "ldd", "dpkg", "git"] {
        userland::require_tool(tool)?;
    }
    let strata = args.bin.join("strata");
    ensure!(
        strata.is_file(),
        "{} not found: cargo build --release -p strata-cli",
        strata.display()
    );
    let epoch = match args.source_date_epoch {
        Some(t) => t,
        None => git(&["log", "-1", "--format=%ct"])?
            .parse()
            .context("reading the commit's time")?,
    };
    let rootfs = args.out.join("rootfs");
    let done = args.out.join("rootfs.done");
    if !args.reuse_rootfs {
        let mirrors =
            apt::Mirrors::of_machine(args.mirror.as_deref(), args.security_mirror.as_deref())?;
        userland::build(&rootfs, &done, &strata, &mirrors, epoch)?;
    }
    ensure!(
        done.exists(),
        "no userland in {} to reuse: run without --reuse-rootfs",
        rootfs.display()
    );
    let written = write(&args.out, &rootfs, &strata, epoch)?;
    println!("{written}");
    Ok(())
}

/// Writes the image from the userland and the binary: `OUT/oci` (tag
/// `strata`) and `OUT/strata.ociarchive`.
fn write(out: &Path, rootfs: &Path, strata: &Path, epoch: u64) -> Result<serde_json::Value> {
    let (oci, layer, archive) = (
        out.join("oci"),
        out.join("strata-layer"),
        out.join("strata.ociarchive"),
    );
    for old in [&oci, &layer] {
        if old.exists() {
            std::fs::remove_dir_all(old).with_context(|| format!("removing {}", old.display()))?;
        }
    }
    // Without its DWARF (120 of its 140 MB); symbols stay, for backtraces.
    let bin = layer.join("usr/bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    let staged = bin.join("strata");
    userland::run(
        Command::new("objcopy")
            .arg("--strip-debug")
            .arg(strata)
            .arg(&staged),
    )?;
    let version = userland::output(Command::new(strata).arg("--version"))?;
    let version = version
        .split_whitespace()
        .nth(1)
        .with_context(|| format!("{} --version printed {version:?}", strata.display()))?
        .to_owned();
    let opts = options(
        &version,
        &git(&["describe", "--always", "--dirty", "--abbrev=40"])?,
        epoch,
    );
    let layers = [
        DerivedLayer::new(rootfs, "debian 12 userland (mmdebstrap)"),
        DerivedLayer::new(&layer, &format!("strata {version}")),
    ];
    let written = strata_oscontainer::write_image(&oci, "strata", &layers, &opts)
        .with_context(|| format!("writing the image into {}", oci.display()))?;
    let mut out = serde_json::to_value(&written)?;
    let archived =
        strata_oscontainer::write_oci_archive(&ImageRef::oci(&oci, "strata"), &archive, epoch)
            .with_context(|| format!("writing the archive {}", archive.display()))?;
    out["archive"] = serde_json::json!({ "path": archive, "archive": archived });
    Ok(out)
}

/// What a runtime starts the image with, and its labels.
fn options(version: &str, revision: &str, epoch: u64) -> ImageOptions {
    let mut opts = ImageOptions::default();
    opts.entrypoint = vec!["/usr/bin/strata".into()];
    opts.working_dir = Some("/".into());
    opts.env = vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()];
    for (k, v) in [
        ("org.opencontainers.image.title", "strata"),
        ("org.opencontainers.image.version", version),
        ("org.opencontainers.image.revision", revision),
    ] {
        opts.labels.insert(k.into(), v.into());
    }
    opts.source_date_epoch = epoch;
    opts
}

/// One line git prints about the checkout.
fn git(args: &[&str]) -> Result<String> {
    userland::output(Command::new("git").args(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_defaults_and_the_options() {
        let a =
            Args::try_parse_from(["strata-image", "--reuse-rootfs", "--source-date-epoch", "7"])
                .unwrap();
        assert_eq!(a.source_date_epoch, Some(7));
        assert!(a.reuse_rootfs);
        assert!(Args::try_parse_from(["strata-image", "--source-date-epoch", "x"]).is_err());
    }

    #[test]
    fn the_config_starts_strata_with_the_labels() {
        let o = options("0.1.0", "abc", 7);
        assert_eq!(o.entrypoint, ["/usr/bin/strata"]);
        assert_eq!(o.labels["org.opencontainers.image.version"], "0.1.0");
        assert_eq!(o.labels["org.opencontainers.image.revision"], "abc");
        assert_eq!(o.source_date_epoch, 7);
    }
}
