//! The boot chain's packages, shaped as RHEL ships them: the kernel
//! (Debian's, split into kernel-core and modules), systemd as the init
//! (with the boot marker's unit), dracut with ostree's module, the shim and
//! GRUB packages.

use super::*;

/// What RHEL 8's kernel-core needs before its scriptlets run (its spec's
/// `kernel_prereq` and `initrd_prereq`).
const KERNEL_PREREQ: [&str; 4] = [
    "coreutils",
    "systemd >= 203-2",
    "/usr/bin/kernel-install",
    "dracut >= 027",
];

/// RHEL's kernel scriptlets for the kernel `kver`, as its kernel.spec
/// writes them (kernel-modules-core is RHEL 9's alone).
struct KernelScriptlets {
    /// kernel-core's %post: marks the kernel as being installed, so that
    /// kernel-modules installed in the same transaction leaves the
    /// initramfs to kernel-install.
    core_post: String,
    /// kernel-core's %posttrans: weak-modules when the tree has it, then
    /// `kernel-install add` (whose plugins copy the kernel into /boot and
    /// make an initramfs there).
    core_posttrans: String,
    /// kernel-core's %preun: `kernel-install remove`, then weak-modules.
    core_preun: String,
    /// kernel-modules' %post: depmod, and when no kernel-core is being
    /// installed with it, a note for its %posttrans to remake the
    /// initramfs.
    modules_post: String,
    /// kernel-modules' %postun: depmod.
    modules_postun: String,
    /// kernel-modules' %posttrans: `dracut -f --kver` when the note is there.
    modules_posttrans: String,
    /// RHEL 9's kernel-modules-core's %posttrans: depmod.
    modules_core_posttrans: String,
    /// RHEL 9's kernel-modules-core's %postun: removes depmod's indexes.
    modules_core_postun: String,
}

/// Where the kernel's scriptlets leave notes for one another.
const KERNEL_RPM_STATE: &str = "/var/lib/rpm-state/kernel";

fn kernel_scriptlets(kver: &str) -> KernelScriptlets {
    let weak = |op: &str| {
        format!(
            "if [ -x /usr/sbin/weak-modules ]\nthen\n    /usr/sbin/weak-modules --{op}-kernel {kver} || exit $?\nfi\n"
        )
    };
    let install = |op: &str| {
        format!("/bin/kernel-install {op} {kver} /lib/modules/{kver}/vmlinuz || exit $?\n")
    };
    let depmod = format!("/sbin/depmod -a {kver}\n");
    let installing = format!("{KERNEL_RPM_STATE}/installing_core_{kver}");
    let need_dracut = format!("{KERNEL_RPM_STATE}/need_to_run_dracut_{kver}");
    KernelScriptlets {
        core_post: format!("mkdir -p {KERNEL_RPM_STATE}\ntouch {installing}\n"),
        core_posttrans: weak("add") + &format!("rm -f {installing}\n") + &install("add"),
        core_preun: install("remove") + &weak("remove"),
        modules_post: depmod.clone()
            + &format!(
                "if [ ! -f {installing} ]; then\n\tmkdir -p {KERNEL_RPM_STATE}\n\ttouch {need_dracut}\nfi\n"
            ),
        modules_postun: depmod.clone(),
        modules_posttrans: format!(
            "if [ -f {need_dracut} ]; then\n\trm -f {need_dracut}\n\techo \"Running: dracut -f --kver {kver}\"\n\tdracut -f --kver \"{kver}\" || exit $?\nfi\n"
        ),
        modules_core_posttrans: depmod,
        modules_core_postun: format!(
            "ls /lib/modules/{kver}/modules.* | grep -v builtin | xargs rm -f\n"
        ),
    }
}

