//! The bootloader payload moved where an ostree commit carries it, as
//! RHCOS's compose does with `bootupctl backend generate-update-metadata`.
//!
//! RHEL's shim-x64 and grub2-efi-x64 install into `/boot/efi/EFI/{BOOT,
//! redhat}`, and a commit has no `/boot`: the payload moves to
//! `/usr/lib/bootupd/updates/EFI`, with `EFI.json` beside it naming the
//! packages it came from (bootupd's format: the newest build time of the
//! owning packages, their NEVRAs sorted and joined by commas, and name/EVR
//! pairs), and `BIOS.json` for the package of `grub2-install` when the tree
//! has it. The disk stage copies the payload to the ESP and nodes update it
//! with bootupd. Nothing else under `/boot` may be lost silently: what
//! packages put there is either a copy of what the tree keeps elsewhere
//! (the kernel, its BLS entry, GRUB's environment) or an error naming the
//! file and its package.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use strata_manifest::UtcDateTime;

/// Where bootupd keeps the payload of each component.
pub const UPDATES_DIR: &str = "usr/lib/bootupd/updates";
/// Where RHEL's EFI packages install.
const ESP_EFI: &str = "boot/efi/EFI";
/// The program whose package the BIOS component records.
const GRUB_INSTALL: &str = "usr/sbin/grub2-install";

/// The package that owns a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub nevra: String,
    pub name: String,
    /// `[epoch:]version-release`.
    pub evr: String,
    pub buildtime: i64,
}

/// Answers, for absolute paths as installed, the package owning each
/// (`None`: no package does).
pub type Owners<'a> = &'a dyn Fn(&[String]) -> Result<Vec<Option<Owner>>>;

/// bootupd's `ContentMetadata`: `<component>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentMetadata {
    pub timestamp: String,
    pub version: String,
    pub versions: Vec<ComponentVersion>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentVersion {
    pub name: String,
    pub rpm_evr: String,
}

impl ContentMetadata {
    fn of(owners: &[Owner]) -> ContentMetadata {
        let mut by_nevra: BTreeMap<&str, &Owner> = BTreeMap::new();
        for o in owners {
            by_nevra.insert(&o.nevra, o);
        }
        let newest = by_nevra.values().map(|o| o.buildtime).max().unwrap_or(0);
        ContentMetadata {
            timestamp: UtcDateTime::from_unix_seconds(newest).rfc3339(),
            version: by_nevra.keys().copied().collect::<Vec<_>>().join(","),
            versions: by_nevra
                .values()
                .map(|o| ComponentVersion {
                    // bootupd's component name: the package name up to its
                    // first dash (grub2-efi-x64 -> grub2).
                    name: o.name.split('-').next().unwrap_or(&o.name).to_string(),
                    rpm_evr: o.evr.clone(),
                })
                .collect(),
        }
    }
}

/// What [`generate_update_metadata`] recorded, per component.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    pub efi: Option<ContentMetadata>,
    pub bios: Option<ContentMetadata>,
}

/// Moves `/boot/efi/EFI` of `root` to [`UPDATES_DIR`]`/EFI` with its
/// metadata, writes the BIOS component's, and checks that nothing else
/// under `/boot` needs a place.
pub fn generate_update_metadata(root: &Path, owners: Owners) -> Result<Payload> {
    let updates = root.join(UPDATES_DIR);
    let mut payload = Payload::default();
    let esp = root.join(ESP_EFI);
    if esp.is_dir() && !esp.is_symlink() {
        let files = regular_files(&esp, &format!("/{ESP_EFI}"))?;
        if !files.is_empty() {
            let found = owned(&files, owners)?;
            let target = updates.join("EFI");
            if target.symlink_metadata().is_ok() {
                bail!("the tree has both /{ESP_EFI} and /{UPDATES_DIR}/EFI: one EFI payload only");
            }
            fs::create_dir_all(&updates)?;
            fs::rename(&esp, &target).with_context(|| format!("moving /{ESP_EFI}"))?;
            let meta = ContentMetadata::of(&found);
            write_json(&updates.join("EFI.json"), &meta)?;
            payload.efi = Some(meta);
        }
    }
    if root.join(GRUB_INSTALL).is_file() {
        let found = owned(&[format!("/{GRUB_INSTALL}")], owners)?;
        let meta = ContentMetadata::of(&found);
        write_json(&updates.join("BIOS.json"), &meta)?;
        payload.bios = Some(meta);
    }
    check_boot(root, owners)?;
    Ok(payload)
}

