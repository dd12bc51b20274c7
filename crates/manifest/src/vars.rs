//! Manifest variables: the caller's values, and `${name}` substitution.
//!
//! A manifest declares `variables: {name: default}`; the caller (the CLI's
//! `--var name=value`) overrides defaults. `${name}` in a string value is
//! replaced by the variable's value, `$${` is a literal `${`, and any other `$`
//! is left alone, so shell scripts keep `$HOME` and `$$`. In repo fields, dnf's
//! own `$releasever`/`${releasever}` and `$basearch`/`${basearch}` are
//! substituted too.
//!
//! Must not: know where a string came from. Substitution reports which
//! occurrence failed; the loader turns that into a file position.

use std::collections::BTreeMap;

use strata_process::text::{first_line, SHOWN_CHARS};

use crate::error::ManifestError;

/// Variable names reserved for dnf's substitutions in repo fields.
pub(crate) const RESERVED: [&str; 2] = ["releasever", "basearch"];

/// The architecture every repo URL's `$basearch` means: strata builds x86_64.
pub const BASEARCH: &str = "x86_64";

/// Variable values given by the caller; they override the manifest's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vars {
    values: BTreeMap<String, String>,
}

impl Vars {
    /// No variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` to `value`, replacing an earlier value.
    pub fn insert(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), ManifestError> {
        let name = name.into();
        let value = value.into();
        if let Err(reason) = check_name(&name) {
            return Err(ManifestError::InvalidVarAssignment {
                arg: format!("{name}={value}"),
                reason,
            });
        }
        self.values.insert(name, value);
        Ok(())
    }

    /// Like [`Vars::insert`], for building a set in one expression.
    pub fn with(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, ManifestError> {
        self.insert(name, value)?;
        Ok(self)
    }

    /// Parses `NAME=VALUE` arguments (the CLI's repeated `--var`); a later
    /// assignment to the same name wins.
    pub fn from_assignments<I, S>(args: I) -> Result<Self, ManifestError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut vars = Vars::new();
        for arg in args {
            let arg = arg.as_ref();
            let Some((name, value)) = arg.split_once('=') else {
                return Err(ManifestError::InvalidVarAssignment {
                    arg: arg.to_string(),
                    reason: "expected NAME=VALUE".to_string(),
                });
            };
            vars.insert(name, value).map_err(|e| match e {
                ManifestError::InvalidVarAssignment { reason, .. } => {
                    ManifestError::InvalidVarAssignment {
                        arg: arg.to_string(),
                        reason,
                    }
                }
                other => other,
            })?;
        }
        Ok(vars)
    }

    /// The value of `name`, if the caller gave one.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// All values, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Checks a variable name: `[A-Za-z_][A-Za-z0-9_]*`, not a dnf name.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        _ => false,
    };
    if !valid {
        return Err(format!(
            "`{name}` is not a variable name (letters, digits and `_`, not starting with a digit)"
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "`{name}` is reserved: repo fields substitute dnf's ${name} themselves"
        ));
    }
    Ok(())
}

/// The variables in force for one document: the caller's values over the
/// manifest's defaults. `None` is a variable declared without a default.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    values: BTreeMap<String, Option<String>>,
}

impl Scope {
    pub(crate) fn from_caller(vars: &Vars) -> Self {
        Scope {
            values: vars
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        }
    }

    /// Adds a default: a value already in the scope (the caller's, or a
    /// default from a file with higher precedence) wins.
    pub(crate) fn add_default(&mut self, name: &str, value: Option<&str>) {
        let entry = self.values.entry(name.to_string()).or_insert(None);
        if entry.is_none() {
            *entry = value.map(str::to_string);
        }
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.values.keys().cloned().collect()
    }

    /// Every variable that has a value, with it.
    pub(crate) fn values(&self) -> BTreeMap<String, String> {
        self.values
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect()
    }

    fn lookup(&self, name: &str) -> Lookup {
        match self.values.get(name) {
            Some(Some(v)) => Lookup::Value(v.clone()),
            Some(None) => Lookup::Unset,
            None => Lookup::Unknown,
        }
    }
}

