//! Fields that more than one document type has — packages, scripts, files,
//! the input policy — and how each is validated.
//!
//! Each function takes the merged partial value of one field and returns
//! the public value, or an error located at the offending entry. The
//! document types call them in the order their fields are documented, so the
//! first error reported is the first in reading order.
//!
//! Must not: decide which fields a document type has or requires; that is
//! the document type's `finish`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cx::Cx;
use crate::document::EDITION;
use crate::error::ManifestError;
use crate::merge::merge_fields;
use crate::policy::{Fingerprint, InputPolicy, KeyEntry, KeyRef, PartialInputs};
use crate::repo::Repo;
use crate::source::has_scheme;
use crate::spanned::{At, Spanned, Str};

/// A file copied into the tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AddFile {
    /// Where to read it: resolved against the manifest file that names it
    /// (absolute when that file's path is).
    #[serde(serialize_with = "crate::canonical::path")]
    pub src: PathBuf,
    /// Where it goes in the tree: an absolute path.
    pub dest: String,
    /// Permission bits; `None` keeps the source file's.
    pub mode: Option<u32>,
}

/// An `add-files` entry as written.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartialAddFile {
    src: Str,
    dest: Str,
    mode: Option<Str>,
}

/// How the initramfs is made at compose time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Initramfs {
    /// The generator: `dracut` (the only one so far).
    pub generator: String,
    /// Extra arguments to the generator.
    pub args: Vec<String>,
}

impl Default for Initramfs {
    fn default() -> Self {
        Initramfs {
            generator: "dracut".to_string(),
            args: Vec::new(),
        }
    }
}

const GENERATORS: &[&str] = &["dracut"];

impl Initramfs {
    /// Whether strata knows how to run `name` as the initramfs generator
    /// (manifests, and base commits that record theirs, name only these).
    pub fn is_known_generator(name: &str) -> bool {
        GENERATORS.contains(&name)
    }
}

/// `initramfs:` as one file states it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartialInitramfs {
    generator: Option<Str>,
    args: Option<Vec<Str>>,
}
merge_fields!(PartialInitramfs { generator, args });

/// A package name, and the string that named it.
pub(crate) type Named = (String, At);

pub(crate) fn edition(cx: &Cx<'_>, edition: Option<Spanned<u32>>) -> Result<u32, ManifestError> {
    let edition = cx.required(edition, "edition")?;
    if edition.value != EDITION {
        return Err(cx.invalid(
            edition.at,
            "edition",
            format!(
                "{} is not an edition of this format (the only one is {EDITION})",
                edition.value
            ),
        ));
    }
    Ok(edition.value)
}

/// A required, non-empty string field.
pub(crate) fn required_text(
    cx: &Cx<'_>,
    value: Option<Str>,
    field: &str,
) -> Result<(String, At), ManifestError> {
    let value = cx.required(value, field)?;
    let text = cx.text(&value)?;
    if text.trim().is_empty() {
        return Err(cx.invalid(value.at, field, "cannot be empty"));
    }
    Ok((text, value.at))
}

/// Checks a name used in paths and image labels: letters, digits, `._-`.
pub(crate) fn check_name(
    cx: &Cx<'_>,
    (text, at): &(String, At),
    field: &str,
) -> Result<(), ManifestError> {
    if let Some(c) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c)))
    {
        return Err(cx.invalid(
            *at,
            field,
            format!("`{text}` holds `{c}`: use letters, digits and `._-`"),
        ));
    }
    Ok(())
}

/// Fails on an empty list that the document requires entries in.
pub(crate) fn non_empty<T>(cx: &Cx<'_>, list: &[T], field: &str) -> Result<(), ManifestError> {
    if list.is_empty() {
        return Err(cx.invalid(At::Nowhere, field, "the list is empty"));
    }
    Ok(())
}

/// A package list: each string holds one or more space-separated names.
/// Returns each name once, in first-mention order.
pub(crate) fn packages(
    cx: &Cx<'_>,
    field: &str,
    list: Option<Vec<Str>>,
) -> Result<Vec<Named>, ManifestError> {
    let mut names: Vec<Named> = Vec::new();
    for entry in list.unwrap_or_default() {
        let text = cx.text(&entry)?;
        if text.trim().is_empty() {
            return Err(cx.invalid(entry.at, field, "an entry holds no package name"));
        }
        for name in text.split_whitespace() {
            if let Some(c) = name
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "._+-".contains(*c)))
            {
                return Err(ManifestError::InvalidValue {
                    location: cx.loc_word(entry.at, name),
                    field: field.to_string(),
                    reason: format!(
                        "`{name}` is not a package name (`{c}`: names are letters, digits and `._+-`)"
                    ),
                });
            }
            if !names.iter().any(|(n, _)| n == name) {
                names.push((name.to_string(), entry.at));
            }
        }
    }
    Ok(names)
}

