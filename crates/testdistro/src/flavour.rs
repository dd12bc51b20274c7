//! Which distribution a fixture imitates: RHEL 8.6 (the default, for
//! OpenShift 4.12), RHEL 9.6 (OpenShift 4.19 and 4.20) or CentOS Stream 9
//! (OKD). docs/fixture.md lists what differs and where each fact is from.
//!
//! The package contents are the same Debian programs in every flavour; what
//! differs is what a tree builder sees: package versions and dist tags, the
//! release package and os-release, the signing keys, the repositories, the
//! EFI vendor directory, and RHEL 9's kernel split (kernel-modules-core).

use std::fmt;

/// A distribution the fixture can imitate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flavour {
    /// RHEL 8.6, the base of OpenShift 4.12.
    #[default]
    Rhel86,
    /// RHEL 9.6, the base of OpenShift 4.19 and 4.20.
    Rhel96,
    /// CentOS Stream 9, the base of OKD (SCOS).
    C9s,
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Flavour {
    pub const ALL: [Flavour; 3] = [Flavour::Rhel86, Flavour::Rhel96, Flavour::C9s];

    /// The name `strata fixture --flavour` takes, which is also the prefix
    /// of the flavour's OS repository ids (`rhel-9.6-baseos`, `c9s-baseos`).
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Rhel86 => "rhel-8.6",
            Flavour::Rhel96 => "rhel-9.6",
            Flavour::C9s => "c9s",
        }
    }

    pub fn parse(name: &str) -> Option<Flavour> {
        Flavour::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The major release: `$releasever`.
    pub fn major(self) -> u32 {
        match self {
            Flavour::Rhel86 => 8,
            Flavour::Rhel96 | Flavour::C9s => 9,
        }
    }

    pub fn is_centos(self) -> bool {
        self == Flavour::C9s
    }

    /// The OpenShift (or OKD) releases whose node packages the flavour's
    /// node repositories carry.
    pub fn releases(self) -> &'static [&'static str] {
        match self {
            Flavour::Rhel86 => &["4.12", "4.13"],
            Flavour::Rhel96 | Flavour::C9s => &["4.19", "4.20"],
        }
    }

    /// The OS repositories' display names.
    pub fn os_repo_name(self, kind: &str, snapshot: &str) -> String {
        let kind = match kind {
            "baseos" => "BaseOS",
            _ => "AppStream",
        };
        match self {
            Flavour::Rhel86 => {
                format!("Red Hat Enterprise Linux 8.6 - {kind} (fixture snapshot {snapshot})")
            }
            Flavour::Rhel96 => {
                format!("Red Hat Enterprise Linux 9.6 - {kind} (fixture snapshot {snapshot})")
            }
            Flavour::C9s => format!("CentOS Stream 9 - {kind} (fixture compose {snapshot})"),
        }
    }

    pub fn epel_id(self) -> String {
        format!("epel-{}", self.major())
    }

    /// The directory under `/boot/efi/EFI` that shim and GRUB live in, and
    /// GRUB's prefix.
    pub fn efi_vendor(self) -> &'static str {
        match self {
            Flavour::Rhel86 | Flavour::Rhel96 => "redhat",
            Flavour::C9s => "centos",
        }
    }

    /// The distribution's name as shim's boot entry and os-release say it.
    pub(crate) fn os_name(self) -> &'static str {
        match self {
            Flavour::Rhel86 | Flavour::Rhel96 => "Red Hat Enterprise Linux",
            Flavour::C9s => "CentOS Stream",
        }
    }

    /// kernel-core's release in the first and in the z-stream snapshot.
    pub fn kernel_release(self, zstream: bool) -> &'static str {
        match (self, zstream) {
            (Flavour::Rhel86, false) => "57.el8_6",
            (Flavour::Rhel86, true) => "57.1.el8_6",
            (Flavour::Rhel96, false) => "570.12.1.el9_6",
            (Flavour::Rhel96, true) => "570.17.1.el9_6",
            (Flavour::C9s, false) => "570.el9",
            (Flavour::C9s, true) => "571.el9",
        }
    }

    /// RHEL 9 splits the modules a machine boots with out of kernel-core
    /// into kernel-modules-core.
    pub(crate) fn has_kernel_modules_core(self) -> bool {
        self.major() >= 9
    }

    /// A package's (version, release) in this flavour, from its RHEL 8.6
    /// ones: RHEL 9's version where the table below has it, otherwise the
    /// 8.6 version with the flavour's dist tag.
    /// `rebuilt`: the package is a z-stream snapshot's rebuild, whose RHEL
    /// 9 release is the table's with `.1` appended.
    pub(crate) fn evr(
        self,
        name: &str,
        version: &str,
        release: &str,
        rebuilt: bool,
    ) -> (String, String) {
        if self == Flavour::Rhel86 {
            return (version.into(), release.into());
        }
        match EL9.iter().find(|(n, _, _)| *n == name) {
            Some((_, v, r)) if rebuilt => (v.to_string(), format!("{}.1", self.retag(r))),
            Some((_, v, r)) => (v.to_string(), self.retag(r)),
            None => (version.into(), self.retag(release)),
        }
    }

    /// `release` (an el8 or el9 release) with this flavour's dist tag: RHEL
    /// 9.6 keeps `el9_N` z-stream tags, CentOS Stream has none, and el8
    /// module tags (`module+el8.6.0`) become plain `el9` (RHEL 9 has no
    /// modular container tools).
    pub(crate) fn retag(self, release: &str) -> String {
        if self == Flavour::Rhel86 {
            return release.into();
        }
        // A release has one dist tag: `el8`, `el8_6`, `el8_6.1`,
        // `module+el8.6.0`, `el9_6`.
        let Some(at) = [release.find("el8"), release.find("el9")]
            .into_iter()
            .flatten()
            .min()
        else {
            return release.into();
        };
        let (head, tail) = release.split_at(at);
        let head = head.strip_suffix("module+").unwrap_or(head);
        let end = tail[3..]
            .find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.'))
            .map_or(tail.len(), |i| i + 3);
        // `_<minor>` and a z-stream rebuild's `.1`; a module's `.6.0` goes.
        let z = tail[3..end]
            .strip_prefix('_')
            .map(|s| s.split_once('.').unwrap_or((s, "")));
        let mut out = format!("{head}el9");
        if let (Flavour::Rhel96, Some((minor, _))) = (self, z) {
            out.push('_');
            out.push_str(if tail.starts_with("el8") { "6" } else { minor });
        }
        if let Some((_, rebuild)) = z.filter(|(_, r)| !r.is_empty()) {
            out.push('.');
            out.push_str(rebuild);
        }
        out.push_str(&tail[end..]);
        out
    }
}

