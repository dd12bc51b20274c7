//! What the fixture distribution contains.
//!
//! A small RHEL lookalike (8.6, 9.6 or CentOS Stream 9: see `flavour`):
//! the packages an RHCOS base needs to boot
//! (filesystem, setup, bash and coreutils from busybox, systemd whose init
//! prints the boot marker, Debian's kernel, a dracut that builds a busybox
//! initramfs, GRUB images), ordinary packages for realistic chunking, the
//! OpenShift node packages of two releases, an EPEL lookalike the RHEL-only
//! policy must refuse, and a z-stream snapshot that updates a few packages.
//! Scriptlets exercise what real ones do: %pre creating system users (fixed
//! and dynamically allocated ids), %post writing under /var and /etc.

use std::collections::BTreeMap;

use crate::debian::{self, Debian};
use crate::flavour::Flavour;
use crate::kernel::KernelFiles;
use crate::spec::{Dep, FileKind, FileSpec, PkgSpec};
use crate::synth;

/// Which key signs a repository's packages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signer {
    /// The distribution's own key (Red Hat's, or CentOS's).
    Release,
    Epel,
    /// Red Hat's release key where the distribution is CentOS (OKD takes
    /// the kubelet from Red Hat's repo).
    RedHat,
    /// The CentOS Cloud SIG's key (OKD's cri-o).
    CloudSig,
    /// The CentOS NFV SIG's key (Open vSwitch).
    NfvSig,
}

impl Signer {
    /// The name fixture.json lists its key under.
    pub fn name(self) -> &'static str {
        match self {
            Signer::Release => "release",
            Signer::Epel => "epel",
            Signer::RedHat => "redhat",
            Signer::CloudSig => "cloud-sig",
            Signer::NfvSig => "nfv-sig",
        }
    }
}

/// One repository of the fixture, at one point in time.
pub struct RepoSpec {
    pub id: String,
    pub name: String,
    /// Directory relative to the fixture root.
    pub dir: String,
    pub signer: Signer,
    pub packages: Vec<PkgSpec>,
}

/// Inputs that do not come from this file: the real binaries.
pub struct Ingredients {
    pub flavour: Flavour,
    /// Debian's packages, unpacked: the real programs.
    pub debian: Debian,
    /// The fixture's own NSS module (`native/nss_altfiles.c`, compiled).
    pub nss_altfiles: Vec<u8>,
    pub kernel: KernelFiles,
    /// The z-stream kernel's files (same binaries, new `<kver>`).
    pub kernel_z: KernelFiles,
    pub grub_efi: Vec<u8>,
    /// GRUB's i386-pc directory (Debian's grub-pc-bin), at RHEL's paths.
    pub grub_pc_files: Vec<FileSpec>,
    /// The targeted policy's module store (`crate::selinux`).
    pub selinux_store: Vec<FileSpec>,
    pub release_key_asc: String,
    /// The CentOS SIGs' keys (file name in `/etc/pki/rpm-gpg`, armored
    /// key), which centos-gpg-keys ships beside CentOS's own.
    pub sig_keys: Vec<(&'static str, String)>,
    pub scale: usize,
}

pub const SNAPSHOTS: [&str; 2] = ["20261101", "20261115"];
pub const KERNEL_VERSION: &str = "6.1.0";
/// The default flavour's kernel releases (`Flavour::kernel_release`).
pub const KERNEL_RELEASE: &str = "57.el8_6";
pub const KERNEL_RELEASE_Z: &str = "57.1.el8_6";

/// 2026-10-15T00:00:00Z: build time of the 8.6 GA-snapshot packages.
const BASE_TIME: u32 = 1_792_022_400;
/// 2026-11-10T00:00:00Z: build time of the z-stream updates.
const ZSTREAM_TIME: u32 = 1_794_268_800;
/// 2026-10-20T00:00:00Z: build time of the OpenShift packages.
const OCP_TIME: u32 = 1_792_454_400;

const FILE_DATA: &[(&str, &[u8])] = &[
    (
        "strata-boot-check",
        include_bytes!("../files/strata-boot-check"),
    ),
    (
        "strata-boot-check.service",
        include_bytes!("../files/strata-boot-check.service"),
    ),
];

fn data(name: &str) -> Vec<u8> {
    FILE_DATA
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| d.to_vec())
        .expect("fixture data file exists")
}

fn os_release(fl: Flavour) -> &'static str {
    match fl {
        Flavour::Rhel86 => {
            "NAME=\"Red Hat Enterprise Linux\"\n\
             VERSION=\"8.6 (Ootpa)\"\n\
             ID=\"rhel\"\n\
             ID_LIKE=\"fedora\"\n\
             VERSION_ID=\"8.6\"\n\
             PLATFORM_ID=\"platform:el8\"\n\
             PRETTY_NAME=\"Red Hat Enterprise Linux 8.6 (Ootpa)\"\n\
             ANSI_COLOR=\"0;31\"\n\
             CPE_NAME=\"cpe:/o:redhat:enterprise_linux:8::baseos\"\n\
             HOME_URL=\"https://www.redhat.com/\"\n\
             REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux 8\"\n\
             REDHAT_SUPPORT_PRODUCT_VERSION=\"8.6\"\n"
        }
        Flavour::Rhel96 => {
            "NAME=\"Red Hat Enterprise Linux\"\n\
             VERSION=\"9.6 (Plow)\"\n\
             ID=\"rhel\"\n\
             ID_LIKE=\"fedora\"\n\
             VERSION_ID=\"9.6\"\n\
             PLATFORM_ID=\"platform:el9\"\n\
             PRETTY_NAME=\"Red Hat Enterprise Linux 9.6 (Plow)\"\n\
             ANSI_COLOR=\"0;31\"\n\
             LOGO=\"fedora-logo-icon\"\n\
             CPE_NAME=\"cpe:/o:redhat:enterprise_linux:9::baseos\"\n\
             HOME_URL=\"https://www.redhat.com/\"\n\
             DOCUMENTATION_URL=\"https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9\"\n\
             BUG_REPORT_URL=\"https://issues.redhat.com/\"\n\
             REDHAT_BUGZILLA_PRODUCT=\"Red Hat Enterprise Linux 9\"\n\
             REDHAT_BUGZILLA_PRODUCT_VERSION=9.6\n\
             REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux\"\n\
             REDHAT_SUPPORT_PRODUCT_VERSION=\"9.6\"\n"
        }
        Flavour::C9s => {
            "NAME=\"CentOS Stream\"\n\
             VERSION=\"9\"\n\
             ID=\"centos\"\n\
             ID_LIKE=\"rhel fedora\"\n\
             VERSION_ID=\"9\"\n\
             PLATFORM_ID=\"platform:el9\"\n\
             PRETTY_NAME=\"CentOS Stream 9\"\n\
             ANSI_COLOR=\"0;31\"\n\
             LOGO=\"fedora-logo-icon\"\n\
             CPE_NAME=\"cpe:/o:centos:centos:9\"\n\
             HOME_URL=\"https://centos.org/\"\n\
             BUG_REPORT_URL=\"https://issues.redhat.com/\"\n\
             REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux 9\"\n\
             REDHAT_SUPPORT_PRODUCT_VERSION=\"CentOS Stream\"\n"
        }
    }
}