/// Where [`generate_update_metadata`] moves the file a package installed
/// at `installed` (absolute, as the rpmdb lists it): `None` when the path
/// is not under `/boot/efi/EFI`.
pub fn payload_path(installed: &str) -> Option<String> {
    let rest = installed.strip_prefix('/')?.strip_prefix(ESP_EFI)?;
    (rest.is_empty() || rest.starts_with('/')).then(|| format!("/{UPDATES_DIR}/EFI{rest}"))
}

/// The same rules for a release layer on a base whose payload compose
/// already placed: the layer's packages may not change the EFI payload
/// (nodes update the ESP from the base's [`UPDATES_DIR`] only, so a
/// layered shim or GRUB would never reach it), and the rest of `/boot`
/// follows [`generate_update_metadata`]'s rules.
pub fn check_layer(root: &Path, owners: Owners) -> Result<()> {
    let esp = root.join(ESP_EFI);
    if esp.is_dir() && !esp.is_symlink() {
        let files = regular_files(&esp, &format!("/{ESP_EFI}"))?;
        if !files.is_empty() {
            bail!(
                "{}: a release layer cannot change the EFI bootloader (nodes install it from the base's /{UPDATES_DIR}); update shim-x64 or grub2-efi-x64 in the base",
                with_owners(&files, owners)?.join(", ")
            );
        }
    }
    check_boot(root, owners)
}

/// `path (package NEVRA)` for each of `paths`.
fn with_owners(paths: &[String], owners: Owners) -> Result<Vec<String>> {
    Ok(paths
        .iter()
        .zip(owners(paths)?)
        .map(|(path, o)| match o {
            Some(o) => format!("{path} (package {})", o.nevra),
            None => format!("{path} (no package)"),
        })
        .collect())
}

/// Files under `/boot` whose content the commit keeps elsewhere, or which
/// the disk stage writes itself; anything else is an error naming the
/// file and its package.
fn check_boot(root: &Path, owners: Owners) -> Result<()> {
    let boot = root.join("boot");
    if !boot.is_dir() || boot.is_symlink() {
        return Ok(());
    }
    let mut unknown = Vec::new();
    walk(&boot, "/boot", &mut |path, kind| {
        if !known_boot_path(path, kind.is_dir()) {
            unknown.push(path.to_string());
        }
    })?;
    if unknown.is_empty() {
        return Ok(());
    }
    let named = with_owners(&unknown, owners)?;
    bail!(
        "{} under /boot, which an ostree commit does not carry and strata does not know where to place: {} (the kernel belongs in /usr/lib/modules/<kver>, the EFI payload in /boot/efi/EFI)",
        if named.len() == 1 { "a file" } else { "files" },
        named.join(", ")
    )
}

