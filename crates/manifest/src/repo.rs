//! Package repositories: the `repos` list, inline or from dnf `.repo` files.
//!
//! Both forms become the same [`Repo`]. Keys are spelled as dnf spells them
//! (`repo_gpgcheck`, `sslclientcert`), so a section can move between a
//! `.repo` file and a manifest unchanged.
//!
//! Must not: contact a repo or decide which packages it may provide; that
//! is the input policy's job, applied by compose and derive.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cx::Cx;
use crate::error::{Location, ManifestError, Position};
use crate::merge::merge_fields;
use crate::repofile::Section;
use crate::source::has_scheme;
use crate::spanned::{At, FileId, OneOrMany, Spanned, Str};
use crate::vars::Dnf;

/// A package repository, as dnf will be configured with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Repo {
    pub id: String,
    /// Defaults to the id.
    pub name: String,
    /// URLs; at least one of baseurl, metalink and mirrorlist is set.
    pub baseurl: Vec<String>,
    pub metalink: Option<String>,
    pub mirrorlist: Option<String>,
    /// Key URLs. A plain path in the manifest becomes a `file://` URL,
    /// resolved against the file that names it.
    pub gpgkey: Vec<String>,
    /// Default true.
    pub gpgcheck: bool,
    /// Default false.
    pub repo_gpgcheck: bool,
    /// Default true.
    pub enabled: bool,
    /// Default true.
    pub sslverify: bool,
    pub sslcacert: Option<String>,
    pub sslclientcert: Option<String>,
    pub sslclientkey: Option<String>,
    pub priority: Option<u32>,
    pub cost: Option<u32>,
    /// Default false.
    pub module_hotfixes: bool,
    /// Default false.
    pub skip_if_unavailable: bool,
}

/// A `repos` entry as one file states it: a repo, or `{file: x.repo}`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PartialRepo {
    pub(crate) file: Option<Str>,
    pub(crate) id: Option<Str>,
    pub(crate) name: Option<Str>,
    pub(crate) baseurl: Option<OneOrMany>,
    pub(crate) metalink: Option<Str>,
    pub(crate) mirrorlist: Option<Str>,
    pub(crate) gpgkey: Option<OneOrMany>,
    pub(crate) gpgcheck: Option<Spanned<bool>>,
    pub(crate) repo_gpgcheck: Option<Spanned<bool>>,
    pub(crate) enabled: Option<Spanned<bool>>,
    pub(crate) sslverify: Option<Spanned<bool>>,
    pub(crate) sslcacert: Option<Str>,
    pub(crate) sslclientcert: Option<Str>,
    pub(crate) sslclientkey: Option<Str>,
    pub(crate) priority: Option<Spanned<u32>>,
    pub(crate) cost: Option<Spanned<u32>>,
    pub(crate) module_hotfixes: Option<Spanned<bool>>,
    pub(crate) skip_if_unavailable: Option<Spanned<bool>>,
}
merge_fields!(PartialRepo {
    file,
    id,
    name,
    baseurl,
    metalink,
    mirrorlist,
    gpgkey,
    gpgcheck,
    repo_gpgcheck,
    enabled,
    sslverify,
    sslcacert,
    sslclientcert,
    sslclientkey,
    priority,
    cost,
    module_hotfixes,
    skip_if_unavailable,
});

/// `.repo` keys that dnf understands but that do not change what strata
/// builds (cache lifetimes, subscription-manager bookkeeping): accepted and
/// dropped.
const IGNORED_KEYS: &[&str] = &[
    "metadata_expire",
    "enabled_metadata",
    "ui_repoid_vars",
    "sslverifystatus",
    "type",
    "countme",
    "failovermethod",
    "autorefresh",
    "keepalive",
    "deltarpm",
];

/// `.repo` keys this module reads.
const KEYS: &[&str] = &[
    "name",
    "baseurl",
    "metalink",
    "mirrorlist",
    "gpgkey",
    "gpgcheck",
    "repo_gpgcheck",
    "enabled",
    "sslverify",
    "sslcacert",
    "sslclientcert",
    "sslclientkey",
    "priority",
    "cost",
    "module_hotfixes",
    "skip_if_unavailable",
];

