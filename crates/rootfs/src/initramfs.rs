//! The initramfs: how compose makes it, how a base commit records the way
//! it was made, and what a layer must change for derive to make it again.
//!
//! compose runs the generator the base manifest names inside the tree; it
//! records the generator and its arguments in the base commit's metadata
//! (the arguments under rpm-ostree's own key, `rpmostree.initramfs-args`,
//! which rpm-ostree reads when it regenerates an initramfs on a node). A
//! derived layer that changes what the generator reads (dracut's modules
//! and configuration, kernel modules, firmware) gets a new initramfs made
//! the same way, in the same sandbox, from the same recorded settings.
//!
//! Must not: decide whether a layer wants a new initramfs for any reason
//! other than its own files (the release manifest's `regenerate-initramfs`
//! is derive's business), or run anything outside [`crate::sandbox`].

use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::initramfs_cache::{self, Cache};
pub use crate::invocation::{image_path, Invocation};
use crate::sandbox;

/// Commit metadata key: the generator's arguments, as rpm-ostree records
/// them (`as`).
pub use strata_oscontainer::commit_meta::INITRAMFS_ARGS as ARGS_KEY;
/// Commit metadata key: the generator's name (`dracut`).
pub use strata_oscontainer::commit_meta::INITRAMFS_GENERATOR as GENERATOR_KEY;
pub use strata_oscontainer::commit_meta::{InitramfsArg, RecordedInitramfs};

/// How an initramfs is made: the base manifest's `initramfs` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generator {
    /// A program in `/usr/bin` of the tree (`dracut`).
    pub name: String,
    /// Its arguments, checked where they were read (a manifest, a
    /// commit's metadata).
    pub args: Vec<InitramfsArg>,
}

impl Generator {
    /// The manifest's settings; its arguments checked.
    pub fn from_manifest(settings: &strata_manifest::Initramfs) -> Result<Self> {
        Ok(Self {
            name: settings.generator.clone(),
            args: InitramfsArg::all("manifest initramfs.args", &settings.args)?,
        })
    }

    /// The generator a base commit records, when it is one strata runs
    /// (one a manifest could name).
    pub fn recorded(recorded: &RecordedInitramfs) -> Option<Self> {
        let name = recorded.generator.as_ref()?;
        strata_manifest::Initramfs::is_known_generator(name).then(|| Self {
            name: name.clone(),
            args: recorded.args.clone(),
        })
    }

    /// The command line, run with the tree as `/`:
    /// `/usr/bin/<name> <args...> --kver <kver> -f /usr/lib/modules/<kver>/initramfs.img`.
    pub fn argv(&self, kver: &str) -> Vec<String> {
        let mut argv = vec![format!("/usr/bin/{}", self.name)];
        argv.extend(self.args.iter().map(|a| a.as_str().to_string()));
        argv.extend([
            "--kver".to_string(),
            kver.to_string(),
            "-f".to_string(),
            format!("/{}", image_path(kver)),
        ]);
        argv
    }