/// How [`substitute`] treats dnf's variables.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dnf<'a> {
    /// Not a repo field: `$releasever` stays as is, `${releasever}` is an
    /// ordinary (and so reserved, unknown) name.
    Off,
    /// A repo field: substitute `$basearch`, and `$releasever` when known
    /// (a release manifest has no releasever: dnf substitutes it later).
    On { releasever: Option<&'a str> },
}

enum Lookup {
    Value(String),
    /// Leave the reference as written.
    Keep,
    Unset,
    Unknown,
}

/// Why a substitution failed, and which occurrence of `needle` (counting
/// unescaped occurrences from the start of the value) is to blame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SubstError {
    pub(crate) kind: SubstErrorKind,
    pub(crate) needle: String,
    pub(crate) nth: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SubstErrorKind {
    Unknown(String),
    Unset(String),
    Syntax(String),
}

/// Replaces `${name}` references in `text`.
pub(crate) fn substitute(text: &str, scope: &Scope, dnf: Dnf<'_>) -> Result<String, SubstError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Occurrences of each `${name}` seen so far, and of `${` in general.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut opens = 0;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(SubstError {
                    kind: SubstErrorKind::Syntax(
                        "unterminated `${`: write `${name}`, or `$${` for a literal `${`"
                            .to_string(),
                    ),
                    needle: "${".to_string(),
                    nth: opens,
                });
            };
            let name = &tail[..end];
            let needle = format!("${{{name}}}");
            let nth = *seen.get(&needle).unwrap_or(&0);
            if !is_identifier(name) {
                return Err(SubstError {
                    kind: SubstErrorKind::Syntax(format!(
                        "`{}` is not a variable reference (names are letters, digits and `_`; write `$${{` for a literal `${{`)",
                        shown(&needle)
                    )),
                    needle,
                    nth,
                });
            }
            match lookup(name, scope, dnf) {
                Lookup::Value(v) => out.push_str(&v),
                Lookup::Keep => out.push_str(&needle),
                Lookup::Unset => {
                    return Err(SubstError {
                        kind: SubstErrorKind::Unset(name.to_string()),
                        needle,
                        nth,
                    })
                }
                Lookup::Unknown => {
                    return Err(SubstError {
                        kind: SubstErrorKind::Unknown(name.to_string()),
                        needle,
                        nth,
                    })
                }
            }
            *seen.entry(needle).or_insert(0) += 1;
            opens += 1;
            rest = &tail[end + 1..];
        } else {
            let ident_len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let ident = &after[..ident_len];
            let bare = match (dnf, ident) {
                (Dnf::On { .. }, "basearch") => Some(BASEARCH),
                (Dnf::On { releasever }, "releasever") => releasever,
                _ => None,
            };
            match bare {
                Some(v) => {
                    out.push_str(v);
                    rest = &after[ident_len..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn lookup(name: &str, scope: &Scope, dnf: Dnf<'_>) -> Lookup {
    match (dnf, name) {
        (Dnf::On { .. }, "basearch") => Lookup::Value(BASEARCH.to_string()),
        (Dnf::On { releasever }, "releasever") => match releasever {
            Some(v) => Lookup::Value(v.to_string()),
            None => Lookup::Keep,
        },
        _ => scope.lookup(name),
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A piece of manifest text for an error: its first line, cut as every
/// untrusted value is ([`SHOWN_CHARS`]), so that the error stays one line
/// however the text runs on.
fn shown(text: &str) -> String {
    first_line(text, SHOWN_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Manifest text in an error is cut as every untrusted value is, by
    /// the one escaper (not at a length of its own), and stays one line.
    #[test]
    fn long_or_multiline_text_is_cut_as_every_shown_value() {
        let long = "x".repeat(100);
        assert_eq!(shown(&long), strata_process::text::shown(&long));
        assert_eq!(shown("a\nb"), "a…");
        assert_eq!(shown("a\u{1b}[2J"), "a\\u{1b}[2J");
    }

    fn scope() -> Scope {
        let mut s = Scope::from_caller(&Vars::new().with("fixture", "/tmp/x").unwrap());
        s.add_default("fixture", Some("/ignored"));
        s.add_default("stream", Some("8.6"));
        s.add_default("token", None);
        s
    }

    #[test]
    fn substitution_table() {
        let rv = Dnf::On {
            releasever: Some("8"),
        };
        let cases: &[(&str, Dnf<'_>, &str)] = &[
            ("plain", Dnf::Off, "plain"),
            ("file://${fixture}/repo", Dnf::Off, "file:///tmp/x/repo"),
            ("${stream}-${stream}", Dnf::Off, "8.6-8.6"),
            ("$${fixture}", Dnf::Off, "${fixture}"),
            (
                "echo $HOME $$ $1 \"$@\"",
                Dnf::Off,
                "echo $HOME $$ $1 \"$@\"",
            ),
            ("cost $5", Dnf::Off, "cost $5"),
            ("trailing $", Dnf::Off, "trailing $"),
            ("$releasever/$basearch", Dnf::Off, "$releasever/$basearch"),
            ("/rhel$releasever/$basearch/os", rv, "/rhel8/x86_64/os"),
            ("/${releasever}/${basearch}", rv, "/8/x86_64"),
            ("$releaseverx", rv, "$releaseverx"),
            (
                "/$releasever/${releasever}",
                Dnf::On { releasever: None },
                "/$releasever/${releasever}",
            ),
            ("${fixture}/$basearch", rv, "/tmp/x/x86_64"),
        ];
        for (input, dnf, want) in cases {
            assert_eq!(
                substitute(input, &scope(), *dnf).as_deref(),
                Ok(*want),
                "{input}"
            );
        }
    }

    #[test]
    fn substitution_errors_name_the_occurrence() {
        let cases: &[(&str, SubstErrorKind, &str, usize)] = &[
            (
                "a ${nope} b",
                SubstErrorKind::Unknown("nope".into()),
                "${nope}",
                0,
            ),
            (
                "${stream} ${token}",
                SubstErrorKind::Unset("token".into()),
                "${token}",
                0,
            ),
            (
                "${releasever}",
                SubstErrorKind::Unknown("releasever".into()),
                "${releasever}",
                0,
            ),
            (
                "${stream} ${oops",
                SubstErrorKind::Syntax(String::new()),
                "${",
                1,
            ),
            ("${a b}", SubstErrorKind::Syntax(String::new()), "${a b}", 0),
        ];
        for (input, kind, needle, nth) in cases {
            let err = substitute(input, &scope(), Dnf::Off).unwrap_err();
            match (&err.kind, kind) {
                (SubstErrorKind::Syntax(_), SubstErrorKind::Syntax(_)) => {}
                (got, want) => assert_eq!(got, want, "{input}"),
            }
            assert_eq!(err.needle, *needle, "{input}");
            assert_eq!(err.nth, *nth, "{input}");
        }
    }

    #[test]
    fn caller_values_win_over_defaults() {
        let s = scope();
        assert_eq!(
            substitute("${fixture}", &s, Dnf::Off).unwrap(),
            "/tmp/x".to_string()
        );
    }

    #[test]
    fn assignments_parse_and_validate() {
        let vars = Vars::from_assignments(["a=1", "b=x=y", "a=2"]).unwrap();
        assert_eq!(vars.get("a"), Some("2"));
        assert_eq!(vars.get("b"), Some("x=y"));
        let cases = [
            ("novalue", "invalid variable assignment `novalue`: expected NAME=VALUE"),
            ("1x=2", "invalid variable assignment `1x=2`: `1x` is not a variable name (letters, digits and `_`, not starting with a digit)"),
            ("basearch=aarch64", "invalid variable assignment `basearch=aarch64`: `basearch` is reserved: repo fields substitute dnf's $basearch themselves"),
        ];
        for (arg, want) in cases {
            assert_eq!(Vars::from_assignments([arg]).unwrap_err().to_string(), want);
        }
    }
}
