//! Options, repository definitions and requests: plain validated values.
//!
//! Why it exists: everything a caller can choose about a libdnf run is stated
//! here, checked before libdnf is touched, and serialisable so that the same
//! values can be handed to a child process (see `job`). Repositories are
//! given already parsed — this crate reads no manifest and no host `.repo`
//! file; it renders the private `.repo` file libdnf loads.
//!
//! What it must not do: any I/O or libdnf call. `render_repo_file` is pure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How a [`crate::Dnf`] is set up. Build with [`DnfOptions::new`], then
/// adjust fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(default)]
pub struct DnfOptions {
    /// The root to depsolve against and install into. Must not be `/`.
    pub install_root: PathBuf,
    /// Where metadata, solv caches, downloaded packages and the private
    /// repos/lock directories live (under `dnf/`).
    pub cache_dir: PathBuf,
    /// `$releasever`, e.g. `8`. Always set: libdnf would otherwise read the
    /// host's os-release.
    pub release_ver: String,
    /// Target architecture; `x86_64`.
    pub arch: String,
    /// Install weak dependencies (Recommends). Off by default, as in RHCOS.
    pub install_weak_deps: bool,
    /// Skip files marked `%doc` (dnf's `tsflags=nodocs`).
    pub nodocs: bool,
    /// Master switch for signature checks; when on, each repository with
    /// `gpgcheck` must name its keys and every package is verified against
    /// them before the rpm transaction.
    pub gpgcheck: bool,
    /// Fail rather than fall back to older versions when the newest
    /// candidate cannot be installed (dnf's `best=True`).
    pub best: bool,
    /// The rpm database location inside the root (`%_dbpath`). Debian's rpm
    /// defaults it to `~/.rpmdb`, so it is always set.
    pub dbpath: String,
    /// Extra rpm macros, e.g. `("_install_langs", "en_US")`.
    pub rpm_macros: Vec<(String, String)>,
    /// When to re-fetch metadata of remote repositories (`file://`
    /// repositories are always read directly).
    pub metadata_refresh: MetadataRefresh,
    /// Names of packages whose failing scriptlets do not fail the install
    /// (a manifest's `ignore-scripts`): their failures are reported in
    /// [`crate::InstallReport::ignored_scriptlet_failures`] instead.
    pub ignore_scripts: Vec<String>,
    /// The caller has verified every package's signature and payload
    /// digest before the transaction (strata's policy check reads each
    /// package whole, on every core). librpm then does not read each
    /// package a second time, on one core, to check its digests again
    /// (`%_pkgverify_level none`); otherwise it does (`digest`, rpm's
    /// default). A package given as a local file is not checked by the
    /// policy, so a transaction with one must leave this off.
    pub payloads_verified: bool,
    /// Package files librpm installs in place of the downloaded ones, by
    /// NEVRA: the same headers, a payload whose files librpm skips hold
    /// zeros (the caller placed them and told librpm to skip them).
    /// Taken only with [`DnfOptions::payloads_verified`], which has librpm
    /// check the headers alone. See `substitutes`.
    pub substitutes: Vec<(String, PathBuf)>,
}

/// When cached metadata of a remote repository is fetched again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum MetadataRefresh {
    /// On every depsolve: a compose must see the repositories as they are
    /// now (what `rpm-ostree compose tree` does).
    #[default]
    Always,
    /// When older than the repository's `metadata_expire` (48 hours).
    Expired,
    /// Never: use the cache only (offline rebuilds from a warm cache).
    Never,
}

impl MetadataRefresh {
    /// libdnf's `cache_age` for this policy.
    pub(crate) fn cache_age(self) -> u32 {
        match self {
            MetadataRefresh::Always => 0,
            MetadataRefresh::Expired => u32::MAX - 1,
            MetadataRefresh::Never => u32::MAX,
        }
    }
}