    /// Makes the initramfs `call` (from [`Self::invocation`] on the same
    /// tree and layout) says in the tree at `root` (laid out as `layout`
    /// says), in the sandbox, with `SOURCE_DATE_EPOCH` set: the same tree
    /// and epoch give the same bytes. With a `cache`, an image made before
    /// from the same inputs is copied into place instead, and a new one is
    /// recorded there (see [`crate::initramfs_cache`]).
    pub fn run(
        &self,
        root: &Path,
        layout: &sandbox::Layout,
        call: &Invocation,
        source_date_epoch: u64,
        cache: Option<&Cache>,
    ) -> Result<Made> {
        let kver = call.kver.as_str();
        // The device nodes are appended by strata, the same whether root
        // runs it or not: in a user namespace mknod is refused, and dracut
        // would leave them out.
        let env = [("DRACUT_NO_MKNOD", "1")];
        let image = root.join(image_path(kver));
        let Some(cache) = cache else {
            sandbox::run_in_tree(root, layout, source_date_epoch, &env, &call.argv)
                .map_err(|e| self.failed(e, root, layout))?;
            self.finish_image(call, &image, source_date_epoch)?;
            return Ok(Made::Generated(None));
        };
        let run = initramfs_cache::Run {
            generator: &self.name,
            call,
            source_date_epoch,
            layout,
            env: &env,
        };
        let started = std::time::Instant::now();
        let list = || {
            initramfs_cache::Names::of(root, &image)
                .context("listing the tree's names for the initramfs cache")
        };
        // Without an entry for this key (a new kernel, say) the lookup
        // misses whatever the tree's names are: they are listed while the
        // generator runs, on the core it leaves idle (it writes only its
        // output and its scratch space, which the list leaves out).
        let listed = if cache.knows(&run) {
            let names = list()?;
            match cache.lookup(&run, root, &names)? {
                initramfs_cache::Lookup::Hit => {
                    tracing::debug!(elapsed = ?started.elapsed(), "initramfs cache: reused the image made from the same inputs");
                    return Ok(Made::Reused);
                }
                initramfs_cache::Lookup::Miss(why) => Some((names, why)),
            }
        } else {
            None
        };
        let why = listed
            .as_ref()
            .map_or(initramfs_cache::NO_ENTRY, |(_, why)| why.as_str())
            .to_string();
        tracing::debug!(elapsed = ?started.elapsed(), "initramfs cache: miss: {why}");
        cache.ensure_dir()?;
        let program = crate::opened::Program {
            root,
            layout,
            source_date_epoch,
            env: &env,
            argv: &call.argv,
        };
        let (opened, names) = std::thread::scope(|s| {
            let listing = listed.is_none().then(|| s.spawn(list));
            let opened = crate::opened::run(&program, cache.dir());
            let names = match (listed, listing) {
                (Some((names, _)), _) => Ok(names),
                (None, Some(listing)) => listing
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("listing the tree's names panicked"))),
                (None, None) => unreachable!("listed now or before"),
            };
            (opened, names)
        });
        let opened = opened.map_err(|e| self.failed(e, root, layout))?;
        let names = names?;
        tracing::debug!(elapsed = ?started.elapsed(), "initramfs: {} ran", self.name);
        self.finish_image(call, &image, source_date_epoch)?;
        tracing::debug!(elapsed = ?started.elapsed(), "initramfs: the image is complete");
        let recorded = opened.and_then(|read| cache.record(&run, root, &names, &read));
        if let Err(e) = recorded {
            tracing::warn!("the initramfs is not cached: {e:#}");
        }
        Ok(Made::Generated(Some(why)))
    }

    /// The generator's failure `e` on the tree at `root`, as its user
    /// needs it: when it ran out of space, one line naming the filesystem
    /// that is full (the one holding the path its stderr names, mapped
    /// from the sandbox to the host; else the tree's), not the sandbox's
    /// command line; otherwise `e` as it is.
    fn failed(&self, e: anyhow::Error, root: &Path, layout: &sandbox::Layout) -> anyhow::Error {
        let what = format!("generating the initramfs with {}", self.name);
        let Some(line) = e
            .chain()
            .find_map(|c| c.downcast_ref::<strata_process::Error>())
            .and_then(|pe| pe.no_space_line())
        else {
            return e.context(what);
        };
        // A path of the tree is resolved inside it: the tree's symlinks
        // (an absolute one too) do not lead to a host filesystem.
        let full = match path_named_in(line) {
            Some(p) => match layout.host_path(root, &p) {
                Some(host) => match host.strip_prefix(root) {
                    Ok(rel) => strata_process::filesystem_in(root, rel),
                    // A file strata bound in itself (os-release).
                    Err(_) => strata_process::filesystem_of(&host),
                },
                None => format!(
                    "{} (in the sandbox, not the tree)",
                    strata_process::text::shown(&p)
                ),
            },
            None => strata_process::filesystem_in(root, Path::new("")),
        };
        tracing::debug!("{what}: {e:#}");
        anyhow::anyhow!("{what}: no space left on {full}")
    }

    /// How the generator is called on the tree at `root` for kernel
    /// `kver`: [`Self::argv`], and `--no-compress` when strata compresses
    /// the image itself ([`Self::strata_compresses`]).
    pub fn invocation(&self, root: &Path, layout: &sandbox::Layout, kver: &str) -> Invocation {
        let mut argv = self.argv(kver);
        let gzip = self.strata_compresses(root, layout).then_some(GZIP_LEVEL);
        if gzip.is_some() {
            argv.insert(1 + self.args.len(), NO_COMPRESS.to_string());
        }
        Invocation {
            argv,
            kver: kver.to_string(),
            gzip,
        }
    }

    /// Whether dracut would compress the image with gzip of its own accord,
    /// so strata may compress it instead, on every core: the generator is
    /// dracut; neither its arguments nor its configuration in the tree
    /// (`/etc/dracut.conf`, `/etc/dracut.conf.d`,
    /// `/usr/lib/dracut/dracut.conf.d`) say anything of compression, a
    /// squashed image, a UEFI executable or another configuration; and the
    /// tree has pigz or gzip, the first compressors dracut looks for. dracut
    /// at `-9` on one core is most of its run (11 s of 14 at RHCOS size).
    fn strata_compresses(&self, root: &Path, layout: &sandbox::Layout) -> bool {
        const WORDS: &[&str] = &["compress", "squash", "uefi"];
        const OPTIONS: &[&str] = &[
            "--gzip",
            "--bzip2",
            "--lzma",
            "--xz",
            "--lzo",
            "--lz4",
            "--zstd",
            "--conf",
            "--confdir",
            "-c",
            "--kernel-image",
            "--rebuild",
        ];
        if self.name != "dracut"
            || self.args.iter().map(InitramfsArg::as_str).any(|a| {
                WORDS.iter().any(|w| a.contains(w))
                    || OPTIONS
                        .iter()
                        .any(|o| a == *o || a.starts_with(&format!("{o}=")))
            })
        {
            return false;
        }
        // A configuration strata cannot read may say anything.
        let Some(confs) = dracut_configuration(root, layout) else {
            return false;
        };
        let configured = confs
            .iter()
            .any(|text| WORDS.iter().any(|w| text.contains(w)));
        let has = |p: &str| {
            layout
                .host_path(root, p)
                .is_some_and(|h| sandbox::open_input(root, &h).is_ok())
        };
        !configured
            && ["/usr/bin/pigz", "/usr/bin/gzip", "/bin/gzip"]
                .iter()
                .any(|p| has(p))
    }

    /// What strata adds to the generator's image: gzip when it compresses
    /// it, then the device nodes.
    fn finish_image(&self, call: &Invocation, image: &Path, source_date_epoch: u64) -> Result<()> {
        if let Some(level) = call.gzip {
            let compressed = strata_process::cpio::gzip_main_archive(image, level)
                .with_context(|| format!("compressing {}", image.display()))?;
            if !compressed {
                tracing::debug!(
                    "{} compressed {} itself despite {NO_COMPRESS}",
                    self.name,
                    image.display()
                );
            }
        }
        strata_process::cpio::append_device_nodes(
            image,
            i64::try_from(source_date_epoch).unwrap_or(0),
        )
        .with_context(|| format!("appending device nodes to {}", image.display()))
    }
}