/// Whether a path under `/boot` is one strata knows the place of: the
/// kernel's copies (kernel-install, kernel-core's ghosts), BLS entries,
/// GRUB's own files (the disk stage writes GRUB's configuration and
/// environment), and the empty ESP mount point.
fn known_boot_path(path: &str, is_dir: bool) -> bool {
    let rel = path.trim_start_matches("/boot/");
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // kernel-install's entry directory, `<machine-id>/<kver>`: RHEL 8's
    // (systemd 239) makes it before its plugins run, and its plugins put
    // the kernel (`linux`) and initramfs (`initrd`) there.
    let mut parts = rel.split('/');
    if parts.next().is_some_and(is_machine_id) {
        return match (parts.next(), parts.next(), parts.next()) {
            (None, ..) | (Some(_), None, _) => is_dir,
            (Some(_), Some("linux" | "initrd"), None) => !is_dir,
            _ => false,
        };
    }
    if rel == "efi" || rel == "efi/EFI" || (rel.starts_with("efi/EFI/") && is_dir) {
        return is_dir;
    }
    if rel == "loader" || rel.starts_with("loader/") || rel == "grub2" || rel.starts_with("grub2/")
    {
        return true;
    }
    !rel.contains('/')
        && [
            "vmlinuz-",
            ".vmlinuz-",
            "initramfs-",
            "System.map-",
            "config-",
            "symvers-",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// 32 lowercase hexadecimal digits, as `/etc/machine-id` holds.
fn is_machine_id(name: &str) -> bool {
    name.len() == 32
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The owners of `files`, each owned by some package.
fn owned(files: &[String], owners: Owners) -> Result<Vec<Owner>> {
    let found = owners(files)?;
    files
        .iter()
        .zip(found)
        .map(|(f, o)| o.with_context(|| format!("{f}: no package owns it")))
        .collect()
}

/// Regular files below `dir` (absolute paths as installed, `shown` being
/// `dir`'s); links and special files are refused, as bootupd refuses them.
fn regular_files(dir: &Path, shown: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut bad = None;
    walk(dir, shown, &mut |path, kind| {
        if kind.is_file() {
            out.push(path.to_string());
        } else if !kind.is_dir() {
            bad.get_or_insert_with(|| path.to_string());
        }
    })?;
    if let Some(f) = bad {
        bail!("{f}: the EFI payload holds only regular files and directories");
    }
    Ok(out)
}

/// Calls `f(path, type)` for everything below `dir` (links not followed),
/// parents first, in name order.
fn walk(dir: &Path, shown: &str, f: &mut dyn FnMut(&str, fs::FileType)) -> Result<()> {
    let mut entries: Vec<(PathBuf, String, fs::FileType)> = Vec::new();
    for e in fs::read_dir(dir).with_context(|| format!("reading {shown}"))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        entries.push((e.path(), format!("{shown}/{name}"), e.file_type()?));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, shown, kind) in entries {
        f(&shown, kind);
        if kind.is_dir() {
            walk(&path, &shown, f)?;
        }
    }
    Ok(())
}

/// The owners of files of the tree at `root` by its rpm database in
/// `dbpath` (inside the tree; `/var/lib/rpm` as compose installs, before
/// the tree's conventions move it), read with the host's rpm inside the
/// tree (root, like the install).
pub fn rpm_owners<'a>(
    root: &'a Path,
    dbpath: &'a str,
) -> impl Fn(&[String]) -> Result<Vec<Option<Owner>>> + 'a {
    move |paths| {
        paths
            .iter()
            .map(|path| {
                let out = std::process::Command::new("rpm")
                    .arg("--root")
                    .arg(root)
                    .args(["--dbpath", dbpath, "-qf", "--queryformat"])
                    .arg("owner\t%{NEVRA}\t%{NAME}\t%{EVR}\t%{BUILDTIME}\n")
                    .arg("--")
                    .arg(path)
                    .output()
                    .context("running rpm (Debian package rpm)")?;
                let text = String::from_utf8_lossy(&out.stdout);
                // A file two packages share: the first is enough.
                let first = text.lines().find_map(|l| l.strip_prefix("owner\t"));
                Ok(first.and_then(|l| {
                    let f: Vec<&str> = l.split('\t').collect();
                    let [nevra, name, evr, buildtime] = f[..] else {
                        return None;
                    };
                    Some(Owner {
                        nevra: nevra.to_string(),
                        name: name.to_string(),
                        evr: evr.to_string(),
                        buildtime: buildtime.parse().ok()?,
                    })
                }))
            })
            .collect()
    }
}