impl Default for DnfOptions {
    fn default() -> Self {
        DnfOptions {
            install_root: PathBuf::new(),
            cache_dir: PathBuf::new(),
            release_ver: String::new(),
            arch: "x86_64".to_string(),
            install_weak_deps: false,
            nodocs: false,
            gpgcheck: true,
            best: true,
            dbpath: "/var/lib/rpm".to_string(),
            rpm_macros: Vec::new(),
            metadata_refresh: MetadataRefresh::Always,
            ignore_scripts: Vec::new(),
            payloads_verified: false,
            substitutes: Vec::new(),
        }
    }
}

impl DnfOptions {
    /// Options with the three required values set and defaults elsewhere.
    pub fn new(
        install_root: impl Into<PathBuf>,
        cache_dir: impl Into<PathBuf>,
        release_ver: impl Into<String>,
    ) -> Self {
        DnfOptions {
            install_root: install_root.into(),
            cache_dir: cache_dir.into(),
            release_ver: release_ver.into(),
            ..Default::default()
        }
    }

    /// Checks the options for values libdnf would misread or that would touch
    /// the host.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidOptions(m));
        if self.install_root.as_os_str().is_empty() {
            return bad("install_root is not set".into());
        }
        if self.install_root == Path::new("/") {
            return bad("install_root must not be / (strata never installs into the host)".into());
        }
        if self.cache_dir.as_os_str().is_empty() {
            return bad("cache_dir is not set".into());
        }
        if self.release_ver.is_empty() || !is_token(&self.release_ver) {
            return bad(format!(
                "release_ver must be a non-empty token, got {:?}",
                self.release_ver
            ));
        }
        if self.arch.is_empty() || !is_token(&self.arch) {
            return bad(format!(
                "arch must be a non-empty token, got {:?}",
                self.arch
            ));
        }
        if !self.dbpath.starts_with('/') || self.dbpath.contains(char::is_whitespace) {
            return bad(format!(
                "dbpath must be an absolute path, got {:?}",
                self.dbpath
            ));
        }
        if let Some((nevra, path)) = self.substitutes.iter().find(|(_, p)| !p.is_absolute()) {
            return bad(format!(
                "the substitute for {nevra} must be an absolute path, got {}",
                path.display()
            ));
        }
        for (k, v) in &self.rpm_macros {
            if !is_token(k) || v.contains(['\n', '\0']) {
                return bad(format!("invalid rpm macro {k:?} = {v:?}"));
            }
        }
        Ok(())
    }

    /// All rpm macros to define: `_dbpath`, `_pkgverify_level` and
    /// `_pkgverify_flags` first, then the extra ones. All are always set:
    /// rpm's macros are global to the process, so a value an earlier
    /// context set would otherwise hold for the next.
    ///
    /// `_pkgverify_flags` also governs the signature check libdnf runs on
    /// every package before each transaction (whatever the repository's
    /// `gpgcheck`), which otherwise reads each package whole once more, on
    /// one core: with the payloads verified, it checks the headers only
    /// (`RPMVSF_MASK_NOPAYLOAD`).
    pub(crate) fn all_rpm_macros(&self) -> Vec<(String, String)> {
        let (level, flags) = if self.payloads_verified {
            ("none", "0xf0000")
        } else {
            ("digest", "0x0")
        };
        let mut m = vec![
            ("_dbpath".to_string(), self.dbpath.clone()),
            ("_pkgverify_level".to_string(), level.to_string()),
            ("_pkgverify_flags".to_string(), flags.to_string()),
        ];
        m.extend(self.rpm_macros.iter().cloned());
        m
    }
}

/// A repository definition, already parsed by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(default)]
pub struct RepoConfig {
    /// Repository id, e.g. `rhel-8.6-baseos`.
    pub id: String,
    /// Human-readable name; defaults to the id when empty.
    pub name: String,
    /// Base URLs, tried in order: `file:///srv/repo`, `https://…`, or a plain
    /// absolute path. `$releasever` and `$basearch` are substituted.
    pub baseurls: Vec<String>,
    /// ASCII-armored public keys (local paths; a `file://` prefix is
    /// accepted) that packages of this repository must be signed with.
    pub gpgkeys: Vec<PathBuf>,
    /// Verify package signatures against `gpgkeys`.
    pub gpgcheck: bool,
    pub enabled: bool,
}