/// kernel, kernel-core and kernel-modules; on RHEL 9 also
/// kernel-modules-core, which takes the modules a machine boots with (and
/// depmod's indexes) out of kernel-core, leaving it the kernel image.
pub(super) fn kernel_packages(
    fl: Flavour,
    files: &KernelFiles,
    release: &str,
    time: u32,
) -> Vec<PkgSpec> {
    let v = KERNEL_VERSION;
    let exact = |n: &str| format!("{n} = {v}-{release}");
    let mut core_files = files.core.clone();
    let modules_core_files: Vec<FileSpec> = if fl.has_kernel_modules_core() {
        let base = format!("/usr/lib/modules/{}/", files.kver);
        let (moved, kept) = core_files.into_iter().partition(|f| {
            f.path
                .strip_prefix(&base)
                .is_some_and(|rel| rel.starts_with("kernel") || rel.starts_with("modules."))
        });
        core_files = kept;
        moved
    } else {
        Vec::new()
    };
    let mut core = PkgSpec::new("kernel-core", v, release)
        .provides(&[
            &format!("kernel-uname-r = {}", files.kver),
            "installonlypkg(kernel)",
        ])
        .requires_pre(&KERNEL_PREREQ)
        .files(core_files);
    let scripts = kernel_scriptlets(&files.kver);
    core.post = Some(scripts.core_post);
    core.posttrans = Some(scripts.core_posttrans);
    core.preun = Some(scripts.core_preun);
    let mut modules = PkgSpec::new("kernel-modules", v, release)
        .requires(&[&exact("kernel-core")])
        .provides(&["installonlypkg(kernel-module)"])
        .files(files.modules.iter().cloned());
    modules.post = Some(scripts.modules_post);
    modules.postun = Some(scripts.modules_postun);
    modules.posttrans = Some(scripts.modules_posttrans);
    let mut meta = PkgSpec::new("kernel", v, release)
        .requires(&[&exact("kernel-core"), &exact("kernel-modules")])
        .provides(&["installonlypkg(kernel)"]);
    let mut out = Vec::new();
    if fl.has_kernel_modules_core() {
        let mut modules_core = PkgSpec::new("kernel-modules-core", v, release)
            .requires(&[&exact("kernel-core")])
            .provides(&[
                &format!("kernel-modules-core-uname-r = {}", files.kver),
                "installonlypkg(kernel-module)",
            ])
            .files(modules_core_files);
        modules_core.posttrans = Some(scripts.modules_core_posttrans);
        modules_core.postun = Some(scripts.modules_core_postun);
        core = core.requires(&[&format!("kernel-modules-core-uname-r = {}", files.kver)]);
        modules = modules.requires(&[&exact("kernel-modules-core")]);
        meta = meta.requires(&[&exact("kernel-modules-core")]);
        out.push(modules_core);
    }
    out.extend([core, modules, meta]);
    for p in &mut out {
        p.build_time = time;
        p.summary = format!("The Linux kernel ({})", p.name);
    }
    out
}

/// systemd: Debian's systemd 252 and its shared library, as RHEL's
/// systemd package (RHEL's carries libsystemd-shared too). Debian's build
/// also links libapparmor, which no RHEL package ships: the fixture's
/// systemd carries it. RHEL's systemd provides the SysV names (init,
/// poweroff, ...) that Debian keeps in systemd-sysv, and its scriptlets
/// create the journal group, write a machine id, update the catalog and
/// enable what its presets say.
pub(super) fn systemd(ing: &Ingredients) -> PkgSpec {
    let mut p = real(
        ing,
        "systemd",
        "239",
        "58.el8_6",
        &["systemd", "libsystemd-shared", "libapparmor1"],
    )
    .requires(&["bash", "coreutils", "setup", "util-linux"])
    .provides(&["/usr/sbin/init", "systemd-units"]);
    // Debian's own init-script glue.
    p.files.retain(|f| !f.path.starts_with("/usr/lib/lsb"));
    for (link, target) in [
        ("/usr/sbin/init", "../lib/systemd/systemd"),
        ("/usr/sbin/poweroff", "../bin/systemctl"),
        ("/usr/sbin/reboot", "../bin/systemctl"),
        ("/usr/sbin/halt", "../bin/systemctl"),
        ("/usr/sbin/shutdown", "../bin/systemctl"),
        ("/usr/sbin/runlevel", "../bin/systemctl"),
        ("/usr/sbin/telinit", "../bin/systemctl"),
        ("/usr/lib/systemd/system/default.target", "graphical.target"),
    ] {
        put(&mut p, FileSpec::symlink(link, target));
    }
    p.pre = Some(
        "getent group systemd-journal >/dev/null 2>&1 || groupadd -r -g 190 systemd-journal\n"
            .into(),
    );
    p.post = Some(SYSTEMD_POST.into());
    // Requires(pre): the scriptlet runs getent (glibc) and groupadd.
    p.requires_pre = vec![Dep("shadow-utils".into()), Dep("glibc".into())];
    p
}

/// RHEL 8's systemd %post, less what needs a running system.
pub(super) const SYSTEMD_POST: &str = r#"systemd-machine-id-setup >/dev/null 2>&1 || :
journalctl --update-catalog >/dev/null 2>&1 || :
systemd-tmpfiles --create >/dev/null 2>&1 || :
if [ $1 -eq 1 ]; then
    ln -sf /usr/lib/systemd/system/multi-user.target /etc/systemd/system/default.target
    systemctl preset --quiet remote-fs.target getty@.service serial-getty@.service \
        console-getty.service debug-shell.service >/dev/null 2>&1 || :