/// The text of each dracut configuration file in the tree at `root`,
/// found as dracut finds it in the sandbox (links resolved inside the
/// tree); `None` when one is not a regular file or cannot be read.
fn dracut_configuration(root: &Path, layout: &sandbox::Layout) -> Option<Vec<String>> {
    use std::io::Read;
    let read = |host: &Path| -> Option<Option<String>> {
        let mut f = match sandbox::open_input(root, host) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(None),
            Err(_) => return None,
        };
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = Vec::new();
        f.read_to_end(&mut text).ok()?;
        Some(Some(String::from_utf8_lossy(&text).into_owned()))
    };
    let mut texts: Vec<String> = read(&layout.host_path(root, "/etc/dracut.conf")?)?
        .into_iter()
        .collect();
    for dir in ["/etc/dracut.conf.d", "/usr/lib/dracut/dracut.conf.d"] {
        let host = layout.host_path(root, dir)?;
        let d = match sandbox::open_input(root, &host) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&d).ok()? {
            let name = entry.ok()?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                names.push(std::ffi::OsString::from_vec(name));
            }
        }
        for name in names {
            texts.extend(read(&host.join(name))?);
        }
    }
    Some(texts)
}

/// dracut's option for an uncompressed image.
const NO_COMPRESS: &str = "--no-compress";