/// Fails if a package is both requested and excluded.
pub(crate) fn check_exclusions(
    cx: &Cx<'_>,
    packages: &[Named],
    excluded: &[Named],
) -> Result<(), ManifestError> {
    for (name, at) in excluded {
        if let Some((_, requested)) = packages.iter().find(|(p, _)| p == name) {
            return Err(ManifestError::ExcludedPackage {
                location: cx.loc_word(*at, name),
                package: name.clone(),
                requested: cx.loc_word(*requested, name),
            });
        }
    }
    Ok(())
}

pub(crate) fn names(list: Vec<Named>) -> Vec<String> {
    list.into_iter().map(|(n, _)| n).collect()
}

/// Scripts, substituted and otherwise kept as written.
pub(crate) fn scripts(cx: &Cx<'_>, list: Option<Vec<Str>>) -> Result<Vec<String>, ManifestError> {
    let mut out = Vec::new();
    for script in list.unwrap_or_default() {
        let text = cx.text(&script)?;
        if text.trim().is_empty() {
            return Err(cx.invalid(script.at, "postprocess", "a script is empty"));
        }
        out.push(text);
    }
    Ok(out)
}

pub(crate) fn add_files(
    cx: &mut Cx<'_>,
    list: Option<Vec<Spanned<PartialAddFile>>>,
) -> Result<Vec<AddFile>, ManifestError> {
    let mut out: Vec<AddFile> = Vec::new();
    for entry in list.unwrap_or_default() {
        let PartialAddFile { src, dest, mode } = entry.value;
        let src_text = cx.text(&src)?;
        if src_text.is_empty() {
            return Err(cx.invalid(src.at, "add-files src", "cannot be empty"));
        }
        let src_path = cx.path(src.at, &src_text);
        let dest_text = cx.text(&dest)?;
        check_tree_path(&dest_text)
            .map_err(|reason| cx.invalid(dest.at, "add-files dest", reason))?;
        let mode = match mode {
            None => None,
            Some(m) => {
                let text = cx.text(&m)?;
                Some(
                    parse_mode(&text)
                        .map_err(|reason| cx.invalid(m.at, "add-files mode", reason))?,
                )
            }
        };
        if let Some(other) = out.iter().find(|f| f.dest == dest_text) {
            return Err(cx.invalid(
                dest.at,
                "add-files dest",
                format!(
                    "`{dest_text}` is already the destination of {}",
                    other.src.display()
                ),
            ));
        }
        cx.read_source(src.at, &src_path)?;
        out.push(AddFile {
            src: src_path,
            dest: dest_text,
            mode,
        });
    }
    Ok(out)
}

/// An absolute path inside the tree, without `..`.
fn check_tree_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("`{path}` is not an absolute path"));
    }
    if path.split('/').any(|c| c == "..") {
        return Err(format!("`{path}` holds `..`"));
    }
    if path.trim_matches('/').is_empty() {
        return Err("`/` is not a file".to_string());
    }
    Ok(())
}

/// Octal permission bits: `0644`, `644`, `0o644`.
fn parse_mode(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    let mode = if !digits.is_empty() && digits.chars().all(|c| ('0'..='7').contains(&c)) {
        u32::from_str_radix(digits, 8).ok()
    } else {
        None
    };
    match mode {
        Some(m) if m <= 0o7777 => Ok(m),
        _ => Err(format!(
            "`{text}` is not an octal mode like 0644 (at most 07777)"
        )),
    }
}

/// Paths or globs removed from the tree.
pub(crate) fn remove_files(
    cx: &Cx<'_>,
    list: Option<Vec<Str>>,
) -> Result<Vec<String>, ManifestError> {
    let mut out = Vec::new();
    for entry in list.unwrap_or_default() {
        let text = cx.text(&entry)?;
        check_tree_path(&text).map_err(|reason| cx.invalid(entry.at, "remove-files", reason))?;
        if !out.contains(&text) {
            out.push(text);
        }
    }
    Ok(out)
}

/// systemd unit names.
/// A systemd unit name: `name.type`, of the characters systemd allows
/// (letters, digits, `:-_.\\@`), so that it is safe in a path.
pub fn is_unit_name(name: &str) -> bool {
    name.len() <= 255
        && name.contains('.')
        && !name.starts_with('.')
        && !name.ends_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c))
}