impl Default for RepoConfig {
    fn default() -> Self {
        RepoConfig {
            id: String::new(),
            name: String::new(),
            baseurls: Vec::new(),
            gpgkeys: Vec::new(),
            gpgcheck: true,
            enabled: true,
        }
    }
}

impl RepoConfig {
    /// An enabled, gpg-checked repository with one base URL and no keys yet.
    pub fn new(id: impl Into<String>, baseurl: impl Into<String>) -> Self {
        RepoConfig {
            id: id.into(),
            baseurls: vec![baseurl.into()],
            ..Default::default()
        }
    }

    /// Adds a signing key.
    pub fn with_gpgkey(mut self, key: impl Into<PathBuf>) -> Self {
        self.gpgkeys.push(key.into());
        self
    }

    /// The key files as local paths (`file://` prefix removed).
    pub(crate) fn gpgkey_paths(&self) -> Vec<PathBuf> {
        self.gpgkeys.iter().map(|k| strip_file_url(k)).collect()
    }
}

fn strip_file_url(p: &Path) -> PathBuf {
    match p.to_str().and_then(|s| s.strip_prefix("file://")) {
        Some(rest) => PathBuf::from(rest),
        None => p.to_path_buf(),
    }
}

/// What to depsolve (and then possibly download and install).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(default)]
pub struct DepsolveRequest {
    /// Package specs to install: names, NEVRAs, provides, file paths, globs.
    pub packages: Vec<String>,
    /// Name globs of available packages that must not be used.
    pub excludes: Vec<String>,
    /// Local `.rpm` files to install as well (e.g. `--override-rpm`); their
    /// dependencies are resolved from the repositories.
    pub local_rpms: Vec<PathBuf>,
    /// Keys the local RPMs must be signed with.
    pub local_gpgkeys: Vec<PathBuf>,
    /// Verify local RPMs against `local_gpgkeys` (when `DnfOptions::gpgcheck`).
    pub local_gpgcheck: bool,
    /// Treat the rpmdb already in the install root as the installed set.
    pub use_installed: bool,
    /// Let requested packages replace installed ones with lower versions.
    pub allow_downgrade: bool,
}

impl Default for DepsolveRequest {
    fn default() -> Self {
        DepsolveRequest {
            packages: Vec::new(),
            excludes: Vec::new(),
            local_rpms: Vec::new(),
            local_gpgkeys: Vec::new(),
            local_gpgcheck: true,
            use_installed: true,
            allow_downgrade: false,
        }
    }
}