/// The gzip level strata compresses an initramfs at. At RHCOS size (a
/// 44.8 MB archive) zlib-rs level 9 gives the size of dracut's `gzip -9`
/// (15.79 MB) in 2.1 s of one core (its blocks are independent: about
/// half that on two), where `gzip -9` takes 11 s; level 6 would be 2 %
/// larger.
const GZIP_LEVEL: u8 = 9;

/// How the initramfs came to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Made {
    /// The generator ran; with a cache, why it had no image.
    Generated(Option<String>),
    /// The cache had the image the generator would have made.
    Reused,
}

/// The generator's inputs, relative to an ostree tree's root (`/etc` is
/// `usr/etc`): dracut itself, its modules and configuration, kernel
/// modules and firmware. Each is a file or a directory with everything
/// under it.
const INPUTS: &[&str] = &[
    "usr/bin/dracut",
    "usr/lib/dracut",
    "usr/etc/dracut.conf",
    "usr/etc/dracut.conf.d",
    "usr/lib/modules",
    "usr/lib/firmware",
];

/// Whether the generator reads `rel` (relative to the tree's root). The
/// initramfs itself (`usr/lib/modules/<kver>/initramfs.img`) is its
/// output, not an input.
pub fn reads(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    if let ["usr", "lib", "modules", _, "initramfs.img"] = parts.as_slice() {
        return false;
    }
    INPUTS.iter().any(|input| {
        rel == *input
            || rel
                .strip_prefix(input)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// What an overlay's upper dir changes among the generator's inputs, as
/// paths relative to the root, sorted: files and symlinks added or
/// changed (content, target or executable bits against `lower`), entries
/// removed (overlay's whiteouts) and directories that hide the lower one
/// (opaque). Copy-ups that end as they were are no change.
pub fn changed_inputs(upper: &Path, lower: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    walk(upper, upper, lower, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, upper: &Path, lower: &Path, out: &mut Vec<String>) -> Result<()> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for e in rd {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        let path = e.path();
        let rel = path
            .strip_prefix(upper)
            .expect("under upper")
            .to_string_lossy()
            .into_owned();
        let ft = e.file_type()?;
        if ft.is_dir() {
            if reads(&rel) && strata_process::xattr::overlay_opaque(&path)? {
                out.push(rel.clone());
            }
            // Only directories that are inputs or lead to one are entered.
            let leads_to_input = INPUTS
                .iter()
                .any(|input| input.strip_prefix(&rel).is_some_and(|r| r.starts_with('/')));
            if reads(&rel) || leads_to_input {
                walk(&path, upper, lower, out)?;
            }
            continue;
        }
        if !reads(&rel) {
            continue;
        }
        let in_lower = lower.join(&rel);
        let changed = if ft.is_char_device() {
            // A whiteout: the layer removes it.
            true
        } else if ft.is_symlink() {
            fs::read_link(&path)? != fs::read_link(&in_lower).unwrap_or_default()
        } else {
            match fs::symlink_metadata(&in_lower) {
                Ok(m) if m.is_file() => {
                    let mine = e.metadata()?;
                    mine.len() != m.len()
                        || mine.mode() & 0o111 != m.mode() & 0o111
                        || fs::read(&path)? != fs::read(&in_lower)?
                }
                _ => true,
            }
        };
        if changed {
            out.push(rel);
        }
    }
    Ok(())
}

/// The first absolute path a tool's message names (`cp: error writing
/// '/var/tmp/x': …`), without its quotes.
fn path_named_in(line: &str) -> Option<String> {
    line.split_whitespace()
        .map(|w| w.trim_matches(|c: char| "'\"`‘’:,;()".contains(c)))
        .find(|w| w.starts_with('/'))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_generator_reads() {
        let table = [
            ("usr/lib/dracut/modules.d/30ignition/module-setup.sh", true),
            ("usr/lib/dracut/dracut.conf.d/ostree.conf", true),
            ("usr/etc/dracut.conf.d/ignition.conf", true),
            ("usr/etc/dracut.conf", true),
            (
                "usr/lib/modules/6.1.0-57-amd64/kernel/fs/ext4/ext4.ko",
                true,
            ),
            ("usr/lib/modules/6.1.0-57-amd64/modules.dep", true),
            ("usr/lib/modules/6.1.0-57-amd64/vmlinuz", true),
            ("usr/lib/modules/6.1.0-57-amd64/initramfs.img", false),
            ("usr/lib/modules/6.1.0-57-amd64/extra/initramfs.img", true),
            ("usr/lib/firmware/i915/x.bin", true),
            ("usr/bin/dracut", true),
            ("usr/bin/kubelet", false),
            ("usr/etc/dracut.conf.d.rpmnew", false),
            ("usr/lib/dracutx/y", false),
            ("usr/lib/systemd/system/kubelet.service", false),
        ];
        for (rel, want) in table {
            assert_eq!(reads(rel), want, "{rel}");
        }
    }

    #[test]
    fn copy_ups_that_end_unchanged_are_no_change() {
        let t = tempfile::tempdir().unwrap();
        let (upper, lower) = (t.path().join("upper"), t.path().join("lower"));
        let conf = "usr/lib/dracut/dracut.conf.d";
        for d in [&upper, &lower] {
            fs::create_dir_all(d.join(conf)).unwrap();
            fs::create_dir_all(d.join("usr/bin")).unwrap();
        }
        fs::write(lower.join(conf).join("a.conf"), "a").unwrap();
        fs::write(upper.join(conf).join("a.conf"), "a").unwrap();
        fs::write(upper.join("usr/bin/kubelet"), "k").unwrap();
        assert!(changed_inputs(&upper, &lower).unwrap().is_empty());
        fs::write(upper.join(conf).join("a.conf"), "b").unwrap();
        fs::create_dir_all(upper.join("usr/lib/dracut/modules.d/30ignition")).unwrap();
        fs::write(
            upper.join("usr/lib/dracut/modules.d/30ignition/module-setup.sh"),
            "x",
        )
        .unwrap();
        assert_eq!(
            changed_inputs(&upper, &lower).unwrap(),
            [
                "usr/lib/dracut/dracut.conf.d/a.conf",
                "usr/lib/dracut/modules.d/30ignition/module-setup.sh"
            ]
        );
    }

    #[test]
    fn strata_compresses_only_what_dracut_would_gzip() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let layout = sandbox::Layout::default();
        let dracut = |args: &[&str]| Generator {
            name: "dracut".into(),
            args: InitramfsArg::all("test", args).unwrap(),
        };
        let conf_d = root.join("usr/lib/dracut/dracut.conf.d");
        fs::create_dir_all(&conf_d).unwrap();
        fs::write(conf_d.join("ostree.conf"), "reproducible=yes\n").unwrap();
        let g = dracut(&["--no-hostonly"]);
        // No gzip or pigz in the tree: dracut would pick something else.
        assert_eq!(g.invocation(root, &layout, "k").gzip, None);
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::write(root.join("usr/bin/gzip"), "").unwrap();
        let call = g.invocation(root, &layout, "k");
        assert_eq!(call.gzip, Some(GZIP_LEVEL));
        assert_eq!(
            call.argv[..3],
            ["/usr/bin/dracut", "--no-hostonly", NO_COMPRESS]
        );
        // The manifest or the tree chooses: dracut compresses.
        for args in [
            &["--xz"][..],
            &["--compress=lz4"],
            &["--add", "squash"],
            &["-c", "x"],
        ] {
            assert_eq!(
                dracut(args).invocation(root, &layout, "k").gzip,
                None,
                "{args:?}"
            );
        }
        // Links resolve inside the tree, as dracut sees them in the
        // sandbox: a link to a host file is dangling there.
        let elsewhere = tempfile::tempdir().unwrap();
        fs::write(elsewhere.path().join("x.conf"), "compress=xz\n").unwrap();
        let link = conf_d.join("host.conf");
        std::os::unix::fs::symlink(elsewhere.path().join("x.conf"), &link).unwrap();
        assert_eq!(g.invocation(root, &layout, "k").gzip, Some(GZIP_LEVEL));
        fs::remove_file(&link).unwrap();
        // What is not a regular file is no configuration strata can read.
        fs::create_dir(conf_d.join("dir.conf")).unwrap();
        assert_eq!(g.invocation(root, &layout, "k").gzip, None);
        fs::remove_dir(conf_d.join("dir.conf")).unwrap();
        // Nor is a FIFO, which does not block the check.
        rustix::fs::mknodat(
            rustix::fs::CWD,
            conf_d.join("fifo.conf"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert_eq!(g.invocation(root, &layout, "k").gzip, None);
        fs::remove_file(conf_d.join("fifo.conf")).unwrap();
        let etc_conf = root.join("etc/dracut.conf.d");
        fs::create_dir_all(&etc_conf).unwrap();
        fs::write(etc_conf.join("z.conf"), "compress=\"zstd\"\n").unwrap();
        assert_eq!(g.invocation(root, &layout, "k").gzip, None);
        assert_eq!(
            Generator {
                name: "mkinitcpio".into(),
                args: vec![]
            }
            .invocation(root, &layout, "k")
            .gzip,
            None
        );
    }

    /// dracut out of space in its sandbox failed with the sandbox's whole
    /// command line (650 characters) and the cause only in a log line:
    /// the error is one line saying which filesystem is full.
    #[test]
    fn a_generator_out_of_space_says_which_filesystem_once() {
        use std::os::unix::process::ExitStatusExt;
        let root = tempfile::tempdir().unwrap();
        let layout = sandbox::Layout::default();
        let dracut = Generator {
            name: "dracut".into(),
            args: vec![],
        };
        // As dracut says it, about the image in the tree.
        let failed = strata_process::Error::Failed {
            command: format!(
                "bwrap --bind {} / {}",
                root.path().display(),
                "x".repeat(600)
            ),
            status: std::process::ExitStatus::from_raw(256),
            stderr: "dracut: cp: error writing '/usr/lib/modules/5.14.0/initramfs.img': \
                     No space left on device"
                .into(),
        };
        let e = dracut.failed(anyhow::Error::new(failed), root.path(), &layout);
        let text = format!("{e:#}");
        let fs = strata_process::filesystem_of(root.path());
        assert_eq!(
            text,
            format!("generating the initramfs with dracut: no space left on {fs}")
        );
        assert!(!text.contains("bwrap") && !text.contains('\n'), "{text}");
        assert_eq!(text.matches("no space left").count(), 1);

        // A real ENOSPC (writing to /dev/full, which the sandbox makes).
        let real = strata_process::run(std::process::Command::new("dd").args([
            "if=/dev/zero",
            "of=/dev/full",
            "count=1",
        ]))
        .unwrap_err();
        let e = dracut.failed(anyhow::Error::new(real), root.path(), &layout);
        assert_eq!(
            format!("{e:#}"),
            "generating the initramfs with dracut: no space left on /dev/full (in the sandbox, not the tree)"
        );

        // Any other failure keeps its cause.
        let other = strata_process::run(&mut std::process::Command::new("false")).unwrap_err();
        let e = dracut.failed(anyhow::Error::new(other), root.path(), &layout);
        assert!(format!("{e:#}").contains("`false` failed"), "{e:#}");
    }

    /// The path dracut names is the tree's: a tree whose /usr is an
    /// absolute symlink (to /proc/self) named the host's /proc as full,
    /// its path resolved on the host.
    #[test]
    fn out_of_space_in_a_tree_with_an_absolute_symlink_names_the_trees_filesystem() {
        use std::os::unix::process::ExitStatusExt;
        let root = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/proc/self", root.path().join("usr")).unwrap();
        let dracut = Generator {
            name: "dracut".into(),
            args: vec![],
        };
        let failed = strata_process::Error::Failed {
            command: "bwrap".into(),
            status: std::process::ExitStatus::from_raw(256),
            stderr: "dracut: cp: error writing '/usr/lib/modules/5.14.0/initramfs.img': \
                     No space left on device"
                .into(),
        };
        let e = dracut.failed(
            anyhow::Error::new(failed),
            root.path(),
            &sandbox::Layout::default(),
        );
        let text = format!("{e:#}");
        let tree = strata_process::filesystem_of(root.path());
        assert_eq!(
            text,
            format!("generating the initramfs with dracut: no space left on {tree}")
        );
        assert!(!text.contains("/proc"), "{text}");
    }

    #[test]
    fn a_recorded_generator_runs_only_when_strata_knows_it() {
        let recorded = |name: &str| RecordedInitramfs {
            generator: Some(name.into()),
            args: InitramfsArg::all("test", &["--no-hostonly"]).unwrap(),
        };
        let g = Generator::recorded(&recorded("dracut")).unwrap();
        assert_eq!(g.argv("k")[..2], ["/usr/bin/dracut", "--no-hostonly"]);
        assert_eq!(Generator::recorded(&recorded("../../bin/sh")), None);
        assert_eq!(Generator::recorded(&RecordedInitramfs::default()), None);
    }

    #[test]
    fn manifest_initramfs_args_with_control_characters_are_refused() {
        let settings = strata_manifest::Initramfs {
            generator: "dracut".into(),
            args: vec!["--add".into(), "ignition\n--kver".into()],
        };
        let e = Generator::from_manifest(&settings).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.starts_with("manifest initramfs.args "), "{text}");
        assert!(!text.contains('\n'), "{text}");
        let settings = strata_manifest::Initramfs {
            args: vec!["--add".into(), "ignition".into()],
            ..settings
        };
        assert_eq!(
            Generator::from_manifest(&settings).unwrap().argv("k")[..3],
            ["/usr/bin/dracut", "--add", "ignition"]
        );
    }

    #[test]
    fn the_command_line_is_the_documented_one() {
        let g = Generator {
            name: "dracut".into(),
            args: InitramfsArg::all("test", &["--no-hostonly", "--reproducible"]).unwrap(),
        };
        assert_eq!(
            g.argv("6.1.0-57-amd64"),
            [
                "/usr/bin/dracut",
                "--no-hostonly",
                "--reproducible",
                "--kver",
                "6.1.0-57-amd64",
                "-f",
                "/usr/lib/modules/6.1.0-57-amd64/initramfs.img"
            ]
        );
    }
}