/// Turns a `.repo` section into the same partial an inline entry gives.
pub(crate) fn from_section(
    section: &Section,
    file: FileId,
    display: &Path,
) -> Result<Spanned<PartialRepo>, ManifestError> {
    let at = |position: Position| At::Text { file, position };
    let error = |position: Position, message: String| ManifestError::RepoFile {
        location: Location {
            file: display.to_path_buf(),
            position: Some(position),
        },
        message,
    };
    let mut repo = PartialRepo {
        id: Some(Spanned::new(section.id.clone(), at(section.id_at))),
        ..PartialRepo::default()
    };
    for entry in &section.entries {
        let key = entry.key.as_str();
        let (text, value_at) = entry.joined();
        let string = || Some(Spanned::new(text.clone(), at(value_at)));
        let list = || {
            Some(OneOrMany(
                entry
                    .items()
                    .into_iter()
                    .map(|(v, p)| Spanned::new(v, at(p)))
                    .collect(),
            ))
        };
        let boolean = || -> Result<Option<Spanned<bool>>, ManifestError> {
            let value = match text.to_ascii_lowercase().as_str() {
                "1" | "yes" | "true" | "on" => true,
                "0" | "no" | "false" | "off" => false,
                _ => {
                    return Err(error(
                        value_at,
                        format!("`{key}={text}` is not a boolean (use 1 or 0)"),
                    ))
                }
            };
            Ok(Some(Spanned::new(value, at(value_at))))
        };
        let number = || -> Result<Option<Spanned<u32>>, ManifestError> {
            match text.parse() {
                Ok(n) => Ok(Some(Spanned::new(n, at(value_at)))),
                Err(_) => Err(error(
                    value_at,
                    format!("`{key}={text}` is not a non-negative integer"),
                )),
            }
        };
        match key {
            "name" => repo.name = string(),
            "baseurl" => repo.baseurl = list(),
            "metalink" => repo.metalink = string(),
            "mirrorlist" => repo.mirrorlist = string(),
            "gpgkey" => repo.gpgkey = list(),
            "gpgcheck" => repo.gpgcheck = boolean()?,
            "repo_gpgcheck" => repo.repo_gpgcheck = boolean()?,
            "enabled" => repo.enabled = boolean()?,
            "sslverify" => repo.sslverify = boolean()?,
            "sslcacert" => repo.sslcacert = string(),
            "sslclientcert" => repo.sslclientcert = string(),
            "sslclientkey" => repo.sslclientkey = string(),
            "priority" => repo.priority = number()?,
            "cost" => repo.cost = number()?,
            "module_hotfixes" => repo.module_hotfixes = boolean()?,
            "skip_if_unavailable" => repo.skip_if_unavailable = boolean()?,
            other if IGNORED_KEYS.contains(&other) => {}
            other => {
                return Err(error(
                    entry.key_at,
                    format!(
                        "unknown key `{other}` in `[{}]` (known: {}; accepted and ignored: {})",
                        section.id,
                        KEYS.join(", "),
                        IGNORED_KEYS.join(", ")
                    ),
                ))
            }
        }
    }
    Ok(Spanned::new(repo, at(section.id_at)))
}

/// Validates repo entries (already expanded from `.repo` files) and
/// substitutes variables. `releasever` is `None` in a release manifest.
pub(crate) fn finish(
    cx: &Cx<'_>,
    entries: Vec<Spanned<PartialRepo>>,
    releasever: Option<&str>,
) -> Result<Vec<(Repo, At)>, ManifestError> {
    let dnf = Dnf::On { releasever };
    let mut repos: Vec<(Repo, At)> = Vec::new();
    for entry in entries {
        let entry_at = entry.at;
        let p = entry.value;
        if let Some(file) = &p.file {
            // The loader expands `{file: …}` entries; one survives only when
            // it also set other keys.
            return Err(cx.invalid(
                file.at,
                "repos entry",
                "`file:` takes a .repo file and nothing else; set repo keys in the .repo file or inline",
            ));
        }
        let id = cx.required_in(p.id, entry_at, "id")?;
        let id_value = cx.subst(&id, Dnf::Off)?;
        check_repo_id(&id_value).map_err(|reason| cx.invalid(id.at, "repo id", reason))?;
        let opt = |s: Option<Str>| s.map(|s| cx.subst(&s, dnf)).transpose();
        let flag = |b: Option<Spanned<bool>>, default: bool| b.map_or(default, |b| b.value);
        let mut baseurl = Vec::new();
        for url in p.baseurl.map(|b| b.0).unwrap_or_default() {
            let value = cx.subst(&url, dnf)?;
            check_url(&value).map_err(|reason| cx.invalid(url.at, "baseurl", reason))?;
            baseurl.push(value);
        }
        let mut gpgkey = Vec::new();
        for key in p.gpgkey.map(|k| k.0).unwrap_or_default() {
            let value = cx.subst(&key, dnf)?;
            gpgkey.push(cx.file_url(key.at, &value));
        }
        let repo = Repo {
            name: opt(p.name)?.unwrap_or_else(|| id_value.clone()),
            id: id_value,
            baseurl,
            metalink: opt(p.metalink)?,
            mirrorlist: opt(p.mirrorlist)?,
            gpgkey,
            gpgcheck: flag(p.gpgcheck, true),
            repo_gpgcheck: flag(p.repo_gpgcheck, false),
            enabled: flag(p.enabled, true),
            sslverify: flag(p.sslverify, true),
            sslcacert: opt(p.sslcacert)?,
            sslclientcert: opt(p.sslclientcert)?,
            sslclientkey: opt(p.sslclientkey)?,
            priority: p.priority.map(|v| v.value),
            cost: p.cost.map(|v| v.value),
            module_hotfixes: flag(p.module_hotfixes, false),
            skip_if_unavailable: flag(p.skip_if_unavailable, false),
        };
        if repo.baseurl.is_empty() && repo.metalink.is_none() && repo.mirrorlist.is_none() {
            return Err(cx.invalid(
                id.at,
                "repo",
                format!("`{}` has no baseurl, metalink or mirrorlist", repo.id),
            ));
        }
        if let Some((first, first_at)) = repos.iter().find(|(r, _)| r.id == repo.id) {
            if *first != repo {
                return Err(ManifestError::DuplicateRepo {
                    location: cx.loc(id.at),
                    id: repo.id,
                    first: cx.loc(*first_at),
                });
            }
            continue;
        }
        repos.push((repo, id.at));
    }
    Ok(repos)
}

fn check_repo_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("a repo id cannot be empty".to_string());
    }
    match id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.:".contains(*c)))
    {
        Some(c) => Err(format!(
            "`{id}` holds `{c}`: repo ids are letters, digits and `-_.:`"
        )),
        None => Ok(()),
    }
}

fn check_url(url: &str) -> Result<(), String> {
    if has_scheme(url) {
        Ok(())
    } else {
        Err(format!(
            "`{url}` is not a URL (write file:///path for a local repo)"
        ))
    }
}