fn unit(description: &str, exec: &str) -> Vec<u8> {
    format!(
        "[Unit]\nDescription={description}\n\n[Service]\nExecStart={exec}\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    .into_bytes()
}

/// `rel` is the release without the dist tag, e.g. `6.el8`.
fn pkg(name: &str, version: &str, rel: &str) -> PkgSpec {
    let mut p = PkgSpec::new(name, version, rel);
    p.build_time = BASE_TIME;
    p
}

/// A made-up but realistic package: a binary, a library, a config and docs,
/// `size` bytes in all.
fn ordinary(name: &str, version: &str, release: &str, size: usize, requires: &[&str]) -> PkgSpec {
    let seed = format!("{name}-{version}-{release}");
    let bin = size * 6 / 10;
    let lib = size * 3 / 10;
    let doc = size - bin - lib;
    let mut p = pkg(name, version, release).requires(requires).files([
        FileSpec::file(
            &format!("/usr/bin/{name}"),
            synth::binary(&seed, bin),
            0o755,
        ),
        FileSpec::file(
            &format!("/usr/lib64/lib{name}.so.1"),
            synth::binary(&format!("{seed}.so"), lib),
            0o755,
        ),
        FileSpec::file(
            &format!("/etc/{name}.conf"),
            synth::text(&format!("{seed}.conf"), 400),
            0o644,
        )
        .config(),
        FileSpec::dir(&format!("/usr/share/doc/{name}"), 0o755),
        FileSpec::file(
            &format!("/usr/share/doc/{name}/README"),
            synth::text(&format!("{seed}.doc"), doc.max(200)),
            0o644,
        )
        .doc(),
    ]);
    p.summary = format!("The {name} package (fixture)");
    p
}

/// kernel, kernel-core and kernel-modules; on RHEL 9 also
/// kernel-modules-core, which takes the modules a machine boots with (and
/// depmod's indexes) out of kernel-core, leaving it the kernel image.
fn kernel_packages(fl: Flavour, files: &KernelFiles, release: &str, time: u32) -> Vec<PkgSpec> {
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
        .files(core_files);
    let mut modules = PkgSpec::new("kernel-modules", v, release)
        .requires(&[&exact("kernel-core")])
        .provides(&["installonlypkg(kernel-module)"])
        .files(files.modules.iter().cloned());
    let mut meta = PkgSpec::new("kernel", v, release)
        .requires(&[&exact("kernel-core"), &exact("kernel-modules")])
        .provides(&["installonlypkg(kernel)"]);
    let mut out = Vec::new();
    if fl.has_kernel_modules_core() {
        let modules_core = PkgSpec::new("kernel-modules-core", v, release)
            .requires(&[&exact("kernel-core")])
            .provides(&[
                &format!("kernel-modules-core-uname-r = {}", files.kver),
                "installonlypkg(kernel-module)",
            ])
            .files(modules_core_files);
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

/// A package made of Debian's real programs (see `debian.rs`): the files of
/// `debs` where RHEL keeps them, configuration under `/etc` marked
/// `%config(noreplace)`, and RPM's automatic library dependencies.
fn real(ing: &Ingredients, name: &str, version: &str, rel: &str, debs: &[&str]) -> PkgSpec {
    let files: Vec<FileSpec> = ing
        .debian
        .take(debs)
        .into_iter()
        .filter(|f| {
            !(matches!(f.kind, FileKind::Dir) && FILESYSTEM_DIRS.contains(&f.path.as_str()))
        })
        .map(|f| {
            if f.path.starts_with("/etc/") && matches!(f.kind, FileKind::File(_)) {
                f.config()
            } else {
                f
            }
        })
        .collect();
    let (provides, requires) = debian::elf_deps(&files);
    let mut p = pkg(name, version, rel).files(files);
    p.provides.extend(provides.into_iter().map(Dep));
    p.requires.extend(requires.into_iter().map(Dep));
    p.summary = format!("The {name} package (Debian's {})", debs.join(", "));
    p
}

/// Replaces (or adds) the file at `path`.
fn put(p: &mut PkgSpec, file: FileSpec) {
    p.files.retain(|f| f.path != file.path);
    p.files.push(file);
}

/// Takes the files at `paths` out of `p`.
fn split_off(p: &mut PkgSpec, paths: &[&str]) -> Vec<FileSpec> {
    let (out, keep) = std::mem::take(&mut p.files)
        .into_iter()
        .partition(|f| paths.contains(&f.path.as_str()));
    p.files = keep;
    out
}

/// A z-stream rebuild of a real package: the fixture has one Debian build
/// of each program, so the rebuild changes `path` the way a fix would,
/// with a trailer after the ELF data (which the loader never reads).
fn rebuilt(mut p: PkgSpec, path: &str, release: &str) -> PkgSpec {
    for f in &mut p.files {
        if let (true, FileKind::File(content)) = (f.path == path, &mut f.kind) {
            content.extend_from_slice(format!("\0strata fixture rebuild {release}\0").as_bytes());
            return p;
        }
    }
    panic!("{} has no {path}", p.name)
}

/// glibc: Debian's libc6 and libc-bin. ldconfig runs from a shell file
/// trigger after every transaction that adds libraries, as RHEL's glibc
/// does. RHEL 8's glibc also runs it from a lua %post; the rpm crate
/// records a lua scriptlet's interpreter as a dependency on `<lua>` that
/// nothing provides, so the fixture has no %post (the loader finds the
/// libraries without a cache until the trigger writes it). rpm passes
/// every scriptlet with a body its instance counts, which ldconfig would
/// take for directories, so it is never the interpreter itself.
fn glibc(ing: &Ingredients, zstream: bool) -> PkgSpec {
    let release = if zstream {
        "189.6.el8_6"
    } else {
        "189.5.el8_6"
    };
    // RHEL's glibc-common requires tzdata.
    let mut p = real(ing, "glibc", "2.28", release, &["libc6", "libc-bin"])
        .requires(&["basesystem", "tzdata"])
        .provides(&["rtld(GNU_HASH)", "/sbin/ldconfig"]);
    if zstream {
        p = rebuilt(p, "/usr/lib64/libc.so.6", release);
    }
    for f in [
        FileSpec::file("/etc/ld.so.conf", "include ld.so.conf.d/*.conf\n", 0o644).config(),
        FileSpec::dir("/etc/ld.so.conf.d", 0o755),
        FileSpec::file("/etc/nsswitch.conf", NSSWITCH, 0o644).config(),
        // Debian's loader and programs look for libraries in the multiarch
        // directory (built into ld.so, and the RUNPATH of a few programs);
        // RHEL keeps them in /usr/lib64. This one link is the difference.
        FileSpec::symlink(debian::MULTIARCH_LIBDIR, "../lib64"),
    ] {
        put(&mut p, f);
    }
    p.trans_file_triggers_in.push((
        ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
            .map(String::from)
            .to_vec(),
        "/sbin/ldconfig\n".into(),
    ));
    p
}

const NSSWITCH: &str = "\
passwd:     files
shadow:     files
group:      files
hosts:      files dns myhostname
services:   files
netgroup:   files
automount:  files
aliases:    files
";

/// RHEL 8's /etc/login.defs, as far as useradd and groupadd read it.
const LOGIN_DEFS: &str = "\
MAIL_DIR\t/var/spool/mail
PASS_MAX_DAYS\t99999
PASS_MIN_DAYS\t0
PASS_MIN_LEN\t5
PASS_WARN_AGE\t7
UID_MIN\t\t1000
UID_MAX\t\t60000
SYS_UID_MIN\t201
SYS_UID_MAX\t999
GID_MIN\t\t1000
GID_MAX\t\t60000
SYS_GID_MIN\t201
SYS_GID_MAX\t999
CREATE_HOME\tyes
UMASK\t\t077
USERGROUPS_ENAB yes
ENCRYPT_METHOD SHA512
";

const USERADD_DEFAULTS: &str = "\
GROUP=100
HOME=/home
INACTIVE=-1
EXPIRE=
SHELL=/bin/bash
SKEL=/etc/skel
CREATE_MAIL_SPOOL=yes
";

/// shadow-utils from Debian's passwd and uidmap; RHEL's newuidmap and
/// newgidmap carry file capabilities instead of set-user-id.
fn shadow_utils(ing: &Ingredients) -> (PkgSpec, PkgSpec) {
    let mut p =
        real(ing, "shadow-utils", "4.6", "16.el8", &["passwd", "uidmap"]).requires(&["setup"]);
    p.epoch = 2;
    // passwd(1) is its own package on RHEL.
    let passwd_files = split_off(&mut p, &["/usr/bin/passwd", "/etc/pam.d/passwd"]);
    for f in &mut p.files {
        match f.path.as_str() {
            "/usr/bin/newuidmap" => *f = f.clone().caps("cap_setuid=ep"),
            "/usr/bin/newgidmap" => *f = f.clone().caps("cap_setgid=ep"),
            _ => continue,
        }
        f.mode = 0o755;
    }
    put(
        &mut p,
        FileSpec::file("/etc/login.defs", LOGIN_DEFS, 0o644).config(),
    );
    put(
        &mut p,
        FileSpec::file("/etc/default/useradd", USERADD_DEFAULTS, 0o644).config(),
    );
    let (_, requires) = debian::elf_deps(&passwd_files);
    let mut passwd = pkg("passwd", "0.80", "4.el8")
        .requires(&["shadow-utils"])
        .files(passwd_files);
    passwd.requires.extend(requires.into_iter().map(Dep));
    (p, passwd)
}

/// The fixture's nss-altfiles: its own module (Debian has none), where RHEL's is.
fn nss_altfiles(ing: &Ingredients) -> PkgSpec {
    pkg("nss-altfiles", "2.18.1", "12.el8")
        .requires(&["glibc"])
        .provides(&["libnss_altfiles.so.2()(64bit)"])
        .files([FileSpec::file(
            "/usr/lib64/libnss_altfiles.so.2",
            ing.nss_altfiles.clone(),
            0o755,
        )])
}

/// bash, which is also RHEL's /bin/sh.
fn bash(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "bash", "4.4.20", "4.el8_6", &["bash"])
        .requires(&["filesystem"])
        .provides(&["/bin/sh", "/bin/bash"]);
    put(&mut p, FileSpec::symlink("/usr/bin/sh", "bash"));
    p
}

/// gawk, which RHEL installs as awk too (Debian picks awk by alternatives).
fn gawk(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "gawk", "4.2.1", "4.el8", &["gawk"]);
    put(&mut p, FileSpec::symlink("/usr/bin/awk", "gawk"));
    p
}

fn gmp(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "gmp", "6.1.2", "10.el8", &["libgmp10"]);
    p.epoch = 1;
    p
}