fn write_json(path: &Path, meta: &ContentMetadata) -> Result<()> {
    let mut text = serde_json::to_vec(meta)?;
    text.push(b'\n');
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(nevra: &str, name: &str, evr: &str, buildtime: i64) -> Owner {
        Owner {
            nevra: nevra.into(),
            name: name.into(),
            evr: evr.into(),
            buildtime,
        }
    }

    fn fixture_owners(paths: &[String]) -> Result<Vec<Option<Owner>>> {
        Ok(paths
            .iter()
            .map(|p| {
                if p.contains("shim") || p.contains("BOOT") || p.contains("mm") {
                    Some(owner(
                        "shim-x64-15.4-2.el8_1.x86_64",
                        "shim-x64",
                        "15.4-2.el8_1",
                        100,
                    ))
                } else if p.contains("grub") {
                    Some(owner(
                        "grub2-efi-x64-1:2.02-123.el8_6.x86_64",
                        "grub2-efi-x64",
                        "1:2.02-123.el8_6",
                        200,
                    ))
                } else if p.contains("stray") {
                    Some(owner("stray-1-1.x86_64", "stray", "1-1", 1))
                } else {
                    None
                }
            })
            .collect())
    }

    fn put(root: &Path, rel: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, rel).unwrap();
    }

    #[test]
    fn the_efi_payload_moves_with_bootupds_metadata() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "boot/efi/EFI/BOOT/BOOTX64.EFI");
        put(r, "boot/efi/EFI/redhat/shimx64.efi");
        put(r, "boot/efi/EFI/redhat/grubx64.efi");
        put(r, "boot/vmlinuz-4.18.0-372.el8.x86_64");
        put(r, "boot/loader/entries/x.conf");
        let p = generate_update_metadata(r, &fixture_owners).unwrap();
        let efi = p.efi.unwrap();
        assert_eq!(
            efi.version,
            "grub2-efi-x64-1:2.02-123.el8_6.x86_64,shim-x64-15.4-2.el8_1.x86_64"
        );
        assert_eq!(efi.timestamp, "1970-01-01T00:03:20Z");
        assert_eq!(efi.versions[0].name, "grub2");
        assert_eq!(efi.versions[0].rpm_evr, "1:2.02-123.el8_6");
        assert!(r.join(UPDATES_DIR).join("EFI/redhat/grubx64.efi").is_file());
        assert!(!r.join(ESP_EFI).exists());
        let json = fs::read_to_string(r.join(UPDATES_DIR).join("EFI.json")).unwrap();
        assert!(
            json.starts_with("{\"timestamp\":\"1970-01-01T00:03:20Z\",\"version\":"),
            "{json}"
        );
        assert!(p.bios.is_none());
    }

    #[test]
    fn an_unplaceable_boot_file_is_named_with_its_package() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "boot/stray.bin");
        put(d.path(), "boot/efi/stray.txt");
        let err = generate_update_metadata(d.path(), &fixture_owners).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("/boot/stray.bin (package stray-1-1.x86_64)"),
            "{msg}"
        );
        assert!(msg.contains("/boot/efi/stray.txt"), "{msg}");
    }

    #[test]
    fn kernel_install_entry_directories_are_known() {
        let mid = "0123456789abcdef0123456789abcdef";
        for (path, is_dir) in [
            (format!("/boot/{mid}"), true),
            (format!("/boot/{mid}/4.18.0-372.el8.x86_64"), true),
            (format!("/boot/{mid}/4.18.0-372.el8.x86_64/linux"), false),
            (format!("/boot/{mid}/4.18.0-372.el8.x86_64/initrd"), false),
            ("/boot/initramfs-4.18.0-372.el8.x86_64.img".into(), false),
        ] {
            assert!(known_boot_path(&path, is_dir), "{path}");
        }
        for (path, is_dir) in [
            (format!("/boot/{mid}"), false),
            (
                format!("/boot/{mid}/4.18.0-372.el8.x86_64/stray.bin"),
                false,
            ),
            (
                format!("/boot/{mid}/4.18.0-372.el8.x86_64/deeper/linux"),
                false,
            ),
            ("/boot/0123456789ABCDEF0123456789ABCDEF".into(), true),
            ("/boot/somedir".into(), true),
        ] {
            assert!(!known_boot_path(&path, is_dir), "{path}");
        }
    }

    #[test]
    fn a_layer_may_not_change_the_efi_payload() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "usr/lib/bootupd/updates/EFI/redhat/grubx64.efi");
        put(d.path(), "boot/vmlinuz-4.18.0-372.el8.x86_64");
        check_layer(d.path(), &fixture_owners).unwrap();
        put(d.path(), "boot/efi/EFI/redhat/shimx64.efi");
        let err = check_layer(d.path(), &fixture_owners).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("/boot/efi/EFI/redhat/shimx64.efi (package shim-x64-15.4-2.el8_1.x86_64)"),
            "{msg}"
        );
        assert!(msg.contains("cannot change the EFI bootloader"), "{msg}");
    }

    #[test]
    fn unowned_or_linked_payload_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "boot/efi/EFI/vendor/unknown.efi");
        let err = generate_update_metadata(d.path(), &fixture_owners).unwrap_err();
        assert!(format!("{err:#}").contains("no package owns it"), "{err:#}");
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "boot/efi/EFI/BOOT/BOOTX64.EFI");
        std::os::unix::fs::symlink("BOOTX64.EFI", d.path().join("boot/efi/EFI/BOOT/link.efi"))
            .unwrap();
        let err = generate_update_metadata(d.path(), &fixture_owners).unwrap_err();
        assert!(format!("{err:#}").contains("only regular files"), "{err:#}");
    }

    #[test]
    fn payload_paths() {
        assert_eq!(
            payload_path("/boot/efi/EFI/redhat/shimx64.efi").as_deref(),
            Some("/usr/lib/bootupd/updates/EFI/redhat/shimx64.efi")
        );
        assert_eq!(
            payload_path("/boot/efi/EFI").as_deref(),
            Some("/usr/lib/bootupd/updates/EFI")
        );
        assert_eq!(payload_path("/boot/efi/EFIX/a"), None);
        assert_eq!(payload_path("/boot/grub2/grubenv"), None);
        assert_eq!(payload_path("boot/efi/EFI/BOOT/BOOTX64.EFI"), None);
    }
}
