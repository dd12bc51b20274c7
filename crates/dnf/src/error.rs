//! The crate's error type.
//!
//! Why it exists: callers must tell expected failures (a package that does
//! not exist, an unresolvable request, a bad signature) from broken
//! environments, and every libdnf `GError` must surface with its message.
//! What it must not do: lose information — each variant names the package,
//! repository, path or libdnf operation involved.

use std::path::PathBuf;

/// Errors from `strata-dnf`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The options or a repository definition are unusable.
    #[error("invalid dnf options: {0}")]
    InvalidOptions(String),

    /// No available package matches a requested name / NEVRA / provide.
    #[error("no package matches '{name}' in repositories [{}]", repos.join(", "))]
    PackageNotFound {
        /// The request as given.
        name: String,
        /// The enabled repositories that were searched.
        repos: Vec<String>,
    },

    /// A local file given for installation is not a readable RPM.
    #[error("not a readable RPM package: {}", path.display())]
    BadLocalRpm { path: PathBuf },

    /// The solver found no solution; one entry per problem, as libdnf
    /// describes it (e.g. `conflicting requests: nothing provides libfoo
    /// needed by bar-1-1.x86_64`).
    #[error("cannot resolve the requested packages: {}", problems.join("; "))]
    Unresolvable { problems: Vec<String> },

    /// A package failed signature verification against its repository's keys.
    #[error("package {nevra} from repository {repo} failed GPG verification: {message}")]
    Signature {
        nevra: String,
        repo: String,
        message: String,
    },

    /// A package file does not match the checksum in the repodata.
    #[error("package {nevra} at {} does not match its repodata checksum", path.display())]
    Checksum { nevra: String, path: PathBuf },

    /// A libdnf call failed; `message` is the `GError`'s message.
    #[error("{op}: {message}")]
    Libdnf {
        /// What we were doing, e.g. "loading repositories".
        op: String,
        /// libdnf's `DnfError` code when the error is in libdnf's domain.
        code: Option<i32>,
        message: String,
    },

    /// A file-system step failed.
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// A package's scriptlet failed while rpm installed it. rpm itself
    /// only warns (a failing `%post` leaves the package installed); an
    /// image built past it would ship a half-configured package.
    #[error(
        "package {package}: its {scriptlet} scriptlet failed ({status}){}",
        if output.is_empty() { String::new() } else { format!("; output ends: {output}") }
    )]
    ScriptletFailed {
        /// NEVRA of the package.
        package: String,
        /// `%pre`, `%post`, `%posttrans`, …
        scriptlet: String,
        /// `exit status 3`, `signal 9`.
        status: String,
        /// The last lines the transaction printed, on one line.
        output: String,
    },

    /// The install resolved to other packages than the caller planned and
    /// checked (its repositories changed in between, say).
    #[error(
        "the install resolved differently from the plan: resolved [{}], planned [{}]",
        resolved.join(", "),
        planned.join(", ")
    )]
    Unplanned {
        resolved: Vec<String>,
        planned: Vec<String>,
    },

    /// An install run in a child process failed.
    #[error("dnf child process {status}: {message}")]
    Child { status: String, message: String },

    /// The rpm transaction failed with the install root's filesystem
    /// (nearly) full: rpm itself says only "Error -1 running transaction".
    #[error(
        "installing into {}: no space left on its filesystem ({free_kib} KiB free): {message}",
        root.display()
    )]
    NoSpace {
        root: PathBuf,
        free_kib: u64,
        message: String,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Splits the message of libdnf's failed `dnf_goal_depsolve` into one string
/// per problem.
///
/// libdnf formats it as `Could not depsolve transaction; N problem(s)
/// detected:` followed by ` Problem: HEAD` (or ` Problem 2: HEAD`) lines, each
/// followed by `  - RULE` lines. A message in any other shape is returned
/// whole as a single problem.
pub(crate) fn parse_problems(message: &str) -> Vec<String> {
    let mut problems: Vec<(String, Vec<String>)> = Vec::new();
    for line in message.lines() {
        let trimmed = line.trim();
        if let Some(rule) = trimmed.strip_prefix("- ") {
            match problems.last_mut() {
                Some((_, rules)) => rules.push(rule.trim().to_string()),
                None => problems.push((rule.trim().to_string(), Vec::new())),
            }
        } else if let Some(rest) = trimmed.strip_prefix("Problem") {
            // "Problem: head" or "Problem 3: head"
            let head = rest.split_once(':').map_or(rest, |(_, h)| h).trim();
            problems.push((head.to_string(), Vec::new()));
        }
    }
    if problems.is_empty() {
        return vec![message.trim().to_string()];
    }
    problems
        .into_iter()
        .map(|(head, rules)| {
            if rules.is_empty() {
                head
            } else {
                format!("{head}: {}", rules.join(", "))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_problems_table() {
        let cases: &[(&str, &[&str])] = &[
            (
                "Could not depsolve transaction; 1 problem detected:\n Problem: conflicting requests\n  - nothing provides libfoo needed by bar-1-1.x86_64",
                &["conflicting requests: nothing provides libfoo needed by bar-1-1.x86_64"],
            ),
            (
                "Could not depsolve transaction; 2 problems detected:\n Problem 1: conflicting requests\n  - a\n  - b\n Problem 2: package x conflicts with y\n  - c",
                &["conflicting requests: a, b", "package x conflicts with y: c"],
            ),
            (
                "Could not depsolve transaction; 1 problem detected:\n Problem: package foo-1-1.noarch is filtered out by exclude filtering",
                &["package foo-1-1.noarch is filtered out by exclude filtering"],
            ),
            ("something unexpected", &["something unexpected"]),
        ];
        for (msg, want) in cases {
            assert_eq!(parse_problems(msg), *want, "message: {msg}");
        }
    }

    #[test]
    fn package_not_found_names_package_and_repos() {
        let e = Error::PackageNotFound {
            name: "nosuch".into(),
            repos: vec!["baseos".into(), "appstream".into()],
        };
        assert_eq!(
            e.to_string(),
            "no package matches 'nosuch' in repositories [baseos, appstream]"
        );
    }
}