fn findutils(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "findutils", "4.6.0", "20.el8", &["findutils"]);
    p.epoch = 1;
    p
}

fn openssl_libs(ing: &Ingredients, zstream: bool) -> PkgSpec {
    let release = if zstream { "7.el8_6.1" } else { "7.el8_6" };
    let mut p = real(ing, "openssl-libs", "1.1.1k", release, &["libssl3"]);
    p.epoch = 1;
    if zstream {
        p = rebuilt(p, "/usr/lib64/libcrypto.so.3", release);
    }
    p
}

/// Libraries and tools taken whole from Debian: RHEL name, version,
/// release, Debian packages.
const REAL: &[(&str, &str, &str, &[&str])] = &[
    ("libgcc", "8.5.0", "10.el8", &["libgcc-s1"]),
    (
        "ncurses-libs",
        "6.1",
        "9.20180224.el8",
        &["libtinfo6", "libncursesw6"],
    ),
    ("libacl", "2.2.53", "1.el8", &["libacl1"]),
    ("libattr", "2.4.48", "3.el8", &["libattr1"]),
    ("mpfr", "3.1.6", "1.el8", &["libmpfr6"]),
    ("readline", "7.0", "10.el8", &["libreadline8"]),
    ("libsigsegv", "2.11", "5.el8", &["libsigsegv2"]),
    ("libselinux", "2.9", "5.el8", &["libselinux1"]),
    // sefcontext_compile, which semodule runs when it rebuilds the policy.
    ("libselinux-utils", "2.9", "5.el8", &["selinux-utils"]),
    ("pcre2", "10.32", "2.el8", &["libpcre2-8-0"]),
    ("libsepol", "2.9", "3.el8", &["libsepol2"]),
    (
        "libsemanage",
        "2.9",
        "8.el8",
        &["libsemanage2", "libsemanage-common"],
    ),
    (
        "audit-libs",
        "3.0.7",
        "2.el8",
        &["libaudit1", "libaudit-common"],
    ),
    ("libcap-ng", "0.7.11", "1.el8", &["libcap-ng0"]),
    ("libcap", "2.48", "2.el8_5", &["libcap2"]),
    ("bzip2-libs", "1.0.6", "26.el8", &["libbz2-1.0"]),
    ("pam", "1.3.1", "16.el8", &["libpam0g"]),
    ("libxcrypt", "4.1.1", "6.el8", &["libcrypt1"]),
    ("libblkid", "2.32.1", "35.el8", &["libblkid1"]),
    ("libmount", "2.32.1", "35.el8", &["libmount1"]),
    ("libsmartcols", "2.32.1", "35.el8", &["libsmartcols1"]),
    ("libuuid", "2.32.1", "35.el8", &["libuuid1"]),
    ("libfdisk", "2.32.1", "35.el8", &["libfdisk1"]),
    ("shadow-utils-subid", "4.6", "16.el8", &["libsubid4"]),
    ("libseccomp", "2.5.2", "1.el8", &["libseccomp2"]),
    ("cryptsetup-libs", "2.3.7", "2.el8", &["libcryptsetup12"]),
    (
        "device-mapper-libs",
        "1.02.181",
        "3.el8",
        &["libdevmapper1.02.1"],
    ),
    ("json-c", "0.13.1", "3.el8", &["libjson-c5"]),
    ("libargon2", "20171227", "1.el8", &["libargon2-1"]),
    ("p11-kit", "0.23.22", "1.el8", &["libp11-kit0"]),
    ("libffi", "3.1", "23.el8", &["libffi8"]),
    ("iptables-libs", "1.8.4", "22.el8", &["libip4tc2"]),
    (
        "systemd-libs",
        "239",
        "58.el8_6",
        &["libsystemd0", "libudev1"],
    ),
    ("libgcrypt", "1.8.5", "7.el8_6", &["libgcrypt20"]),
    ("libgpg-error", "1.31", "1.el8", &["libgpg-error0"]),
    ("lz4-libs", "1.8.3", "3.el8_4", &["liblz4-1"]),
    ("xz-libs", "5.2.4", "4.el8_6", &["liblzma5"]),
    ("libzstd", "1.4.4", "1.el8", &["libzstd1"]),
    ("zlib", "1.2.11", "18.el8_5", &["zlib1g"]),
    ("kmod-libs", "25", "19.el8", &["libkmod2"]),
    ("kmod", "25", "19.el8", &["kmod"]),
    (
        "util-linux",
        "2.32.1",
        "35.el8",
        &["util-linux", "mount", "fdisk", "login"],
    ),
    ("coreutils", "8.30", "12.el8", &["coreutils"]),
    ("sed", "4.5", "5.el8", &["sed"]),
    ("grep", "3.1", "6.el8", &["grep"]),
    ("gzip", "1.9", "13.el8", &["gzip"]),
    ("cpio", "2.12", "11.el8", &["cpio"]),
];

/// The users and groups RHEL 8's setup package ships (its uidgid table).
const SETUP_PASSWD: &str = "\
root:x:0:0:root:/root:/bin/bash
bin:x:1:1:bin:/bin:/sbin/nologin
daemon:x:2:2:daemon:/sbin:/sbin/nologin
adm:x:3:4:adm:/var/adm:/sbin/nologin
lp:x:4:7:lp:/var/spool/lpd:/sbin/nologin
sync:x:5:0:sync:/sbin:/bin/sync
shutdown:x:6:0:shutdown:/sbin:/sbin/shutdown
halt:x:7:0:halt:/sbin:/sbin/halt
mail:x:8:12:mail:/var/spool/mail:/sbin/nologin
operator:x:11:0:operator:/root:/sbin/nologin
games:x:12:100:games:/usr/games:/sbin/nologin
ftp:x:14:50:FTP User:/var/ftp:/sbin/nologin
nobody:x:65534:65534:Kernel Overflow User:/:/sbin/nologin
";
const SETUP_GROUP: &str = "\
root:x:0:
bin:x:1:
daemon:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mem:x:8:
kmem:x:9:
wheel:x:10:
cdrom:x:11:
mail:x:12:
man:x:15:
dialout:x:18:
floppy:x:19:
games:x:20:
tape:x:33:
video:x:39:
ftp:x:50:
lock:x:54:
audio:x:63:
users:x:100:
nobody:x:65534:
";