fi
"#;

/// dracut: Debian's dracut 059 (dracut-core), RHEL's initramfs generator.
/// With systemd in the tree it makes a systemd initramfs; ostree's module
/// (in the ostree package) adds `ostree-prepare-root`.
pub(super) fn dracut(ing: &Ingredients) -> PkgSpec {
    let mut p = real(
        ing,
        "dracut",
        "049",
        "202.git20220511.el8",
        &["dracut-core"],
    )
    .requires(&[
        "bash",
        "coreutils",
        "cpio",
        "findutils",
        "gawk",
        "grep",
        "gzip",
        "kmod",
        "sed",
        "systemd",
        "systemd-udev",
        "util-linux",
    ]);
    // Debian's logrotate and lsinitrd completion; RHEL's dracut has neither.
    p.files.retain(|f| {
        !f.path.starts_with("/etc/logrotate.d") && !f.path.starts_with("/usr/share/bash-completion")
    });
    p
}

/// ostree: Debian's ostree and ostree-boot where RHEL's ostree package has
/// them: the command line and rofiles-fuse, `ostree-prepare-root` and
/// `ostree-remount` in /usr/lib/ostree, their units, the dracut module
/// `98ostree` with the dracut configuration that enables it, and the
/// systemd generator that mounts the stateroot's /var on a booted
/// deployment. libostree is ostree-libs.
pub(super) fn ostree(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "ostree", "2022.2", "5.el8", &["ostree", "ostree-boot"]);
    // GRUB's ostree script is RHEL's ostree-grub2, which RHCOS does not
    // install (its menu is the BLS entries).
    p.files.retain(|f| {
        !f.path.starts_with("/etc/grub.d") && f.path != "/usr/libexec/libostree/grub2-15_ostree"
    });
    for f in &mut p.files {
        if f.path == "/etc/dracut.conf.d/ostree.conf" {
            // RHEL's ostree ships it in dracut's own directory.
            f.path = "/usr/lib/dracut/dracut.conf.d/ostree.conf".into();
            f.config = false;
        }
    }
    p.files.retain(|f| f.path != "/etc/dracut.conf.d");
    for d in ["/usr/lib/dracut/dracut.conf.d", "/usr/lib/dracut/modules.d"] {
        if !p.files.iter().any(|f| f.path == d) {
            p.files.push(FileSpec::dir(d, 0o755));
        }
    }
    let (provides, requires) = debian::elf_deps(&p.files);
    p.provides = provides.into_iter().map(Dep).collect();
    p.requires = requires.into_iter().map(Dep).collect();
    p
}

/// systemd-udev: Debian's udev (udevd, udevadm, the rules and hwdb sources).
pub(super) fn systemd_udev(ing: &Ingredients) -> PkgSpec {
    real(ing, "systemd-udev", "239", "58.el8_6", &["udev"]).requires(&["systemd"])
}

/// The fixture's boot check: a unit that prints the marker on the console
/// once the system is up, then powers off. Enabled by its preset from its
/// %post, as RHEL packages enable theirs (`%systemd_post`).
pub(super) fn boot_check() -> PkgSpec {
    let mut p = pkg("strata-boot-check", "1.0", "1.el8")
        .noarch()
        .requires(&["systemd", "bash", "coreutils", "util-linux"])
        .files([
            FileSpec::file(
                "/usr/libexec/strata-boot-check",
                data("strata-boot-check"),
                0o755,
            ),
            FileSpec::file(
                "/usr/lib/systemd/system/strata-boot-check.service",
                data("strata-boot-check.service"),
                0o644,
            ),
            FileSpec::file(
                "/usr/lib/systemd/system-preset/85-strata-boot-check.preset",
                "enable strata-boot-check.service\n",
                0o644,
            ),
        ]);
    p.summary = "Reports a finished boot on the console (fixture)".into();
    p.post = Some(
        "if [ $1 -eq 1 ]; then\n\
         \x20   systemctl --no-reload preset strata-boot-check.service >/dev/null 2>&1 || :\n\
         fi\n"
            .into(),
    );
    p
}

