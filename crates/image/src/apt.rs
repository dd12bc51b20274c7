//! The Debian archives the image's userland comes from: the ones the
//! machine's own apt sources name (as `ci/install-deps` takes them, the
//! ones this machine reaches), else Debian's public archives.

use anyhow::Result;

/// Debian's archive and its security archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirrors {
    pub debian: String,
    pub security: String,
}

const SOURCES: &str = "/etc/apt/sources.list";
const SOURCES_DIR: &str = "/etc/apt/sources.list.d";

impl Mirrors {
    /// The given archives, or the ones the machine's apt sources name for
    /// bookworm and bookworm-security, or Debian's public ones.
    pub fn of_machine(debian: Option<&str>, security: Option<&str>) -> Result<Mirrors> {
        let sources = machine_sources()?;
        let pick = |given: Option<&str>, suite: &str, public: &str| {
            given
                .map(str::to_owned)
                .or_else(|| mirror_of(&sources, suite))
                .unwrap_or_else(|| public.to_owned())
        };
        Ok(Mirrors {
            debian: pick(debian, "bookworm", "http://deb.debian.org/debian"),
            security: pick(
                security,
                "bookworm-security",
                "http://deb.debian.org/debian-security",
            ),
        })
    }

    /// The lines mmdebstrap takes: the release, its updates, security and
    /// backports (where install-deps takes e2fsprogs and qemu from).
    pub fn sources(&self) -> [String; 4] {
        let d = &self.debian;
        [
            format!("deb {d} bookworm main"),
            format!("deb {d} bookworm-updates main"),
            format!("deb {} bookworm-security main", self.security),
            format!("deb {d} bookworm-backports main"),
        ]
    }
}

/// Every apt source file of the machine, deb822 (`.sources`) and one-line
/// (`.list`), as (is deb822, text).
fn machine_sources() -> Result<Vec<(bool, String)>> {
    let mut files = vec![(false, SOURCES.into())];
    if let Ok(dir) = std::fs::read_dir(SOURCES_DIR) {
        let mut names: Vec<_> = dir.filter_map(|e| Some(e.ok()?.path())).collect();
        names.sort();
        for p in names {
            match p.extension().and_then(|e| e.to_str()) {
                Some("sources") => files.push((true, p)),
                Some("list") => files.push((false, p)),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for (deb822, path) in files {
        match std::fs::read_to_string(&path) {
            Ok(text) => out.push((deb822, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("reading {}", path.display())))
            }
        }
    }
    Ok(out)
}

/// The first archive a source names for `suite`.
fn mirror_of(sources: &[(bool, String)], suite: &str) -> Option<String> {
    sources.iter().find_map(|(deb822, text)| {
        if *deb822 {
            deb822_mirror(text, suite)
        } else {
            one_line_mirror(text, suite)
        }
    })
}

/// In deb822 stanzas (blank-line separated): the first `URIs:` of a
/// stanza whose `Suites:` lists `suite`.
fn deb822_mirror(text: &str, suite: &str) -> Option<String> {
    text.split("\n\n").find_map(|stanza| {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
            })
        };
        let suites = field("Suites")?;
        suites
            .split_whitespace()
            .any(|s| s == suite)
            .then_some(())?;
        field("URIs")?.split_whitespace().next().map(str::to_owned)
    })
}

/// In one-line sources: `deb [options] URI SUITE COMPONENT...`.
fn one_line_mirror(text: &str, suite: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim();
        let rest = line.strip_prefix("deb ")?.trim_start();
        let rest = match rest.strip_prefix('[') {
            Some(opts) => opts.split_once(']')?.1,
            None => rest,
        };
        let mut words = rest.split_whitespace();
        let uri = words.next()?;
        (words.next()? == suite).then(|| uri.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_archive_of_a_suite_in_either_format() {
        let deb822 = "Types: deb\nURIs: http://a/debian\nSuites: bookworm bookworm-updates\n\n\
                      Types: deb\nURIs: http://a/security\nSuites: bookworm-security\n";
        let one_line = "# comment\ndeb [arch=amd64 signed-by=/k] http://b/debian bookworm main\n\
                        deb http://b/security bookworm-security main\n";
        let both = [(true, deb822.to_owned()), (false, one_line.to_owned())];
        assert_eq!(
            mirror_of(&both, "bookworm").as_deref(),
            Some("http://a/debian")
        );
        assert_eq!(
            mirror_of(&both, "bookworm-security").as_deref(),
            Some("http://a/security")
        );
        let one = [(false, one_line.to_owned())];
        assert_eq!(
            mirror_of(&one, "bookworm").as_deref(),
            Some("http://b/debian")
        );
        assert_eq!(
            mirror_of(&one, "bookworm-security").as_deref(),
            Some("http://b/security")
        );
        assert_eq!(mirror_of(&one, "trixie"), None);
    }
}