/// The shadow file of a passwd or group file: each name with `rest`.
fn shadow_of(entries: &str, rest: &str) -> String {
    entries
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(|name| format!("{name}{rest}\n"))
        .collect()
}

/// The flavour's baseos and appstream (`rhel-8.6-baseos`, `c9s-appstream`,
/// …) as of a snapshot.
fn os_packages(ing: &Ingredients, zstream: bool) -> (Vec<PkgSpec>, Vec<PkgSpec>) {
    let fl = ing.flavour;
    let shadow = shadow_utils(ing);
    let mut baseos = release_packages(fl, &ing.release_key_asc, &ing.sig_keys);
    baseos.extend([
        pkg("setup", "2.12.2", "6.el8").noarch().files([
            FileSpec::file("/etc/passwd", SETUP_PASSWD, 0o644).config(),
            FileSpec::file("/etc/group", SETUP_GROUP, 0o644).config(),
            FileSpec::file("/etc/shadow", shadow_of(SETUP_PASSWD, ":*:18367:0:99999:7:::"), 0o000).config(),
            FileSpec::file("/etc/gshadow", shadow_of(SETUP_GROUP, ":::"), 0o000).config(),
            FileSpec::file("/etc/shells", "/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n", 0o644).config(),
            FileSpec::file("/etc/hosts", "127.0.0.1   localhost localhost.localdomain\n::1         localhost localhost.localdomain\n", 0o644).config(),
            FileSpec::file("/etc/profile", "export PATH=/usr/local/bin:/usr/bin:/usr/sbin\n", 0o644).config(),
        ]),
        pkg("filesystem", "3.8", "6.el8")
            .requires_pre(&["setup"])
            .files(filesystem_files()),
        pkg("basesystem", "11", "5.el8").noarch().requires(&["setup", "filesystem"]),
        glibc(ing, zstream),
        nss_altfiles(ing),
        shadow.0,
        shadow.1,
        bash(ing),
        gmp(ing),
        gawk(ing),
        findutils(ing),
        openssl_libs(ing, zstream),
        systemd(ing),
        systemd_udev(ing),
        boot_check(),
        dracut(ing),
        shim_x64(ing),
        grub2_efi_x64(ing),
        grub2_pc_modules(ing),
        grub2_pc(),
        openssh_server(),
        chrony(),
        failing_post(),
    ]);
    baseos.extend(
        REAL.iter()
            .map(|(name, version, release, debs)| real(ing, name, version, release, debs)),
    );
    // RHEL's util-linux has login and nologin, which Debian keeps in login
    // with shadow's tools (RHEL's shadow-utils has those, and login.defs).
    // The time zone database (noarch, as RHEL's): systemd-firstboot asks
    // for a time zone on a node's first boot unless /etc/localtime names
    // one that exists.
    baseos.push(real(ing, "tzdata", "2022a", "1.el8", &["tzdata"]).noarch());
    for p in baseos.iter_mut().filter(|p| p.name == "util-linux") {
        p.files.retain(|f| {
            ![
                "/etc/login.defs",
                "/usr/bin/faillog",
                "/usr/bin/lastlog",
                "/usr/bin/newgrp",
                "/usr/bin/sg",
            ]
            .contains(&f.path.as_str())
        });
    }
    baseos.extend(kernel_packages(
        fl,
        if zstream { &ing.kernel_z } else { &ing.kernel },
        fl.kernel_release(zstream),
        if zstream { ZSTREAM_TIME } else { BASE_TIME },
    ));

    // Ordinary packages: name, version, release, size, requires.
    let sudo_release = if zstream { "9.el8_6.1" } else { "9.el8_6" };
    let plain: &[(&str, &str, &str, usize, &[&str])] = &[
        (
            "NetworkManager",
            "1.36.0",
            "4.el8_6",
            6_200_000,
            &["glibc", "systemd"],
        ),
        ("e2fsprogs", "1.45.6", "4.el8", 2_100_000, &["glibc"]),
        ("xfsprogs", "5.0.0", "10.el8", 3_900_000, &["glibc"]),
        ("lvm2", "2.03.14", "3.el8", 3_700_000, &["glibc"]),
        (
            "cryptsetup",
            "2.3.7",
            "2.el8",
            900_000,
            &["glibc", "openssl-libs"],
        ),
        ("iptables", "1.8.4", "22.el8", 2_200_000, &["glibc"]),
        ("nftables", "0.9.3", "25.el8", 800_000, &["glibc"]),
        ("audit", "3.0.7", "2.el8", 800_000, &["glibc"]),
        ("sudo", "1.8.29", sudo_release, 3_400_000, &["glibc"]),
        (
            "selinux-policy-targeted",
            "3.14.3",
            "95.el8",
            16_000_000,
            &["coreutils"],
        ),
        ("nfs-utils", "2.3.3", "51.el8", 1_500_000, &["glibc"]),
        (
            "iscsi-initiator-utils",
            "6.2.1.4",
            "4.git095f59c.el8",
            1_500_000,
            &["glibc"],
        ),
        ("rpm", "4.14.3", "23.el8", 2_000_000, &["glibc", "zlib"]),
        ("tar", "1.30", "5.el8", 2_900_000, &["glibc"]),
        ("less", "530", "1.el8", 350_000, &["glibc"]),
        ("vim-minimal", "8.0.1763", "16.el8_5", 1_300_000, &["glibc"]),
        ("dbus", "1.12.8", "18.el8", 600_000, &["systemd"]),
        ("kexec-tools", "2.0.20", "68.el8", 1_200_000, &["glibc"]),
        ("bootupd", "0.2.6", "1.el8", 3_000_000, &["glibc"]),
    ];
    baseos.extend(plain.iter().map(|(n, v, r, size, req)| {
        let mut p = ordinary(n, v, r, *size, req);
        // The audit tools' library is audit-libs' real one.
        if p.name == "audit" {
            p.files.retain(|f| f.path != "/usr/lib64/libaudit.so.1");
            p.requires.push(Dep("audit-libs".into()));
        }
        p
    }));
    if zstream {
        for p in baseos
            .iter_mut()
            .filter(|p| ["openssl-libs", "sudo", "glibc"].contains(&p.name.as_str()))
        {
            p.build_time = ZSTREAM_TIME;
        }
    }

    let app: &[(&str, &str, &str, usize, &[&str])] = &[
        ("conmon", "2.1.4", "1.module+el8.6.0", 120_000, &["glibc"]),
        (
            "runc",
            "1.1.4",
            "1.module+el8.6.0",
            11_000_000,
            &["glibc", "libseccomp"],
        ),
        ("containers-common", "1", "35.module+el8.6.0", 200_000, &[]),
        (
            "container-selinux",
            "2.189.0",
            "1.module+el8.6.0",
            60_000,
            &["selinux-policy-targeted"],
        ),
        (
            "podman",
            "4.0.2",
            "6.module+el8.6.0",
            15_000_000,
            &["conmon", "runc", "containers-common"],
        ),
        (
            "skopeo",
            "1.6.2",
            "1.module+el8.6.0",
            9_000_000,
            &["containers-common"],
        ),
        ("jq", "1.6", "3.el8", 350_000, &["glibc"]),
        (
            "rpm-ostree",
            "2022.2",
            "3.el8",
            12_000_000,
            &["ostree", "rpm"],
        ),
    ];
    let mut appstream: Vec<PkgSpec> = app
        .iter()
        .map(|(n, v, r, size, req)| ordinary(n, v, r, *size, req))
        .collect();
    appstream.push(ostree(ing));
    if fl.major() >= 9 {
        // RHEL 9's AppStream carries Ignition (the base installs it, so the
        // base's initramfs has its module) and NetworkManager-ovs.
        appstream.extend(ignition(ing, "el8"));
        appstream.push(network_manager_ovs());
    }
    baseos.push(selinux_policy());
    baseos.push(selinux_policy_common());
    baseos.push(policycoreutils(ing));
    for p in baseos.iter_mut().chain(appstream.iter_mut()) {
        if p.name == "selinux-policy-targeted" {
            // The targeted policy as RHEL's package has it: the module
            // store at /var/lib/selinux/targeted (libostree runs semodule
            // on it in every deployment it writes on a node) and the
            // policy built from it, file contexts included (what
            // Ignition's setfiles reads), made by the real semodule.
            p.files.push(FileSpec::dir("/etc/selinux", 0o755));
            p.files.push(FileSpec::dir("/var/lib/selinux", 0o755));
            p.files.extend(ing.selinux_store.iter().cloned());
            p.requires.push(Dep("selinux-policy".into()));
        }
    }
    (baseos, appstream)
}

