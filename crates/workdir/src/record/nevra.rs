//! Package names and versions as rpm orders them: the name of a NEVRA, and
//! whether one epoch-version-release is newer than another (rpm's
//! `rpmvercmp`), for the package diffs of a build's records.

/// The name of `name-[epoch:]version-release.arch`.
pub fn nevra_name(nevra: &str) -> &str {
    nevra.rsplitn(3, '-').nth(2).unwrap_or(nevra)
}

/// `[name, [epoch:]version-release, arch]`.
pub(super) fn nevra_parts(nevra: &str) -> [&str; 3] {
    let name = nevra_name(nevra);
    let rest = nevra.get(name.len() + 1..).unwrap_or("");
    let (evr, arch) = rest.rsplit_once('.').unwrap_or((rest, ""));
    [name, evr, arch]
}

/// Whether `new`'s EVR sorts after `old`'s (rpm's comparison of epoch,
/// version and release, segment by segment).
pub(super) fn evr_newer(new: &str, old: &str) -> bool {
    let evr = |n: &str| -> (u64, String, String) {
        let [_, evr, _] = nevra_parts(n);
        let (epoch, vr) = match evr.split_once(':') {
            Some((e, vr)) => (e.parse().unwrap_or(0), vr),
            None => (0, evr),
        };
        let (v, r) = vr.rsplit_once('-').unwrap_or((vr, ""));
        (epoch, v.to_string(), r.to_string())
    };
    let (a, b) = (evr(new), evr(old));
    a.0.cmp(&b.0)
        .then_with(|| rpmvercmp(&a.1, &b.1))
        .then_with(|| rpmvercmp(&a.2, &b.2))
        .is_gt()
}

/// rpm's version segment comparison: alphanumeric runs compared as numbers
/// or strings (numbers are newer), `~` sorts before anything.
fn rpmvercmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        let skip = |s: &[u8]| -> usize {
            s.iter()
                .take_while(|c| !c.is_ascii_alphanumeric() && **c != b'~')
                .count()
        };
        a = &a[skip(a)..];
        b = &b[skip(b)..];
        match (a.first() == Some(&b'~'), b.first() == Some(&b'~')) {
            (true, true) => {
                a = &a[1..];
                b = &b[1..];
                continue;
            }
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        if a.is_empty() || b.is_empty() {
            return a.len().cmp(&b.len());
        }
        let numeric = a[0].is_ascii_digit();
        let run = |s: &[u8]| -> usize {
            s.iter()
                .take_while(|c| {
                    if numeric {
                        c.is_ascii_digit()
                    } else {
                        c.is_ascii_alphabetic()
                    }
                })
                .count()
        };
        let (la, lb) = (run(a), run(b));
        if lb == 0 {
            // A number against letters: the number is newer.
            return if numeric {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        let (sa, sb) = (&a[..la], &b[..lb]);
        let ord = if numeric {
            let za = sa
                .iter()
                .position(|c| *c != b'0')
                .map_or(&[][..], |i| &sa[i..]);
            let zb = sb
                .iter()
                .position(|c| *c != b'0')
                .map_or(&[][..], |i| &sb[i..]);
            za.len().cmp(&zb.len()).then_with(|| za.cmp(zb))
        } else {
            sa.cmp(sb)
        };
        if ord != Ordering::Equal {
            return ord;
        }
        a = &a[la..];
        b = &b[lb..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_rpm_does() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.10", "1.9", Greater),
            ("1.0a", "1.0", Greater),
            ("1.0~rc1", "1.0", Less),
            ("2.el8_6", "2.el8", Greater),
            ("001", "1", Equal),
            ("1.a", "1.1", Less),
        ] {
            assert_eq!(rpmvercmp(a, b), want, "{a} vs {b}");
        }
    }

    #[test]
    fn names_of_nevras() {
        for (nevra, name) in [
            ("glibc-2.28-189.5.el8_6.x86_64", "glibc"),
            ("openssl-libs-1:1.1.1k-7.el8_6.x86_64", "openssl-libs"),
            (
                "NetworkManager-ovs-1:1.36.0-4.el8_6.x86_64",
                "NetworkManager-ovs",
            ),
            ("failing-post-1:1.0-1.el8.x86_64", "failing-post"),
            (
                "python3-dnf-plugin-versionlock-4.0.21-11.el8.noarch",
                "python3-dnf-plugin-versionlock",
            ),
            ("bash-4.4.20-4.el8_6.src.rpm", "bash"),
            ("odd", "odd"),
            ("no-release", "no-release"),
        ] {
            assert_eq!(nevra_name(nevra), name, "{nevra}");
        }
    }
}
