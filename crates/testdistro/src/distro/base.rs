//! The RHEL base packages of the fixture: glibc, shadow-utils, bash and
//! the rest of the userland from Debian's programs, setup's accounts,
//! SELinux's policy packages, filesystem, the release packages, and the
//! packages whose scriptlets do what RHEL's do (sshd's fixed ids, chrony's
//! dynamic ones, a %post that fails).

use super::*;

/// glibc: Debian's libc6 and libc-bin. ldconfig runs from a shell file
/// trigger after every transaction that adds libraries, as RHEL's glibc
/// does. RHEL 8's glibc also runs it from a lua %post; the rpm crate
/// records a lua scriptlet's interpreter as a dependency on `<lua>` that
/// nothing provides, so the fixture has no %post (the loader finds the
/// libraries without a cache until the trigger writes it). rpm passes
/// every scriptlet with a body its instance counts, which ldconfig would
/// take for directories, so it is never the interpreter itself.
pub(super) fn glibc(ing: &Ingredients, zstream: bool) -> PkgSpec {
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

pub(super) const NSSWITCH: &str = "\
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
pub(super) const LOGIN_DEFS: &str = "\
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

pub(super) const USERADD_DEFAULTS: &str = "\
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
pub(super) fn shadow_utils(ing: &Ingredients) -> (PkgSpec, PkgSpec) {
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
pub(super) fn nss_altfiles(ing: &Ingredients) -> PkgSpec {
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
pub(super) fn bash(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "bash", "4.4.20", "4.el8_6", &["bash"])
        .requires(&["filesystem"])
        .provides(&["/bin/sh", "/bin/bash"]);
    put(&mut p, FileSpec::symlink("/usr/bin/sh", "bash"));
    p
}

/// gawk, which RHEL installs as awk too (Debian picks awk by alternatives).
pub(super) fn gawk(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "gawk", "4.2.1", "4.el8", &["gawk"]);
    put(&mut p, FileSpec::symlink("/usr/bin/awk", "gawk"));
    p
}

pub(super) fn gmp(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "gmp", "6.1.2", "10.el8", &["libgmp10"]);
    p.epoch = 1;
    p
}

pub(super) fn findutils(ing: &Ingredients) -> PkgSpec {
    let mut p = real(ing, "findutils", "4.6.0", "20.el8", &["findutils"]);
    p.epoch = 1;
    p
}

pub(super) fn openssl_libs(ing: &Ingredients, zstream: bool) -> PkgSpec {
    let release = if zstream { "7.el8_6.1" } else { "7.el8_6" };
    let mut p = real(ing, "openssl-libs", "1.1.1k", release, &["libssl3"]);
    p.epoch = 1;
    if zstream {
        p = rebuilt(p, "/usr/lib64/libcrypto.so.3", release);
    }
    p
}

/// rpm and rpm-libs from Debian 11's rpm 4.16, which reads and writes
/// Berkeley DB databases as RHEL 8's rpm (4.14) does (Debian 12's 4.18 only
/// reads them): the tree's own rpm, which queries and layers packages on a
/// node. The query, verify and key tools only (rpmbuild and rpmsign are
/// RHEL's rpm-build and rpm-sign; the plugins are rpm-plugin-*). The
/// macros say what RHEL's do: the database in /var/lib/rpm (Debian's rpm
/// keeps one per user), Berkeley DB on RHEL 8 and sqlite from RHEL 9.
pub(super) fn rpm(ing: &Ingredients) -> (PkgSpec, PkgSpec) {
    const KEPT: &[&str] = &[
        "/usr/bin/rpm",
        "/usr/bin/rpmdb",
        "/usr/bin/rpmkeys",
        "/usr/bin/rpmquery",
        "/usr/bin/rpmverify",
        "/usr/lib/rpm",
        "/usr/lib/rpm/macros",
        "/usr/lib/rpm/macros.d",
        "/usr/lib/rpm/rpmrc",
        "/var/lib/rpm",
    ];
    let (version, release) = ("4.14.3", "23.el8");
    let mut p = real(ing, "rpm", version, release, &["rpm", "rpm-common"]);
    p.files.retain(|f| {
        KEPT.contains(&f.path.as_str())
            || f.path.starts_with("/usr/lib/rpm/platform/")
            || f.path.starts_with("/usr/lib/rpm/rpmpopt-")
    });
    let backend = if ing.flavour.major() >= 9 {
        "sqlite"
    } else {
        "bdb"
    };
    for f in &mut p.files {
        if let (true, FileKind::File(content)) = (f.path == "/usr/lib/rpm/macros", &mut f.kind) {
            let text = String::from_utf8(content.clone()).expect("rpm's macros are text");
            let patched: Vec<String> = text
                .lines()
                .map(|l| match l.split_whitespace().next() {
                    Some("%_dbpath") => "%_dbpath\t\t%{_var}/lib/rpm".to_string(),
                    Some("%_db_backend") => format!("%_db_backend\t      {backend}"),
                    _ => l.to_string(),
                })
                .collect();
            assert!(
                patched.iter().any(|l| l.contains("{_var}/lib/rpm"))
                    && patched.iter().any(|l| l.ends_with(backend)),
                "Debian's rpm macros no longer set %_dbpath and %_db_backend"
            );
            *content = (patched.join("\n") + "\n").into_bytes();
        }
    }
    let (_, requires) = debian::elf_deps(&p.files);
    p.requires = requires.into_iter().map(Dep).collect();
    p = p.requires(&[&format!("rpm-libs = {version}-{release}")]);
    let libs = real(ing, "rpm-libs", version, release, &["librpm9", "librpmio9"])
        .requires(&[&format!("rpm = {version}-{release}")]);
    (p, libs)
}