/// selinux-policy: `/etc/selinux/config`, as RHEL's common policy package
/// owns it, naming the targeted policy. `SELINUX=disabled`, where RHEL
/// says enforcing: the fixture's policies are not real (its kernel runs
/// without SELinux) and the demo base stays unlabeled (libostree labels
/// only with an enabled policy). Ignition's files stage reads it to find
/// the file contexts it relabels what it writes with.
fn selinux_policy_common() -> PkgSpec {
    pkg("selinux-policy", "3.14.3", "95.el8").noarch().files([
        FileSpec::dir("/etc/selinux", 0o755),
        FileSpec::file(
            "/etc/selinux/config",
            "SELINUX=disabled\nSELINUXTYPE=targeted\n",
            0o644,
        )
        .config(),
    ])
}

/// policycoreutils: Debian's `setfiles`, `restorecon`, `load_policy`,
/// `semodule`, … where RHEL keeps them (`/usr/sbin`). Ignition's dracut
/// module installs `setfiles` into the initramfs to label what it writes.
/// Debian's systemd units and generator for autorelabel are left out.
fn policycoreutils(ing: &Ingredients) -> PkgSpec {
    let mut p = real(
        ing,
        "policycoreutils",
        "2.9",
        "19.el8",
        &["policycoreutils"],
    );
    p.files.retain(|f| {
        !f.path.starts_with("/usr/lib/systemd") && !f.path.starts_with("/usr/share/bash-completion")
    });
    let (provides, requires) = debian::elf_deps(&p.files);
    p.provides = provides.into_iter().map(Dep).collect();
    p.requires = requires.into_iter().map(Dep).collect();
    // As RHEL's: semodule runs sefcontext_compile.
    p.requires.push(Dep("libselinux-utils".into()));
    p
}

/// File contexts of the fixture's minimum policy (text); the targeted
/// policy's are the same, built from `files/selinux-base.cil`.
const FILE_CONTEXTS: &str = "\
/.*\tsystem_u:object_r:default_t:s0
/\tsystem_u:object_r:root_t:s0
/usr(/.*)?\tsystem_u:object_r:usr_t:s0
/usr/bin(/.*)?\tsystem_u:object_r:bin_t:s0
/usr/sbin(/.*)?\tsystem_u:object_r:bin_t:s0
/etc(/.*)?\tsystem_u:object_r:etc_t:s0
/etc/ssh/sshd_config\t--\tsystem_u:object_r:sshd_config_t:s0
/etc/shadow.*\t--\tsystem_u:object_r:shadow_t:s0
/var(/.*)?\tsystem_u:object_r:var_t:s0
";

/// An SELinux policy as far as labeling needs one: its file contexts
/// (text; the binary policy is a placeholder), and a %post that makes it
/// the enforcing policy in `/etc/selinux/config` (selinux-policy's). The
/// demo base's selinux-policy-targeted is filler with a disabled config,
/// so the demo stays unlabeled; tests that want labels install this one.
fn selinux_policy() -> PkgSpec {
    let mut p = pkg("selinux-policy-minimum", "3.14.3", "95.el8")
        .noarch()
        .requires(&["setup", "selinux-policy"])
        .files([
            FileSpec::file(
                "/etc/selinux/minimum/contexts/files/file_contexts",
                FILE_CONTEXTS,
                0o644,
            ),
            FileSpec::file(
                "/etc/selinux/minimum/policy/policy.31",
                "placeholder\n",
                0o644,
            ),
        ]);
    p.post =
        Some("printf 'SELINUX=enforcing\\nSELINUXTYPE=minimum\\n' > /etc/selinux/config\n".into());
    p
}

/// The directories the filesystem package owns.
const FILESYSTEM_DIRS: &[&str] = &[
    "/boot",
    "/dev",
    "/etc",
    "/etc/pki",
    "/etc/pki/rpm-gpg",
    "/etc/skel",
    "/etc/sysconfig",
    "/home",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/run",
    "/srv",
    "/sys",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/share",
    "/usr/share/doc",
    "/usr/share/licenses",
    "/usr/local",
    "/usr/local/bin",
    "/var",
    "/var/lib",
    "/var/log",
    "/var/cache",
    "/var/spool",
    "/var/opt",
    "/var/empty",
    "/usr/lib/systemd",
    "/usr/lib/systemd/system",
    "/usr/lib/tmpfiles.d",
    "/usr/lib/sysusers.d",
    "/root",
    "/tmp",
    "/var/tmp",
];

fn filesystem_files() -> Vec<FileSpec> {
    let mut files = vec![
        FileSpec::symlink("/bin", "usr/bin"),
        FileSpec::symlink("/sbin", "usr/sbin"),
        FileSpec::symlink("/lib", "usr/lib"),
        FileSpec::symlink("/lib64", "usr/lib64"),
    ];
    for d in FILESYSTEM_DIRS {
        let mode = match *d {
            "/root" => 0o550,
            "/tmp" | "/var/tmp" => 0o1777,
            _ => 0o755,
        };
        files.push(FileSpec::dir(d, mode));
    }
    files
}