/// RHEL 9.6's versions of the fixture's packages (name, version, release),
/// as its BaseOS and AppStream had them; the release's dist tag is
/// rewritten per flavour (`el9_6` stays on RHEL, becomes `el9` on CentOS).
const EL9: &[(&str, &str, &str)] = &[
    ("setup", "2.13.7", "10.el9"),
    ("filesystem", "3.16", "5.el9"),
    ("basesystem", "11", "13.el9"),
    ("glibc", "2.34", "168.el9_6"),
    ("nss-altfiles", "2.18.1", "20.el9"),
    ("shadow-utils", "4.9", "12.el9"),
    ("shadow-utils-subid", "4.9", "12.el9"),
    ("passwd", "0.80", "12.el9"),
    ("bash", "5.1.8", "9.el9"),
    ("gmp", "6.2.0", "13.el9"),
    ("gawk", "5.1.0", "6.el9"),
    ("findutils", "4.8.0", "7.el9"),
    ("openssl-libs", "3.2.2", "6.el9_5"),
    ("systemd", "252", "51.el9"),
    ("systemd-udev", "252", "51.el9"),
    ("systemd-libs", "252", "51.el9"),
    ("dracut", "057", "87.git20250311.el9_6"),
    ("shim-x64", "15.8", "4.el9_3"),
    ("grub2-efi-x64", "2.06", "104.el9_6"),
    ("grub2-pc", "2.06", "104.el9_6"),
    ("grub2-pc-modules", "2.06", "104.el9_6"),
    ("openssh-server", "8.7p1", "45.el9"),
    ("chrony", "4.6.1", "1.el9"),
    ("libgcc", "11.5.0", "5.el9_5"),
    ("ncurses-libs", "6.2", "10.20210508.el9"),
    ("libacl", "2.3.1", "4.el9"),
    ("libattr", "2.5.1", "3.el9"),
    ("mpfr", "4.1.0", "7.el9"),
    ("readline", "8.1", "4.el9"),
    ("libsigsegv", "2.13", "4.el9"),
    ("libselinux", "3.6", "3.el9"),
    ("libselinux-utils", "3.6", "3.el9"),
    ("pcre2", "10.40", "6.el9"),
    ("libsepol", "3.6", "2.el9"),
    ("libsemanage", "3.6", "5.el9_6"),
    ("audit-libs", "3.1.5", "4.el9"),
    ("audit", "3.1.5", "4.el9"),
    ("libcap-ng", "0.8.2", "7.el9"),
    ("libcap", "2.48", "9.el9_2"),
    ("bzip2-libs", "1.0.8", "10.el9_5"),
    ("pam", "1.5.1", "23.el9"),
    ("libxcrypt", "4.4.18", "3.el9"),
    ("libblkid", "2.37.4", "21.el9"),
    ("libmount", "2.37.4", "21.el9"),
    ("libsmartcols", "2.37.4", "21.el9"),
    ("libuuid", "2.37.4", "21.el9"),
    ("libfdisk", "2.37.4", "21.el9"),
    ("util-linux", "2.37.4", "21.el9"),
    ("libseccomp", "2.5.2", "2.el9"),
    ("cryptsetup-libs", "2.7.2", "3.el9_6"),
    ("cryptsetup", "2.7.2", "3.el9_6"),
    ("device-mapper-libs", "1.02.202", "6.el9"),
    ("json-c", "0.14", "11.el9"),
    ("libargon2", "20171227", "9.el9"),
    ("p11-kit", "0.25.3", "3.el9_5"),
    ("libffi", "3.4.2", "8.el9"),
    ("iptables-libs", "1.8.10", "11.el9_5"),
    ("iptables", "1.8.10", "11.el9_5"),
    ("libgcrypt", "1.10.0", "11.el9"),
    ("libgpg-error", "1.42", "5.el9"),
    ("lz4-libs", "1.9.3", "5.el9"),
    ("xz-libs", "5.2.5", "8.el9_0"),
    ("libzstd", "1.5.5", "1.el9"),
    ("zlib", "1.2.11", "40.el9"),
    ("kmod-libs", "28", "10.el9"),
    ("kmod", "28", "10.el9"),
    ("coreutils", "8.32", "39.el9"),
    ("sed", "4.8", "9.el9"),
    ("grep", "3.6", "5.el9"),
    ("gzip", "1.12", "1.el9"),
    ("cpio", "2.13", "16.el9"),
    ("tzdata", "2025b", "1.el9"),
    ("NetworkManager", "1.52.0", "4.el9_6"),
    ("NetworkManager-ovs", "1.52.0", "4.el9_6"),
    ("e2fsprogs", "1.46.5", "7.el9"),
    ("xfsprogs", "6.4.0", "5.el9"),
    ("lvm2", "2.03.28", "6.el9"),
    ("nftables", "1.0.9", "3.el9"),
    ("sudo", "1.9.5p2", "10.el9_3"),
    ("selinux-policy", "38.1.53", "2.el9"),
    ("selinux-policy-targeted", "38.1.53", "2.el9"),
    ("selinux-policy-minimum", "38.1.53", "2.el9"),
    ("policycoreutils", "3.6", "2.1.el9"),
    ("nfs-utils", "2.5.4", "34.el9"),
    ("iscsi-initiator-utils", "6.2.1.9", "1.gita65a472.el9"),
    ("rpm", "4.16.1.3", "37.el9"),
    ("rpm-libs", "4.16.1.3", "37.el9"),
    ("popt", "1.18", "8.el9"),
    ("libdb", "5.3.28", "55.el9"),
    ("sqlite-libs", "3.34.1", "7.el9_3"),
    ("lua-libs", "5.4.4", "4.el9"),
    ("libstdc++", "11.5.0", "5.el9_5"),
    ("tar", "1.34", "7.el9"),
    ("less", "590", "5.el9"),
    ("vim-minimal", "8.2.2637", "21.el9"),
    ("dbus", "1.12.20", "8.el9"),
    ("kexec-tools", "2.0.29", "5.el9"),
    ("bootupd", "0.2.27", "1.el9"),
    ("conmon", "2.1.12", "1.el9"),
    ("runc", "1.2.4", "2.el9"),
    ("containers-common", "1", "117.el9_6"),
    ("container-selinux", "2.235.0", "1.el9_6"),
    ("podman", "5.4.0", "9.el9_6"),
    ("skopeo", "1.18.1", "1.el9"),
    ("jq", "1.6", "17.el9"),
    ("ostree", "2025.2", "1.el9_6"),
    ("rpm-ostree", "2025.7", "1.el9_6"),
    ("ignition", "2.20.0", "1.el9"),
    ("ignition-validate", "2.20.0", "1.el9"),
    ("strata-boot-check", "1.0", "1.el9"),
    ("failing-post", "1.0", "1.el9"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Flavour::ALL {
            assert_eq!(Flavour::parse(f.name()), Some(f));
        }
        assert_eq!(Flavour::parse("rhel-9"), None);
    }

    #[test]
    fn retag() {
        let cases = [
            ("35.el8", "35.el9", "35.el9"),
            ("58.el8_6", "58.el9_6", "58.el9"),
            ("7.el8_6.1", "7.el9_6.1", "7.el9.1"),
            ("6.module+el8.6.0", "6.el9", "6.el9"),
            ("4.git095f59c.el8", "4.git095f59c.el9", "4.git095f59c.el9"),
            ("168.el9_6", "168.el9_6", "168.el9"),
            ("9.el9_3", "9.el9_3", "9.el9"),
            ("1.rhaos4.19.el9", "1.rhaos4.19.el9", "1.rhaos4.19.el9"),
        ];
        for (el8, rhel, centos) in cases {
            assert_eq!(Flavour::Rhel96.retag(el8), rhel, "{el8}");
            assert_eq!(Flavour::C9s.retag(el8), centos, "{el8}");
            assert_eq!(Flavour::Rhel86.retag(el8), el8);
        }
    }

    #[test]
    fn evr_from_the_table() {
        assert_eq!(
            Flavour::Rhel96.evr("glibc", "2.28", "189.5.el8_6", false),
            ("2.34".into(), "168.el9_6".into())
        );
        assert_eq!(
            Flavour::Rhel96.evr("glibc", "2.28", "189.6.el8_6", true),
            ("2.34".into(), "168.el9_6.1".into())
        );
        assert_eq!(
            Flavour::C9s.evr("glibc", "2.28", "189.5.el8_6", false),
            ("2.34".into(), "168.el9".into())
        );
        assert_eq!(
            Flavour::C9s.evr("htop", "3.2.1", "1.el8", false),
            ("3.2.1".into(), "1.el9".into())
        );
        assert_eq!(
            Flavour::Rhel86.evr("glibc", "2.28", "189.5.el8_6", false),
            ("2.28".into(), "189.5.el8_6".into())
        );
    }
}