/// RHEL's shim-x64 (RHEL 8's file list): Debian's signed shim, fallback
/// and MOK manager, on the ESP where RHEL's package puts them — the
/// removable-media path `EFI/BOOT` (shim as `BOOTX64.EFI`, and `fbx64.efi`,
/// which recreates the boot entry from `BOOTX64.CSV`) and the vendor
/// directory (`EFI/redhat`, CentOS's `EFI/centos`). compose moves them as
/// bootupd does.
pub(super) fn shim_x64(ing: &Ingredients) -> PkgSpec {
    let debian = ing
        .debian
        .take(&["shim-signed", "shim-helpers-amd64-signed"]);
    let signed = |name: &str| -> Vec<u8> {
        let path = format!("/usr/lib/shim/{name}.efi.signed");
        match debian.iter().find(|f| f.path == path).map(|f| &f.kind) {
            Some(FileKind::File(bytes)) => bytes.clone(),
            _ => panic!("{path} is in neither shim-signed nor shim-helpers-amd64-signed"),
        }
    };
    let (shim, fallback, mok) = (signed("shimx64"), signed("fbx64"), signed("mmx64"));
    // shim's own format: one UCS-2 line naming the loader and the label.
    let os = ing.flavour.os_name();
    let vendor = ing.flavour.efi_vendor();
    let dir = format!("/boot/efi/EFI/{vendor}");
    let csv: Vec<u8> = format!("shimx64.efi,{os},,This is the boot entry for {os}\n")
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let mut p = pkg("shim-x64", "15.4", "2.el8_1").files(vec![
        FileSpec::dir("/boot/efi", 0o700),
        FileSpec::dir("/boot/efi/EFI", 0o700),
        FileSpec::dir("/boot/efi/EFI/BOOT", 0o700),
        FileSpec::dir(&dir, 0o700),
        FileSpec::file("/boot/efi/EFI/BOOT/BOOTX64.EFI", shim.clone(), 0o700),
        FileSpec::file("/boot/efi/EFI/BOOT/fbx64.efi", fallback, 0o700),
        FileSpec::file(&format!("{dir}/shimx64.efi"), shim.clone(), 0o700),
        FileSpec::file(&format!("{dir}/shimx64-{vendor}.efi"), shim, 0o700),
        FileSpec::file(&format!("{dir}/mmx64.efi"), mok, 0o700),
        FileSpec::file(&format!("{dir}/BOOTX64.CSV"), csv, 0o700),
    ]);
    p.summary = "First-stage UEFI bootloader (Debian's shim-signed)".into();
    p
}

/// RHEL's grub2-efi-x64: `grubx64.efi` in the vendor directory, with the
/// vendor directory as its prefix (`/EFI/redhat`, see `grub::GrubImages`),
/// beside shim, which loads it; the BLS entries directory, as RHEL's
/// package owns it.
pub(super) fn grub2_efi_x64(ing: &Ingredients) -> PkgSpec {
    let dir = format!("/boot/efi/EFI/{}", ing.flavour.efi_vendor());
    let mut p = pkg("grub2-efi-x64", GRUB_VERSION, GRUB_RELEASE)
        .requires(&["shim-x64"])
        .files(vec![
            FileSpec::dir(&dir, 0o700),
            FileSpec::dir(&format!("{dir}/fonts"), 0o700),
            FileSpec::file(&format!("{dir}/grubx64.efi"), ing.grub_efi.clone(), 0o700),
            FileSpec::dir("/boot/loader", 0o700),
            FileSpec::dir("/boot/loader/entries", 0o700),
        ]);
    p.epoch = 1;
    p
}

pub(super) const GRUB_VERSION: &str = "2.02";
pub(super) const GRUB_RELEASE: &str = "123.el8_6";

/// RHEL's grub2-pc-modules: GRUB's i386-pc directory (kernel.img, the
/// decompressor, boot.img, the modules, moddep.lst), noarch, from Debian's
/// grub-pc-bin 2.14 (see `grub`). No core.img: the installer (here:
/// `strata disk`) makes it. Debian's two programs in the directory are
/// grub2-tools' on RHEL.
pub(super) fn grub2_pc_modules(ing: &Ingredients) -> PkgSpec {
    let files: Vec<FileSpec> = ing
        .grub_pc_files
        .iter()
        .filter(|f| {
            f.path.starts_with("/usr/lib/grub")
                && !f.path.ends_with("/grub-bios-setup")
                && !f.path.ends_with("/grub-ntldr-img")
        })
        .cloned()
        .collect();
    let mut p = pkg("grub2-pc-modules", GRUB_VERSION, GRUB_RELEASE)
        .noarch()
        .files(files);
    p.epoch = 1;
    p.summary = "GRUB's BIOS modules (Debian's grub-pc-bin 2.14)".into();
    p
}

/// RHEL's grub2-pc: what a BIOS boot needs, by its dependencies (its own
/// files are configuration links this fixture has no use for).
pub(super) fn grub2_pc() -> PkgSpec {
    let mut p = pkg("grub2-pc", GRUB_VERSION, GRUB_RELEASE).requires(&["grub2-pc-modules"]);
    p.epoch = 1;
    p
}