pub(crate) fn units(cx: &Cx<'_>, list: Option<Vec<Str>>) -> Result<Vec<String>, ManifestError> {
    let mut out = Vec::new();
    for entry in list.unwrap_or_default() {
        let text = cx.text(&entry)?;
        if !is_unit_name(&text) {
            return Err(cx.invalid(
                entry.at,
                "units",
                format!("`{text}` is not a unit name like sshd.service"),
            ));
        }
        if !out.contains(&text) {
            out.push(text);
        }
    }
    Ok(out)
}

pub(crate) fn initramfs(
    cx: &Cx<'_>,
    partial: Option<PartialInitramfs>,
) -> Result<Initramfs, ManifestError> {
    let mut out = Initramfs::default();
    let Some(p) = partial else {
        return Ok(out);
    };
    if let Some(generator) = p.generator {
        let text = cx.text(&generator)?;
        if !Initramfs::is_known_generator(&text) {
            return Err(cx.invalid(
                generator.at,
                "initramfs generator",
                format!(
                    "`{text}` is not a known generator (known: {})",
                    GENERATORS.join(", ")
                ),
            ));
        }
        out.generator = text;
    }
    for arg in p.args.unwrap_or_default() {
        out.args.push(cx.text(&arg)?);
    }
    Ok(out)
}

/// The input policy. Every allowed repo must be defined; a defined repo
/// need not be allowed (it is then visible to dnf but contributes nothing).
pub(crate) fn inputs(
    cx: &Cx<'_>,
    partial: Option<PartialInputs>,
    repos: &[(Repo, At)],
) -> Result<InputPolicy, ManifestError> {
    let p = cx.required(partial, "inputs")?;
    let allowed = cx.required(p.repos, "inputs.repos")?;
    let mut policy = InputPolicy::default();
    for id in &allowed {
        let text = cx.text(id)?;
        if !repos.iter().any(|(r, _)| r.id == text) {
            return Err(ManifestError::UnknownPolicyRepo {
                location: cx.loc(id.at),
                id: text,
            });
        }
        if !policy.repos.contains(&text) {
            policy.repos.push(text);
        }
    }
    if policy.repos.is_empty() {
        return Err(cx.invalid(
            At::Nowhere,
            "inputs.repos",
            "the list is empty: no repo could contribute a package",
        ));
    }
    let keys = cx.required(p.keys, "inputs.keys")?;
    for key in keys {
        let key = match key {
            KeyEntry::Fingerprint(s) => {
                let text = cx.text(&s)?;
                KeyRef::Fingerprint(
                    Fingerprint::parse(&text)
                        .map_err(|reason| cx.invalid(s.at, "inputs.keys", reason))?,
                )
            }
            KeyEntry::File(s) => {
                let text = cx.text(&s)?;
                if text.is_empty() {
                    return Err(cx.invalid(s.at, "inputs.keys", "`file:` is empty"));
                }
                match text.strip_prefix("file://") {
                    Some(path) => KeyRef::File(PathBuf::from(path)),
                    None if has_scheme(&text) => KeyRef::Url(text),
                    None => KeyRef::File(cx.path(s.at, &text)),
                }
            }
        };
        if !policy.keys.contains(&key) {
            policy.keys.push(key);
        }
    }
    if policy.keys.is_empty() {
        return Err(cx.invalid(
            At::Nowhere,
            "inputs.keys",
            "the list is empty: name the keys packages must be signed with",
        ));
    }
    Ok(policy)
}

/// `labels:` — string keys and values.
pub(crate) fn labels(
    cx: &Cx<'_>,
    map: Option<BTreeMap<Str, Str>>,
) -> Result<BTreeMap<String, String>, ManifestError> {
    let mut out = BTreeMap::new();
    for (key, value) in map.unwrap_or_default() {
        if key.value.is_empty() || key.value.chars().any(char::is_whitespace) {
            return Err(cx.invalid(
                key.at,
                "labels",
                format!("`{}` is not a label name (non-empty, no spaces)", key.value),
            ));
        }
        out.insert(key.value, cx.text(&value)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_table() {
        let cases = [
            ("0644", Ok(0o644)),
            ("755", Ok(0o755)),
            ("0o4755", Ok(0o4755)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_mode(text), want.map_err(|_: ()| String::new()));
        }
        for bad in ["", "0x1ff", "0999", "77777", "rw-r--r--"] {
            assert!(parse_mode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tree_path_table() {
        assert!(check_tree_path("/etc/motd").is_ok());
        assert!(check_tree_path("/usr/share/doc/*").is_ok());
        for bad in ["etc/motd", "/etc/../x", "/", ""] {
            assert!(check_tree_path(bad).is_err(), "{bad}");
        }
    }
}