/// The release package: RHEL's redhat-release, with Red Hat's key, or
/// CentOS Stream's centos-stream-release and centos-gpg-keys.
fn release_packages(
    fl: Flavour,
    key_asc: &str,
    sig_keys: &[(&'static str, String)],
) -> Vec<PkgSpec> {
    let (version, release, codename) = match fl {
        Flavour::Rhel86 => ("8.6", "0.1.el8", "Ootpa"),
        Flavour::Rhel96 => ("9.6", "0.1.el9", "Plow"),
        Flavour::C9s => {
            let mut main = pkg("centos-stream-release", "9.0", "26.el9")
                .noarch()
                .requires(&["centos-gpg-keys"])
                .provides(&[
                    "centos-release = 9.0-26.el9",
                    "redhat-release = 9.0-26.el9",
                    "system-release = 9.0-26.el9",
                    "system-release(releasever) = 9",
                ])
                .files([
                    FileSpec::file("/usr/lib/os-release", os_release(fl), 0o644),
                    FileSpec::symlink("/etc/os-release", "../usr/lib/os-release"),
                    FileSpec::file("/etc/centos-release", "CentOS Stream release 9\n", 0o644),
                    FileSpec::symlink("/etc/redhat-release", "centos-release"),
                    FileSpec::symlink("/etc/system-release", "centos-release"),
                    FileSpec::file("/etc/system-release-cpe", "cpe:/o:centos:centos:9\n", 0o644),
                ]);
            main.summary = "CentOS Stream release files (fixture)".into();
            let keys = pkg("centos-gpg-keys", "9.0", "26.el9").noarch().files(
                [("RPM-GPG-KEY-centosofficial", key_asc)]
                    .into_iter()
                    .chain(sig_keys.iter().map(|(f, k)| (*f, k.as_str())))
                    .map(|(file, asc)| {
                        FileSpec::file(&format!("/etc/pki/rpm-gpg/{file}"), asc, 0o644)
                    }),
            );
            return vec![main, keys];
        }
    };
    let major = fl.major();
    vec![pkg("redhat-release", version, release)
        .provides(&[
            &format!("system-release = {version}-{release}"),
            &format!("system-release(releasever) = {major}"),
            "redhat-release-eula",
        ])
        .files([
            FileSpec::file("/usr/lib/os-release", os_release(fl), 0o644),
            FileSpec::symlink("/etc/os-release", "../usr/lib/os-release"),
            FileSpec::file(
                "/etc/redhat-release",
                format!("Red Hat Enterprise Linux release {version} ({codename})\n"),
                0o644,
            ),
            FileSpec::symlink("/etc/system-release", "redhat-release"),
            FileSpec::file(
                "/etc/system-release-cpe",
                if major == 8 {
                    "cpe:/o:redhat:enterprise_linux:8.6:ga\n"
                } else {
                    "cpe:/o:redhat:enterprise_linux:9::baseos\n"
                },
                0o644,
            ),
            FileSpec::file(
                "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release",
                key_asc,
                0o644,
            ),
        ])]
}

/// systemd: Debian's systemd 252 and its shared library, as RHEL's
/// systemd package (RHEL's carries libsystemd-shared too). Debian's build
/// also links libapparmor, which no RHEL package ships: the fixture's
/// systemd carries it. RHEL's systemd provides the SysV names (init,
/// poweroff, ...) that Debian keeps in systemd-sysv, and its scriptlets
/// create the journal group, write a machine id, update the catalog and
/// enable what its presets say.
fn systemd(ing: &Ingredients) -> PkgSpec {
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
const SYSTEMD_POST: &str = r#"systemd-machine-id-setup >/dev/null 2>&1 || :
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
fn dracut(ing: &Ingredients) -> PkgSpec {
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

/// ostree: filler for the command line and library (RHEL's ostree and
/// ostree-libs), with Debian's real boot-time programs where RHEL's ostree
/// package has them: `ostree-prepare-root` and `ostree-remount` in
/// /usr/lib/ostree, their units, and the dracut module `98ostree` with the
/// dracut configuration that enables it. Debian's systemd generator links
/// libostree, which the fixture does not carry: it is left out (it mounts
/// /var from the stateroot; without it /var is the deployment's own).
fn ostree(ing: &Ingredients) -> PkgSpec {
    let mut p = ordinary("ostree", "2022.2", "5.el8", 1_800_000, &["glibc"]);
    let real_files = real(ing, "ostree", "2022.2", "5.el8", &["ostree-boot"]);
    for f in real_files.files {
        let keep = f.path.starts_with("/usr/lib/ostree")
            || f.path.starts_with("/usr/lib/dracut/modules.d")
            || f.path.starts_with("/usr/lib/systemd/system/ostree-");
        if keep {
            put(&mut p, f);
        } else if f.path == "/etc/dracut.conf.d/ostree.conf" {
            // RHEL's ostree ships it in dracut's own directory.
            let mut f = f;
            f.path = "/usr/lib/dracut/dracut.conf.d/ostree.conf".into();
            f.config = false;
            put(&mut p, f);
        }
    }
    for d in ["/usr/lib/dracut/dracut.conf.d", "/usr/lib/dracut/modules.d"] {
        if !p.files.iter().any(|f| f.path == d) {
            p.files.push(FileSpec::dir(d, 0o755));
        }
    }
    let (provides, requires) = debian::elf_deps(&p.files);
    p.provides.extend(provides.into_iter().map(Dep));
    p.requires.extend(requires.into_iter().map(Dep));
    p
}

/// systemd-udev: Debian's udev (udevd, udevadm, the rules and hwdb sources).
fn systemd_udev(ing: &Ingredients) -> PkgSpec {
    real(ing, "systemd-udev", "239", "58.el8_6", &["udev"]).requires(&["systemd"])
}

/// The fixture's boot check: a unit that prints the marker on the console
/// once the system is up, then powers off. Enabled by its preset from its
/// %post, as RHEL packages enable theirs (`%systemd_post`).
fn boot_check() -> PkgSpec {
    let mut p = pkg("strata-boot-check", "1.0", "1.el8")
        .noarch()
        .requires(&["systemd", "bash", "coreutils"])
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
fn shim_x64(ing: &Ingredients) -> PkgSpec {
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
fn grub2_efi_x64(ing: &Ingredients) -> PkgSpec {
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

const GRUB_VERSION: &str = "2.02";
const GRUB_RELEASE: &str = "123.el8_6";

/// RHEL's grub2-pc-modules: GRUB's i386-pc directory (kernel.img, the
/// decompressor, boot.img, the modules, moddep.lst), noarch, from Debian's
/// grub-pc-bin 2.14 (see `grub`). No core.img: the installer (here:
/// `strata disk`) makes it. Debian's two programs in the directory are
/// grub2-tools' on RHEL.
fn grub2_pc_modules(ing: &Ingredients) -> PkgSpec {
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
fn grub2_pc() -> PkgSpec {
    let mut p = pkg("grub2-pc", GRUB_VERSION, GRUB_RELEASE).requires(&["grub2-pc-modules"]);
    p.epoch = 1;
    p
}

fn openssh_server() -> PkgSpec {
    let mut p = pkg("openssh-server", "8.0p1", "13.el8")
        .requires(&["bash", "systemd"])
        .files([
            FileSpec::file("/usr/sbin/sshd", synth::binary("sshd", 900_000), 0o755),
            FileSpec::dir("/etc/ssh", 0o755),
            FileSpec::dir("/etc/ssh/sshd_config.d", 0o755),
            FileSpec::file("/etc/ssh/sshd_config", "PermitRootLogin no\nPasswordAuthentication no\nInclude /etc/ssh/sshd_config.d/*.conf\n", 0o600).config(),
            FileSpec::file("/usr/lib/systemd/system/sshd.service", unit("OpenSSH server daemon", "/usr/sbin/sshd -D"), 0o644),
            FileSpec::dir("/usr/share/empty.sshd", 0o711),
        ]);
    // Requires(pre): the scriptlet runs getent (glibc) and useradd/groupadd.
    p.requires_pre = vec![
        crate::spec::Dep("shadow-utils".into()),
        crate::spec::Dep("glibc".into()),
    ];
    p.pre = Some(
        "getent group sshd >/dev/null || groupadd -g 74 -r sshd || :\n\
         getent passwd sshd >/dev/null || useradd -c 'Privilege-separated SSH' -u 74 -g sshd -s /sbin/nologin -r -d /usr/share/empty.sshd sshd 2> /dev/null || :\n"
            .into(),
    );
    p.post = Some(
        "mkdir -p /var/lib/sshd\n\
         echo 'KexAlgorithms -diffie-hellman-group1-sha1' > /etc/ssh/sshd_config.d/40-strata-post.conf\n"
            .into(),
    );
    p
}

/// A package whose %post fails, as a package with a broken configuration
/// step does: rpm installs it and only warns. It exists for the error path.
fn failing_post() -> PkgSpec {
    let mut p = pkg("failing-post", "1.0", "1.el8")
        .requires(&["bash"])
        .files([FileSpec::file(
            "/usr/share/failing-post/README",
            "Its %post exits 3.\n",
            0o644,
        )]);
    p.summary = "A package whose %post fails (fixture)".into();
    p.post = Some(
        "echo 'failing-post: configuring the service'\n\
         echo 'failing-post: cannot reach the configuration service' >&2\n\
         exit 3\n"
            .into(),
    );
    p
}

fn chrony() -> PkgSpec {
    let mut p = pkg("chrony", "4.1", "1.el8")
        .requires(&["bash", "systemd"])
        .files([
            FileSpec::file(
                "/usr/sbin/chronyd",
                synth::binary("chronyd", 400_000),
                0o755,
            ),
            FileSpec::file(
                "/etc/chrony.conf",
                "pool 2.rhel.pool.ntp.org iburst\ndriftfile /var/lib/chrony/drift\n",
                0o644,
            )
            .config(),
            FileSpec::file(
                "/usr/lib/systemd/system/chronyd.service",
                unit("NTP client/server", "/usr/sbin/chronyd"),
                0o644,
            ),
            FileSpec::dir("/var/lib/chrony", 0o750).owner("chrony", "chrony"),
        ]);
    // Requires(pre): the scriptlet runs getent (glibc) and useradd/groupadd.
    p.requires_pre = vec![
        crate::spec::Dep("shadow-utils".into()),
        crate::spec::Dep("glibc".into()),
    ];
    // No fixed id: allocated dynamically, so only a previous build can keep it stable.
    p.pre = Some(
        "getent group chrony >/dev/null || groupadd -r chrony\n\
         getent passwd chrony >/dev/null || useradd -r -g chrony -d /var/lib/chrony -s /sbin/nologin chrony\n"
            .into(),
    );
    p
}

/// Open vSwitch, with its %pre creating its user as the real one does.
fn openvswitch(name: &str, version: &str, release: &str) -> PkgSpec {
    let mut p = ordinary(name, version, release, 5_000_000, &["glibc", "bash"]);
    if name != "openvswitch" {
        p.provides.push(Dep("openvswitch".into()));
    }
    p.requires_pre.push(Dep("shadow-utils".into()));
    p.requires_pre.push(Dep("glibc".into()));
    p.pre = Some(
        "getent group openvswitch >/dev/null || groupadd -r openvswitch\n\
         getent passwd openvswitch >/dev/null || useradd -r -g openvswitch -d / -s /sbin/nologin openvswitch\n"
            .into(),
    );
    p.post = Some("mkdir -p /var/lib/openvswitch /etc/openvswitch\necho 'fixture' > /etc/openvswitch/system-id.conf\n".into());
    p.build_time = OCP_TIME;
    p
}

/// NetworkManager's Open vSwitch plugin: in RHEL 8's rhocp repos, in
/// RHEL 9's AppStream.
fn network_manager_ovs() -> PkgSpec {
    ordinary(
        "NetworkManager-ovs",
        "1.36.0",
        "4.el8_6",
        150_000,
        &["NetworkManager = 1.36.0-4.el8_6", "openvswitch"],
    )
}

/// The OpenShift (or OKD) node packages of one release.
fn rhocp_packages(ing: &Ingredients, release: &str) -> Vec<PkgSpec> {
    let fl = ing.flavour;
    let (crio, tools, ovs, conmon_rs) = match release {
        "4.12" => ("1.25.4", "1.25.0", "2.17.0", "0.4.0"),
        "4.13" => ("1.26.3", "1.26.0", "3.1.0", "0.5.1"),
        "4.19" => ("1.32.3", "1.32.0", "3.5.0", "0.6.6"),
        _ => ("1.33.2", "1.33.0", "3.5.0", "0.7.1"),
    };
    let tag = format!("rhaos{release}.el{}", fl.major());
    let ocp = format!("{release}.0");
    // RHEL's cri-o: the daemon is /usr/bin/crio, its configuration in
    // /etc/crio.
    let mut cri_o = ordinary(
        "cri-o",
        crio,
        &format!("4.{tag}"),
        9_000_000,
        &["conmon", "containers-common", "runc", "iptables"],
    );
    for f in &mut cri_o.files {
        match f.path.as_str() {
            "/usr/bin/cri-o" => f.path = "/usr/bin/crio".into(),
            "/etc/cri-o.conf" => f.path = "/etc/crio/crio.conf".into(),
            _ => {}
        }
    }
    cri_o.files.push(FileSpec::dir("/etc/crio", 0o755));
    let mut pkgs = vec![
        cri_o,
        ordinary(
            "cri-tools",
            tools,
            &format!("1.{tag}"),
            4_000_000,
            &["glibc"],
        ),
        ordinary(
            "conmon-rs",
            conmon_rs,
            &format!("1.{tag}"),
            1_500_000,
            &["glibc"],
        ),
        {
            let seed = format!("kubelet-{release}");
            pkg("openshift-kubelet", &ocp, &format!("202610200000.p0.{tag}"))
                .requires(&["cri-o", "cri-tools", "util-linux"])
                .files([
                    FileSpec::file("/usr/bin/kubelet", synth::binary(&seed, 6_000_000), 0o755),
                    FileSpec::file(
                        "/usr/lib/systemd/system/kubelet.service",
                        unit("Kubernetes Kubelet", "/usr/bin/kubelet"),
                        0o644,
                    ),
                    FileSpec::dir("/etc/kubernetes", 0o755),
                    FileSpec::dir("/etc/kubernetes/manifests", 0o755),
                ])
        },
    ];
    if fl.major() == 8 {
        // RHEL 8's rhocp repos carry Open vSwitch and NetworkManager's
        // plugin for it; on RHEL 9 they are Fast Datapath's and AppStream's.
        pkgs.push(openvswitch("openvswitch", ovs, &format!("1.{tag}")));
        pkgs.push(network_manager_ovs());
    }
    if release == "4.13" {
        // On RHEL 8, Ignition comes with the node layer (4.12's repo has it
        // too in reality; the fixture's 4.12 layer leaves the initramfs
        // alone, to test a release that touches nothing dracut reads).
        pkgs.extend(ignition(ing, &tag));
        // crun needs a newer libseccomp than the base has: the repo carries
        // it, so deriving crun needs allow-base-upgrade.
        pkgs.push(ordinary(
            "crun",
            "1.8.4",
            &format!("1.{tag}"),
            500_000,
            &["libseccomp >= 2.5.3"],
        ));
        let release = format!("1.{tag}");
        pkgs.push(rebuilt(
            real(ing, "libseccomp", "2.5.3", &release, &["libseccomp2"]),
            "/usr/lib64/libseccomp.so.2.5.4",
            &release,
        ));
    }
    for p in &mut pkgs {
        p.build_time = OCP_TIME;
    }
    pkgs
}

/// Where RHEL's ignition package keeps Ignition's dracut module; the
/// `ignition` binary lives inside it, and the module installs it into the
/// initramfs as `/usr/bin/ignition` (the root filesystem has no Ignition).
const IGNITION_MODULE: &str = "/usr/lib/dracut/modules.d/30ignition";

/// The module's dependencies as Ignition 2.14 ships them, and as the
/// fixture has them: `url-lib` and `network` (dracut-network, curl, a
/// network stack in the initramfs) only serve configs fetched over the
/// network, and the fixture has no real curl or network stack.
const IGNITION_DEPENDS: (&str, &str) = ("echo qemu systemd url-lib network", "echo qemu systemd");

/// Ignition as RHEL 8's rhocp repos ship it: Debian's ignition 2.14 with
/// the layout of RHEL's package, the dracut module `30ignition` (units,
/// generator, `module-setup.sh`, and the `ignition` binary itself) in
/// `ignition`, and `/usr/bin/ignition-validate` in `ignition-validate`.
/// The module has no `check()`, so a `--no-hostonly` dracut includes it
/// once it is in the tree: the node layer that adds it must regenerate the
/// initramfs. Its generator only queues Ignition's stages with
/// `ignition.firstboot` on the kernel command line.
fn ignition(ing: &Ingredients, tag: &str) -> Vec<PkgSpec> {
    let release = format!("1.{tag}");
    let mut all = real(ing, "ignition", "2.14.0", &release, &["ignition"]);
    let validate_files = split_off(&mut all, &["/usr/bin/ignition-validate"]);
    let mut main = all;
    main.files.retain(|f| f.path.starts_with(IGNITION_MODULE));
    let setup = format!("{IGNITION_MODULE}/module-setup.sh");
    for f in &mut main.files {
        if let (true, FileKind::File(content)) = (f.path == setup, &mut f.kind) {
            let text = String::from_utf8(content.clone()).expect("module-setup.sh is text");
            let (from, to) = IGNITION_DEPENDS;
            assert!(
                text.contains(from),
                "Debian's {setup} changed: {from:?} is gone"
            );
            *content = text.replace(from, to).into_bytes();
        }
    }
    for d in ["/usr/lib/dracut", "/usr/lib/dracut/modules.d"] {
        main.files.retain(|f| f.path != d);
    }
    let (provides, requires) = debian::elf_deps(&main.files);
    main.provides = provides.into_iter().map(Dep).collect();
    main.requires = requires.into_iter().map(Dep).collect();
    main = main.requires(&["dracut", "systemd", "util-linux", "bash"]);
    main.summary = "First boot installer and configuration tool (Debian's ignition)".into();
    let (provides, requires) = debian::elf_deps(&validate_files);
    let mut validate = pkg("ignition-validate", "2.14.0", &release).files(validate_files);
    validate.provides.extend(provides.into_iter().map(Dep));
    validate.requires.extend(requires.into_iter().map(Dep));
    validate.summary = "Validation tool for Ignition configs (Debian's ignition)".into();
    vec![main, validate]
}

fn epel_packages() -> Vec<PkgSpec> {
    let mut pkgs = vec![
        // Shadows RHEL's bash with a higher version: must never win.
        pkg("bash", "5.2.15", "1.el8")
            .requires(&["coreutils"])
            .provides(&["/bin/sh", "/bin/bash"])
            .files([FileSpec::file(
                "/usr/bin/bash",
                "#!/usr/bin/sh\necho 'epel bash'\n",
                0o755,
            )]),
        ordinary("htop", "3.2.1", "1.el8", 300_000, &["glibc"]),
        ordinary("ripgrep", "13.0.0", "1.el8", 4_000_000, &["glibc"]),
    ];
    for p in &mut pkgs {
        p.build_time = OCP_TIME;
    }
    pkgs
}

/// `n` synthetic packages for benchmarks: most small, a few tens of MB.
fn scale_packages(n: usize) -> Vec<PkgSpec> {
    (0..n)
        .map(|i| {
            let size = if i % 100 == 99 {
                20_000_000 + (i % 7) * 2_000_000
            } else if i % 20 == 19 {
                2_000_000 + (i % 5) * 1_000_000
            } else {
                10_000 + (i * 7919) % 290_000
            };
            ordinary(
                &format!("strata-scale-{i:04}"),
                "1.0",
                "1.el8",
                size,
                &["glibc"],
            )
        })
        .collect()
}

/// The repositories of the OpenShift node packages. RHEL 8: one rhocp
/// repo per release with all of them. RHEL 9: Open vSwitch comes from Fast
/// Datapath. OKD on CentOS Stream 9: cri-o and its tools from the Cloud
/// SIG's OKD repo, Open vSwitch from the NFV SIG, and the kubelet from
/// Red Hat's rhocp repo (OKD builds take `openshift-*` from there).
fn node_repos(ing: &Ingredients) -> Vec<RepoSpec> {
    let fl = ing.flavour;
    let mut out = Vec::new();
    let repo = |id: String, name: String, signer: Signer, packages: Vec<PkgSpec>| RepoSpec {
        dir: id.clone(),
        id,
        name,
        signer,
        packages,
    };
    for release in fl.releases() {
        let mut packages = rhocp_packages(ing, release);
        let rhocp = format!("rhocp-{release}-for-rhel-{}", fl.major());
        let rhocp_name = format!(
            "Red Hat OpenShift Container Platform {release} for RHEL {} (fixture)",
            fl.major()
        );
        if fl.is_centos() {
            let kubelet = packages
                .iter()
                .position(|p| p.name == "openshift-kubelet")
                .map(|i| packages.remove(i))
                .into_iter()
                .collect();
            out.push(repo(rhocp, rhocp_name, Signer::RedHat, kubelet));
            out.push(repo(
                format!("c9s-sig-cloud-okd-{release}"),
                format!("CentOS Stream 9 - SIG Cloud OKD {release} (fixture)"),
                Signer::CloudSig,
                packages,
            ));
        } else {
            out.push(repo(rhocp, rhocp_name, Signer::Release, packages));
        }
    }
    if fl.major() >= 9 {
        let ovs = |release: &str| vec![openvswitch("openvswitch3.5", "3.5.0", release)];
        out.push(if fl.is_centos() {
            repo(
                "c9s-sig-nfv".into(),
                "CentOS Stream 9 - SIG NFV (fixture)".into(),
                Signer::NfvSig,
                ovs("19.el9s"),
            )
        } else {
            repo(
                "fast-datapath-for-rhel-9".into(),
                "Fast Datapath for RHEL 9 (fixture)".into(),
                Signer::Release,
                ovs("19.el9fdp"),
            )
        });
    }
    out
}

/// Every repository of the fixture.
pub fn repos(ing: &Ingredients) -> Vec<RepoSpec> {
    let fl = ing.flavour;
    let mut out = Vec::new();
    for (i, snap) in SNAPSHOTS.iter().enumerate() {
        let (baseos, appstream) = os_packages(ing, i == 1);
        for (kind, packages) in [("baseos", baseos), ("appstream", appstream)] {
            let id = format!("{}-{kind}", fl.name());
            out.push(RepoSpec {
                name: fl.os_repo_name(kind, snap),
                dir: format!("snapshots/{snap}/{id}"),
                id,
                signer: Signer::Release,
                packages,
            });
        }
    }
    out.extend(node_repos(ing));
    out.push(RepoSpec {
        id: fl.epel_id(),
        name: format!(
            "Extra Packages for Enterprise Linux {} (fixture)",
            fl.major()
        ),
        dir: fl.epel_id(),
        signer: Signer::Epel,
        packages: epel_packages(),
    });
    if ing.scale > 0 {
        out.push(RepoSpec {
            id: format!("{}-scale", fl.name()),
            name: format!("Synthetic packages for benchmarks ({})", ing.scale),
            dir: "scale".into(),
            signer: Signer::Release,
            packages: scale_packages(ing.scale),
        });
    }
    adapt(fl, &mut out);
    out
}

/// Gives the packages the flavour's versions (`Flavour::evr`): the OS
/// repositories' from RHEL 9's table, the others (node, EPEL, synthetic)
/// only the flavour's dist tag; then points the dependencies on an exact
/// version (`NetworkManager = …`) at the new one. The kernel's releases
/// are the flavour's already.
fn adapt(fl: Flavour, repos: &mut [RepoSpec]) {
    let mut renamed: BTreeMap<String, (String, String)> = BTreeMap::new();
    for r in repos.iter_mut() {
        let os = r.dir.starts_with("snapshots/");
        for p in r
            .packages
            .iter_mut()
            .filter(|p| !p.name.starts_with("kernel"))
        {
            let old = format!("{}-{}", p.version, p.release);
            if os {
                (p.version, p.release) = fl.evr(
                    &p.name,
                    &p.version,
                    &p.release,
                    p.build_time == ZSTREAM_TIME,
                );
            } else {
                p.release = fl.retag(&p.release);
            }
            let new = format!("{}-{}", p.version, p.release);
            if new != old {
                renamed.insert(p.name.clone(), (old, new));
            }
        }
    }
    for p in repos.iter_mut().flat_map(|r| r.packages.iter_mut()) {
        for d in p.requires.iter_mut() {
            let mut words = d.0.split(' ');
            if let (Some(name), Some("="), Some(evr), None) =
                (words.next(), words.next(), words.next(), words.next())
            {
                if let Some((_, new)) = renamed.get(name).filter(|(old, _)| old == evr) {
                    d.0 = format!("{name} = {new}");
                }
            }
        }
    }
}