impl DepsolveRequest {
    /// A request to install `packages`, with defaults elsewhere.
    pub fn install<S: Into<String>>(packages: impl IntoIterator<Item = S>) -> Self {
        DepsolveRequest {
            packages: packages.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    pub(crate) fn validate(&self, gpgcheck: bool) -> Result<()> {
        for p in self.packages.iter().chain(&self.excludes) {
            if p.trim().is_empty() || p.contains('\0') {
                return Err(Error::InvalidOptions(format!("invalid package spec {p:?}")));
            }
        }
        if gpgcheck
            && self.local_gpgcheck
            && !self.local_rpms.is_empty()
            && self.local_gpgkeys.is_empty()
        {
            return Err(Error::InvalidOptions(
                "local RPMs are gpg-checked but no local_gpgkeys are given".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn local_gpgkey_paths(&self) -> Vec<PathBuf> {
        self.local_gpgkeys
            .iter()
            .map(|k| strip_file_url(k))
            .collect()
    }
}

/// A token is what libdnf's ini parser and rpm's macro syntax take without
/// quoting.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// Checks repository definitions: unique valid ids, usable URLs, keys for
/// every gpg-checked repository.
pub(crate) fn validate_repos(repos: &[RepoConfig], gpgcheck: bool) -> Result<()> {
    let mut seen = BTreeSet::new();
    for r in repos {
        let bad = |reason: String| {
            Err(Error::InvalidOptions(format!(
                "repository {:?}: {reason}",
                r.id
            )))
        };
        if !is_token(&r.id) {
            return bad("id must be non-empty and use only [A-Za-z0-9_.:-]".into());
        }
        if !seen.insert(r.id.as_str()) {
            return bad("defined twice".into());
        }
        if r.name.contains(['\n', '\r', '\0']) {
            return bad("name contains a line break".into());
        }
        if r.baseurls.is_empty() {
            return bad("no baseurl".into());
        }
        for u in &r.baseurls {
            if u.is_empty() || u.contains(|c: char| c.is_whitespace() || c == ',' || c == '\0') {
                return bad(format!(
                    "baseurl {u:?} is empty or contains whitespace or a comma"
                ));
            }
        }
        if gpgcheck && r.gpgcheck && r.enabled && r.gpgkeys.is_empty() {
            return bad("gpgcheck is on but no gpgkey is given".into());
        }
    }
    Ok(())
}

/// Renders the private `.repo` file libdnf loads.
///
/// libdnf itself is told `gpgcheck=0`: for `file://` repositories it would
/// look for the keys inside the repository directory and it also trusts the
/// host's `/etc/pki/rpm-gpg`. Signatures are instead verified by `strata-dnf`
/// against exactly the keys given here (see `Dnf::download`).
pub(crate) fn render_repo_file(repos: &[RepoConfig]) -> String {
    let mut out =
        String::from("# Written by strata-dnf; the only repositories this libdnf context sees.\n");
    for r in repos {
        let name = if r.name.is_empty() { &r.id } else { &r.name };
        out.push_str(&format!(
            "\n[{id}]\nname={name}\nbaseurl={urls}\nenabled={enabled}\ngpgcheck=0\nrepo_gpgcheck=0\nskip_if_unavailable=0\n",
            id = r.id,
            urls = r.baseurls.join(" "),
            enabled = u8::from(r.enabled),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> DnfOptions {
        DnfOptions::new("/tmp/root", "/tmp/cache", "8")
    }

    #[test]
    fn defaults_are_conservative() {
        let o = opts();
        assert!(!o.install_weak_deps);
        assert!(o.gpgcheck);
        assert!(!o.nodocs);
        assert_eq!(o.arch, "x86_64");
        assert_eq!(o.dbpath, "/var/lib/rpm");
        assert_eq!(
            o.all_rpm_macros()[0],
            ("_dbpath".to_string(), "/var/lib/rpm".to_string())
        );
        o.validate().unwrap();
    }

    #[test]
    fn librpm_checks_digests_again_unless_the_caller_verified_them() {
        let level = |o: &DnfOptions| {
            o.all_rpm_macros()
                .into_iter()
                .find(|(k, _)| k == "_pkgverify_level")
                .map(|(_, v)| v)
        };
        let flags = |o: &DnfOptions| {
            o.all_rpm_macros()
                .into_iter()
                .find(|(k, _)| k == "_pkgverify_flags")
                .map(|(_, v)| v)
        };
        let mut o = opts();
        assert_eq!(level(&o).as_deref(), Some("digest"));
        assert_eq!(flags(&o).as_deref(), Some("0x0"));
        o.payloads_verified = true;
        assert_eq!(level(&o).as_deref(), Some("none"));
        assert_eq!(flags(&o).as_deref(), Some("0xf0000"));
    }

    #[test]
    fn options_validation_table() {
        type Edit = Box<dyn Fn(&mut DnfOptions)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "install_root is not set",
                Box::new(|o| o.install_root = PathBuf::new()),
            ),
            ("must not be /", Box::new(|o| o.install_root = "/".into())),
            (
                "cache_dir is not set",
                Box::new(|o| o.cache_dir = PathBuf::new()),
            ),
            ("release_ver", Box::new(|o| o.release_ver = String::new())),
            ("release_ver", Box::new(|o| o.release_ver = "8 9".into())),
            ("dbpath", Box::new(|o| o.dbpath = "var/lib/rpm".into())),
            (
                "rpm macro",
                Box::new(|o| o.rpm_macros = vec![("a b".into(), "x".into())]),
            ),
        ];
        for (want, edit) in cases {
            let mut o = opts();
            edit(&mut o);
            let err = o.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{err} should mention {want}");
        }
    }

    #[test]
    fn repo_validation_table() {
        let good = RepoConfig::new("base", "file:///srv/base").with_gpgkey("/k.asc");
        validate_repos(std::slice::from_ref(&good), true).unwrap();
        let cases: Vec<(&str, Vec<RepoConfig>)> = vec![
            (
                "id must be",
                vec![RepoConfig {
                    id: "a b".into(),
                    ..good.clone()
                }],
            ),
            ("defined twice", vec![good.clone(), good.clone()]),
            (
                "no baseurl",
                vec![RepoConfig {
                    baseurls: vec![],
                    ..good.clone()
                }],
            ),
            (
                "whitespace",
                vec![RepoConfig {
                    baseurls: vec!["file:///a b".into()],
                    ..good.clone()
                }],
            ),
            (
                "no gpgkey",
                vec![RepoConfig {
                    gpgkeys: vec![],
                    ..good.clone()
                }],
            ),
            (
                "line break",
                vec![RepoConfig {
                    name: "x\n[evil]".into(),
                    ..good.clone()
                }],
            ),
        ];
        for (want, repos) in cases {
            let err = validate_repos(&repos, true).unwrap_err().to_string();
            assert!(err.contains(want), "{err} should mention {want}");
        }
        // Without the master gpgcheck switch keys are optional.
        let nokey = RepoConfig::new("base", "file:///srv/base");
        validate_repos(&[nokey], false).unwrap();
    }

    #[test]
    fn repo_file_tells_libdnf_gpgcheck_off_and_lists_urls() {
        let mut r = RepoConfig::new("base", "file:///srv/base").with_gpgkey("file:///k.asc");
        r.baseurls.push("https://mirror/base/$basearch".into());
        let text = render_repo_file(&[r.clone()]);
        assert!(text.contains("[base]\nname=base\nbaseurl=file:///srv/base https://mirror/base/$basearch\nenabled=1\ngpgcheck=0\n"), "{text}");
        assert_eq!(r.gpgkey_paths(), vec![PathBuf::from("/k.asc")]);
    }

    #[test]
    fn metadata_refresh_maps_to_libdnf_cache_age() {
        assert_eq!(MetadataRefresh::default(), MetadataRefresh::Always);
        assert_eq!(MetadataRefresh::Always.cache_age(), 0);
        assert_eq!(MetadataRefresh::Expired.cache_age(), u32::MAX - 1);
        assert_eq!(MetadataRefresh::Never.cache_age(), u32::MAX);
        assert_eq!(
            serde_json::to_string(&MetadataRefresh::Expired).unwrap(),
            r#""expired""#
        );
    }

    #[test]
    fn options_round_trip_through_json() {
        let o = opts();
        let back: DnfOptions = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(o, back);
        // Missing fields take their defaults.
        let partial: DepsolveRequest = serde_json::from_str(r#"{"packages":["bash"]}"#).unwrap();
        assert_eq!(partial, DepsolveRequest::install(["bash"]));
    }

    #[test]
    fn local_rpms_need_keys_when_checked() {
        let mut r = DepsolveRequest::install(["a"]);
        r.local_rpms.push("/x.rpm".into());
        assert!(r.validate(true).is_err());
        assert!(r.validate(false).is_ok());
        r.local_gpgcheck = false;
        assert!(r.validate(true).is_ok());
    }
}