/// Libraries and tools taken whole from Debian: RHEL name, version,
/// release, Debian packages.
pub(super) const REAL: &[(&str, &str, &str, &[&str])] = &[
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
    ("popt", "1.18", "1.el8", &["libpopt0"]),
    ("libdb", "5.3.28", "42.el8_4", &["libdb5.3"]),
    ("sqlite-libs", "3.26.0", "15.el8", &["libsqlite3-0"]),
    ("lua-libs", "5.3.4", "12.el8", &["liblua5.2-0"]),
    ("libstdc++", "8.5.0", "10.el8", &["libstdc++6"]),
    // libostree and what it links (RHEL's libcurl has neither rtmp nor
    // libssh2; Debian's links both, so they come with it).
    ("ostree-libs", "2022.2", "5.el8", &["libostree-1-1"]),
    ("fuse3-libs", "3.3.0", "15.el8", &["libfuse3-3"]),
    ("glib2", "2.56.4", "158.el8", &["libglib2.0-0"]),
    ("libarchive", "3.3.3", "3.el8_5", &["libarchive13"]),
    ("libxml2", "2.9.7", "13.el8", &["libxml2"]),
    ("libicu", "60.3", "2.el8_1", &["libicu72"]),
    ("gpgme", "1.13.1", "11.el8", &["libgpgme11"]),
    ("libassuan", "2.5.1", "3.el8", &["libassuan0"]),
    (
        "libcurl",
        "7.61.1",
        "22.el8",
        &["libcurl3-gnutls", "librtmp1", "libssh2-1"],
    ),
    ("brotli", "1.0.6", "3.el8", &["libbrotli1"]),
    (
        "krb5-libs",
        "1.18.2",
        "14.el8",
        &[
            "libgssapi-krb5-2",
            "libk5crypto3",
            "libkrb5-3",
            "libkrb5support0",
        ],
    ),
    ("keyutils-libs", "1.5.10", "9.el8", &["libkeyutils1"]),
    ("libcom_err", "1.45.6", "4.el8", &["libcom-err2"]),
    ("openldap", "2.4.46", "18.el8", &["libldap-2.5-0"]),
    ("cyrus-sasl-lib", "2.1.27", "6.el8_5", &["libsasl2-2"]),
    ("libnghttp2", "1.33.0", "3.el8_2.1", &["libnghttp2-14"]),
    ("libpsl", "0.20.2", "6.el8", &["libpsl5"]),
    ("gnutls", "3.6.16", "4.el8", &["libgnutls30"]),
    ("nettle", "3.4.1", "7.el8", &["libhogweed6", "libnettle8"]),
    ("libidn2", "2.2.0", "1.el8", &["libidn2-0"]),
    ("libunistring", "0.9.9", "3.el8", &["libunistring2"]),
    ("libtasn1", "4.13", "3.el8", &["libtasn1-6"]),
    (
        "avahi-libs",
        "0.7",
        "20.el8",
        &["libavahi-client3", "libavahi-common3"],
    ),
    ("avahi-glib", "0.7", "20.el8", &["libavahi-glib1"]),
    ("dbus-libs", "1.12.8", "18.el8", &["libdbus-1-3"]),
];

/// The users and groups RHEL 8's setup package ships (its uidgid table).
pub(super) const SETUP_PASSWD: &str = "\
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
pub(super) const SETUP_GROUP: &str = "\
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
pub(super) fn shadow_of(entries: &str, rest: &str) -> String {
    entries
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(|name| format!("{name}{rest}\n"))
        .collect()
}

/// The flavour's baseos and appstream (`rhel-8.6-baseos`, `c9s-appstream`,
/// …) as of a snapshot.
pub(super) fn os_packages(ing: &Ingredients, zstream: bool) -> (Vec<PkgSpec>, Vec<PkgSpec>) {
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
    let (rpm, rpm_libs) = rpm(ing);
    baseos.extend([rpm, rpm_libs]);
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
pub(super) fn selinux_policy_common() -> PkgSpec {
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
pub(super) fn policycoreutils(ing: &Ingredients) -> PkgSpec {
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
pub(super) const FILE_CONTEXTS: &str = "\
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
pub(super) fn selinux_policy() -> PkgSpec {
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
pub(super) const FILESYSTEM_DIRS: &[&str] = &[
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
    // where scriptlets leave notes for later ones (the kernel's do)
    "/var/lib/rpm-state",
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

pub(super) fn filesystem_files() -> Vec<FileSpec> {
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
pub(super) fn release_packages(
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

pub(super) fn openssh_server() -> PkgSpec {
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
    // Requires(pre): the scriptlet runs getent (glibc) and useradd/groupadd;
    // %post runs mkdir (coreutils).
    p.requires_pre = vec![
        crate::spec::Dep("shadow-utils".into()),
        crate::spec::Dep("glibc".into()),
        crate::spec::Dep("coreutils".into()),
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
pub(super) fn failing_post() -> PkgSpec {
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

pub(super) fn chrony() -> PkgSpec {
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
    // Requires(pre): the scriptlet runs getent (glibc) and useradd/groupadd;
    // %post runs mkdir (coreutils).
    p.requires_pre = vec![
        crate::spec::Dep("shadow-utils".into()),
        crate::spec::Dep("glibc".into()),
        crate::spec::Dep("coreutils".into()),
    ];
    // No fixed id: allocated dynamically, so only a previous build can keep it stable.
    p.pre = Some(
        "getent group chrony >/dev/null || groupadd -r chrony\n\
         getent passwd chrony >/dev/null || useradd -r -g chrony -d /var/lib/chrony -s /sbin/nologin chrony\n"
            .into(),
    );
    p
}
