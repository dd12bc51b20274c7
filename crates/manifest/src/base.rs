//! The base manifest: what `compose` builds one RHEL-only base image from.
//!
//! Must not: know about OpenShift. Everything release-specific belongs in a
//! release manifest, so that the base stays byte-identical across releases.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::content::{self, AddFile, Initramfs, PartialAddFile, PartialInitramfs};
use crate::cx::Cx;
use crate::document::{self, Document, Loaded, Partial};
use crate::error::ManifestError;
use crate::merge::merge_fields;
use crate::policy::{InputPolicy, PartialInputs};
use crate::repo::{self, PartialRepo, Repo};
use crate::source::FileSource;
use crate::spanned::{OneOrMany, Spanned, Str};
use crate::vars::Vars;
use crate::version::VersionPrefix;

/// A base manifest, includes merged, variables substituted, validated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct BaseManifest {
    pub edition: u32,
    /// The stream name (`rhel-8.6`): names the build directory.
    pub name: String,
    /// The ostree osname / stateroot, e.g. `rhcos`.
    pub osname: String,
    /// dnf's `$releasever`, e.g. `8`.
    pub releasever: String,
    /// Renders the version without its `-serial`.
    pub version_prefix: VersionPrefix,
    pub repos: Vec<Repo>,
    pub inputs: InputPolicy,
    /// Package names, each once, in first-mention order.
    pub packages: Vec<String>,
    pub exclude_packages: Vec<String>,
    /// Packages whose failing scriptlets do not fail the build (rpm-ostree's
    /// `ignore-scripts`): they still run, and their failures are recorded.
    pub ignore_scripts: Vec<String>,
    /// Shell scripts run in the tree, in order, without network.
    pub postprocess: Vec<String>,
    pub add_files: Vec<AddFile>,
    /// Absolute paths or globs removed from the tree.
    pub remove_files: Vec<String>,
    /// systemd units to enable.
    pub units: Vec<String>,
    pub initramfs: Initramfs,
    /// How the image keeps its rpm database: what its own rpm reads.
    pub rpmdb: RpmdbBackend,
    /// Install documentation (default true).
    pub documentation: bool,
    /// Install weak dependencies (default false).
    pub recommends: bool,
    /// Resolved against the manifest that names it.
    #[serde(serialize_with = "crate::canonical::option_path")]
    pub lockfile: Option<PathBuf>,
}

/// The rpm database formats an image can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RpmdbBackend {
    /// Berkeley DB files in `/usr/share/rpm`: RHEL 8's rpm (4.14) reads and
    /// writes nothing else.
    Bdb,
    /// One sqlite file: RHEL 9 and later.
    Sqlite,
}

impl RpmdbBackend {
    pub fn parse(text: &str) -> Option<RpmdbBackend> {
        match text {
            "bdb" => Some(RpmdbBackend::Bdb),
            "sqlite" => Some(RpmdbBackend::Sqlite),
            _ => None,
        }
    }

    /// What the target's rpm uses: Berkeley DB up to RHEL 8, sqlite from
    /// RHEL 9 on, and for a `$releasever` that is not a number (a newer
    /// distribution's name).
    pub fn for_releasever(releasever: &str) -> RpmdbBackend {
        match releasever
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok())
        {
            Some(major) if major <= 8 => RpmdbBackend::Bdb,
            _ => RpmdbBackend::Sqlite,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RpmdbBackend::Bdb => "bdb",
            RpmdbBackend::Sqlite => "sqlite",
        }
    }
}

impl BaseManifest {
    /// Parses one manifest text without reading any file. `origin` names the
    /// text in errors and anchors relative paths. A manifest that uses
    /// `include` or a `.repo` file fails here: use [`BaseManifest::load`].
    /// add-files sources are resolved but not checked.
    pub fn parse(text: &str, origin: &Path, vars: &Vars) -> Result<Self, ManifestError> {
        document::parse(text, origin, vars)
    }

    /// Reads a manifest, its includes, `.repo` files and add-files sources
    /// from the filesystem.
    pub fn load(path: &Path, vars: &Vars) -> Result<Loaded<Self>, ManifestError> {
        document::load(path, vars)
    }

    /// Like [`BaseManifest::load`], reading through `source`.
    pub fn load_from(
        source: &dyn FileSource,
        path: &Path,
        vars: &Vars,
    ) -> Result<Loaded<Self>, ManifestError> {
        document::load_from(source, path, vars)
    }

    /// Deterministic JSON of the whole manifest (sorted keys, no
    /// whitespace), as written.
    pub fn to_canonical_json(&self) -> String {
        crate::canonical::to_json(self)
    }

    /// Deterministic JSON of what the manifest means: its part of
    /// compose's input hash. The lists that are sets are read as sets
    /// (sorted, each item once): package names (`packages`,
    /// `exclude-packages`, `ignore-scripts`: dnf resolves a request, not a
    /// sequence), `units` (each enabled on its own), the policy's
    /// `inputs.repos` and `inputs.keys` (what is allowed). The others stay
    /// as written, their order being part of what is built: `repos` (the
    /// order the solver is given them can decide which of two repos
    /// offering one package it takes), `postprocess` (scripts run one
    /// after another on what the last left), `add-files` and
    /// `remove-files` (done in turn, and two paths can meet through the
    /// tree's symlinks).
    pub fn to_input_json(&self) -> String {
        let mut m = self.clone();
        for set in [
            &mut m.packages,
            &mut m.exclude_packages,
            &mut m.ignore_scripts,
            &mut m.units,
        ] {
            crate::canonical::as_set(set);
        }
        m.inputs.as_sets();
        crate::canonical::to_json(&m)
    }
}

/// A base manifest file, as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "kebab-case",
    expecting = "a base manifest (a YAML mapping)"
)]
pub(crate) struct PartialBase {
    edition: Option<Spanned<u32>>,
    include: Option<OneOrMany>,
    variables: Option<BTreeMap<Str, Option<Str>>>,
    name: Option<Str>,
    osname: Option<Str>,
    releasever: Option<Str>,
    version_prefix: Option<Str>,
    repos: Option<Vec<Spanned<PartialRepo>>>,
    inputs: Option<PartialInputs>,
    packages: Option<Vec<Str>>,
    exclude_packages: Option<Vec<Str>>,
    ignore_scripts: Option<Vec<Str>>,
    postprocess: Option<Vec<Str>>,
    add_files: Option<Vec<Spanned<PartialAddFile>>>,
    remove_files: Option<Vec<Str>>,
    units: Option<Vec<Str>>,
    initramfs: Option<PartialInitramfs>,
    rpmdb: Option<Str>,
    documentation: Option<Spanned<bool>>,
    recommends: Option<Spanned<bool>>,
    lockfile: Option<Str>,
}
merge_fields!(PartialBase {
    edition,
    include,
    variables,
    name,
    osname,
    releasever,
    version_prefix,
    repos,
    inputs,
    packages,
    exclude_packages,
    ignore_scripts,
    postprocess,
    add_files,
    remove_files,
    units,
    initramfs,
    rpmdb,
    documentation,
    recommends,
    lockfile,
});

impl Partial for PartialBase {
    fn edition(&self) -> Option<&Spanned<u32>> {
        self.edition.as_ref()
    }
    fn take_includes(&mut self) -> Vec<Str> {
        self.include.take().map(|i| i.0).unwrap_or_default()
    }
    fn variables(&self) -> Option<&BTreeMap<Str, Option<Str>>> {
        self.variables.as_ref()
    }
    fn repos_mut(&mut self) -> Option<&mut Vec<Spanned<PartialRepo>>> {
        self.repos.as_mut()
    }
}

impl Document for BaseManifest {
    type Partial = PartialBase;

    fn finish(p: PartialBase, cx: &mut Cx<'_>) -> Result<Self, ManifestError> {
        let edition = content::edition(cx, p.edition)?;
        let name = content::required_text(cx, p.name, "name")?;
        content::check_name(cx, &name, "name")?;
        let osname = content::required_text(cx, p.osname, "osname")?;
        content::check_name(cx, &osname, "osname")?;
        let releasever = content::required_text(cx, p.releasever, "releasever")?;
        content::check_name(cx, &releasever, "releasever")?;
        let (prefix, prefix_at) = content::required_text(cx, p.version_prefix, "version-prefix")?;
        let version_prefix = VersionPrefix::parse(&prefix)
            .map_err(|reason| cx.invalid(prefix_at, "version-prefix", reason))?;
        let repos = repo::finish(cx, cx.required(p.repos, "repos")?, Some(&releasever.0))?;
        content::non_empty(cx, &repos, "repos")?;
        let inputs = content::inputs(cx, p.inputs, &repos)?;
        let packages = content::packages(cx, "packages", p.packages)?;
        content::non_empty(cx, &packages, "packages")?;
        let exclude_packages = content::packages(cx, "exclude-packages", p.exclude_packages)?;
        content::check_exclusions(cx, &packages, &exclude_packages)?;
        let ignore_scripts = content::packages(cx, "ignore-scripts", p.ignore_scripts)?;
        let postprocess = content::scripts(cx, p.postprocess)?;
        let add_files = content::add_files(cx, p.add_files)?;
        let remove_files = content::remove_files(cx, p.remove_files)?;
        let units = content::units(cx, p.units)?;
        let initramfs = content::initramfs(cx, p.initramfs)?;
        let rpmdb = match p.rpmdb {
            Some(r) => {
                let text = cx.text(&r)?;
                RpmdbBackend::parse(&text).ok_or_else(|| {
                    cx.invalid(r.at, "rpmdb", format!("{text:?} is not bdb or sqlite"))
                })?
            }
            None => RpmdbBackend::for_releasever(&releasever.0),
        };
        let lockfile = match p.lockfile {
            None => None,
            Some(l) => Some(cx.path(l.at, &cx.text(&l)?)),
        };
        Ok(BaseManifest {
            edition,
            name: name.0,
            osname: osname.0,
            releasever: releasever.0,
            version_prefix,
            repos: repos.into_iter().map(|(r, _)| r).collect(),
            inputs,
            packages: content::names(packages),
            exclude_packages: content::names(exclude_packages),
            ignore_scripts: content::names(ignore_scripts),
            postprocess,
            add_files,
            remove_files,
            units,
            initramfs,
            rpmdb,
            documentation: p.documentation.is_none_or(|d| d.value),
            recommends: p.recommends.is_some_and(|r| r.value),
            lockfile,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Fingerprint, KeyRef};

    const MINIMAL: &str = "\
edition: 1
name: rhel-8.6
osname: rhcos
releasever: \"8\"
version-prefix: 8.6.<date:%Y%m%d>
repos:
  - id: baseos
    baseurl: file:///srv/baseos
    gpgkey: [file:///srv/key]
inputs:
  repos: [baseos]
  keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]
packages:
  - kernel
";

    fn parse(text: &str) -> Result<BaseManifest, ManifestError> {
        let vars = Vars::new().with("fixture", "/tmp/x").unwrap();
        BaseManifest::parse(text, Path::new("m.yaml"), &vars)
    }

    #[test]
    fn minimal_manifest_gets_defaults() {
        let m = parse(MINIMAL).unwrap();
        assert_eq!(m.edition, 1);
        assert_eq!(m.name, "rhel-8.6");
        assert_eq!(m.releasever, "8");
        assert_eq!(m.version_prefix.as_str(), "8.6.<date:%Y%m%d>");
        assert_eq!(m.repos.len(), 1);
        let r = &m.repos[0];
        assert_eq!(r.name, "baseos");
        assert!(r.gpgcheck && r.enabled && r.sslverify);
        assert!(!r.repo_gpgcheck && !r.skip_if_unavailable && !r.module_hotfixes);
        assert_eq!(
            m.inputs.keys,
            vec![KeyRef::Fingerprint(
                Fingerprint::parse("567E347AD0044ADE55BA8A5F199E2F91FD431D51").unwrap()
            )]
        );
        assert!(m.documentation);
        assert!(!m.recommends);
        assert_eq!(m.initramfs, Initramfs::default());
        assert_eq!(m.lockfile, None);
        assert_eq!(m.rpmdb, RpmdbBackend::Bdb);
    }

    #[test]
    fn rpmdb_follows_the_release_unless_set() {
        let nine = MINIMAL.replace("releasever: \"8\"", "releasever: \"9\"");
        assert_eq!(parse(&nine).unwrap().rpmdb, RpmdbBackend::Sqlite);
        let set = format!("{MINIMAL}rpmdb: sqlite\n");
        assert_eq!(parse(&set).unwrap().rpmdb, RpmdbBackend::Sqlite);
        let bad = format!("{MINIMAL}rpmdb: ndb\n");
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            "m.yaml:15:8: invalid rpmdb: \"ndb\" is not bdb or sqlite"
        );
    }

    #[test]
    fn packages_split_deduplicate_and_keep_order() {
        let text = MINIMAL.replace(
            "packages:\n  - kernel\n",
            "packages:\n  - kernel kernel-core\n  - \"  bash   kernel \"\n  - bash\n",
        );
        assert_eq!(
            parse(&text).unwrap().packages,
            ["kernel", "kernel-core", "bash"]
        );
    }

    #[test]
    fn variables_substitute_everywhere_with_caller_overrides() {
        let text = format!(
            "{MINIMAL}variables:\n  fixture: /default\n  osname: rhcos\n  mode: \"0600\"\n\
             add-files:\n  - {{src: files/motd, dest: /etc/motd, mode: \"${{mode}}\"}}\n\
             postprocess:\n  - |\n    echo ${{osname}} > /etc/x\n    echo $HOME $$ $${{literal}}\n\
             lockfile: ${{osname}}.lock.json\n"
        )
        .replace(
            "file:///srv/baseos",
            "file://${fixture}/baseos/$basearch/$releasever",
        );
        let m = parse(&text).unwrap();
        assert_eq!(m.repos[0].baseurl, ["file:///tmp/x/baseos/x86_64/8"]);
        assert_eq!(
            m.postprocess,
            ["echo rhcos > /etc/x\necho $HOME $$ ${literal}\n"]
        );
        assert_eq!(m.add_files[0].src, PathBuf::from("files/motd"));
        assert_eq!(m.add_files[0].mode, Some(0o600));
        assert_eq!(m.lockfile, Some(PathBuf::from("rhcos.lock.json")));
    }

    /// Every error names the file, line and column that caused it.
    #[test]
    fn errors_point_at_their_cause() {
        let add = |extra: &str| format!("{MINIMAL}{extra}");
        let swap = |from: &str, to: &str| {
            assert!(MINIMAL.contains(from), "{from}");
            MINIMAL.replace(from, to)
        };
        let cases: Vec<(String, &str)> = vec![
            (
                add("osnme: x\n"),
                "m.yaml:15:1: unknown field `osnme`, expected one of `edition`, `include`, `variables`, `name`, `osname`, `releasever`, `version-prefix`, `repos`, `inputs`, `packages`, `exclude-packages`, `ignore-scripts`, `postprocess`, `add-files`, `remove-files`, `units`, `initramfs`, `rpmdb`, `documentation`, `recommends`, `lockfile`",
            ),
            (
                swap("    gpgkey:", "    gpgkeys:"),
                "m.yaml:9:5: unknown field `gpgkeys`, expected one of `file`, `id`, `name`, `baseurl`, `metalink`, `mirrorlist`, `gpgkey`, `gpgcheck`, `repo_gpgcheck`, `enabled`, `sslverify`, `sslcacert`, `sslclientcert`, `sslclientkey`, `priority`, `cost`, `module_hotfixes`, `skip_if_unavailable`",
            ),
            (
                swap("packages:\n  - kernel\n", "packages: kernel\n"),
                "m.yaml:13:11: packages: invalid type: string \"kernel\", expected a sequence",
            ),
            (
                add("documentation: maybe\n"),
                "m.yaml:15:16: documentation: invalid type: string \"maybe\", expected a boolean",
            ),
            (
                swap("name: rhel-8.6\n", ""),
                "m.yaml: missing required field `name`",
            ),
            (
                swap("inputs:\n  repos: [baseos]\n", "inputs:\n"),
                "m.yaml: missing required field `inputs.repos`",
            ),
            (
                swap("edition: 1", "edition: 2"),
                "m.yaml:1:10: invalid edition: 2 is not an edition of this format (the only one is 1)",
            ),
            (
                swap("  - kernel\n", "  - kernel \"\"\n  - \"\"\n"),
                "m.yaml:14:12: invalid packages: `\"\"` is not a package name (`\"`: names are letters, digits and `._+-`)",
            ),
            (
                swap("  - kernel\n", "  - kernel\n  - \" \"\n"),
                "m.yaml:15:5: invalid packages: an entry holds no package name",
            ),
            (
                swap("  - kernel\n", "  - bash kernel\nexclude-packages:\n  - foo kernel\n"),
                "m.yaml:16:9: package `kernel` is excluded but also requested in packages at m.yaml:14:10",
            ),
            (
                swap("file:///srv/baseos", "file://${fixtur}/baseos"),
                "m.yaml:8:21: unknown variable `${fixtur}` (defined: fixture)",
            ),
            (
                add("variables:\n  token: ~\npostprocess:\n  - |\n    set -eu\n    curl -H ${token}\n"),
                "m.yaml:20:13: variable `token` has no value: it is declared without a default, so the caller must set it (--var token=VALUE)",
            ),
            (
                add("postprocess: [\"echo ${oops\"]\n"),
                "m.yaml:15:21: unterminated `${`: write `${name}`, or `$${` for a literal `${`",
            ),
            (
                add("variables:\n  basearch: aarch64\n"),
                "m.yaml:16:3: `basearch` is reserved: repo fields substitute dnf's $basearch themselves",
            ),
            (
                swap("  repos: [baseos]", "  repos: [baseos, appstream]"),
                "m.yaml:11:19: inputs.repos allows `appstream`, but no entry in repos defines it",
            ),
            (
                swap("    gpgkey: [file:///srv/key]\n", "  - id: baseos\n    baseurl: file:///other\n"),
                "m.yaml:9:9: duplicate repo id `baseos` (first defined at m.yaml:7:9)",
            ),
            (
                swap("    baseurl: file:///srv/baseos\n", ""),
                "m.yaml:7:9: invalid repo: `baseos` has no baseurl, metalink or mirrorlist",
            ),
            (
                swap("file:///srv/baseos", "/srv/baseos"),
                "m.yaml:8:14: invalid baseurl: `/srv/baseos` is not a URL (write file:///path for a local repo)",
            ),
            (
                swap("  - id: baseos\n", "  - name: nameless\n"),
                "m.yaml:7:5: missing required field `id`",
            ),
            (
                swap("keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]", "keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D5]"),
                "m.yaml:12:10: invalid inputs.keys: `567E347AD0044ADE55BA8A5F199E2F91FD431D5` is not a key fingerprint: it has 39 hex digits, not 40 or 64",
            ),
            (
                swap("keys: [567E347AD0044ADE55BA8A5F199E2F91FD431D51]", "keys: [{path: x}]"),
                "m.yaml:12:11: unknown field `path`, expected `file`",
            ),
            (
                swap("version-prefix: 8.6.<date:%Y%m%d>", "version-prefix: 8.6.<date:%y%m%d>"),
                "m.yaml:5:17: invalid version-prefix: `%y` is not a supported date field (use %Y %m %d %H %M %S)",
            ),
            (
                add("add-files:\n  - src: a\n    dest: etc/motd\n"),
                "m.yaml:17:11: invalid add-files dest: `etc/motd` is not an absolute path",
            ),
            (
                add("add-files:\n  - src: a\n"),
                "m.yaml:16:5: add-files[0]: missing field `dest`",
            ),
            (
                add("add-files:\n  - {src: a, dest: /etc/a, mode: rw}\n"),
                "m.yaml:16:34: invalid add-files mode: `rw` is not an octal mode like 0644 (at most 07777)",
            ),
            (
                add("include: base.yaml\n"),
                "m.yaml:15:10: cannot read include `base.yaml`",
            ),
            (
                add("initramfs: {generator: mkinitcpio}\n"),
                "m.yaml:15:24: invalid initramfs generator: `mkinitcpio` is not a known generator (known: dracut)",
            ),
            (
                add("units: [sshd]\n"),
                "m.yaml:15:9: invalid units: `sshd` is not a unit name like sshd.service",
            ),
            (
                add("remove-files: [usr/share/doc]\n"),
                "m.yaml:15:16: invalid remove-files: `usr/share/doc` is not an absolute path",
            ),
            (
                swap("name: rhel-8.6", "name: rhel 8.6"),
                "m.yaml:2:7: invalid name: `rhel 8.6` holds ` `: use letters, digits and `._-`",
            ),
            (
                "- just\n- a list\n".to_string(),
                "m.yaml:1:1: invalid type: sequence, expected a base manifest (a YAML mapping)",
            ),
            (
                "name: \"unterminated\n".to_string(),
                "m.yaml:2:1: found unexpected end of stream, while scanning a quoted scalar at line 1 column 7",
            ),
            ("# nothing\n".to_string(), "m.yaml: missing required field `edition`"),
            (
                add("packages: [kernel]\n"),
                // serde reports a duplicate key at the start of its mapping.
                "m.yaml:1:1: duplicate field `packages`",
            ),
        ];
        let mut failures = Vec::new();
        for (text, want) in &cases {
            match parse(text) {
                Ok(_) => failures.push(format!("parsed, wanted: {want}\n{text}")),
                Err(e) if e.to_string() != *want => {
                    failures.push(format!("got:  {e}\nwant: {want}\n{text}"))
                }
                Err(_) => {}
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    #[test]
    fn a_repo_outside_the_policy_is_allowed() {
        let text = MINIMAL.replace(
            "inputs:",
            "  - id: epel-8\n    baseurl: file:///srv/epel\ninputs:",
        );
        let m = parse(&text).unwrap();
        assert_eq!(m.repos.len(), 2);
        assert!(m.inputs.allows_repo("baseos"));
        assert!(!m.inputs.allows_repo("epel-8"));
    }

    #[test]
    fn canonical_json_is_stable_and_sorted() {
        let m = parse(MINIMAL).unwrap();
        let json = m.to_canonical_json();
        assert_eq!(json, parse(MINIMAL).unwrap().to_canonical_json());
        assert!(
            json.starts_with(
                r#"{"add-files":[],"documentation":true,"edition":1,"exclude-packages":[]"#
            ),
            "{json}"
        );
        assert!(json.contains(r#""inputs":{"keys":[{"fingerprint":"567E347AD0044ADE55BA8A5F199E2F91FD431D51"}],"repos":["baseos"]}"#), "{json}");
        assert!(
            json.contains(r#""version-prefix":"8.6.<date:%Y%m%d>""#),
            "{json}"
        );
    }

    /// A base manifest with these lists (YAML flow sequences).
    fn listing(packages: &str, units: &str, scripts: &str, keys: &str) -> BaseManifest {
        parse(&format!(
            "edition: 1\nname: rhel-8.6\nosname: rhcos\nreleasever: \"8\"\n\
             version-prefix: 8.6.<date:%Y%m%d>\n\
             repos:\n  - id: baseos\n    baseurl: file:///srv/baseos\n  - id: appstream\n    baseurl: file:///srv/appstream\n\
             inputs:\n  repos: [appstream, baseos]\n  keys: {keys}\n\
             packages: {packages}\nunits: {units}\npostprocess: {scripts}\n"
        ))
        .unwrap()
    }

    /// The input hash changed with the order of the package names: a list
    /// of names is a set, and so are units and the policy's keys; scripts
    /// are not.
    #[test]
    fn the_input_json_reads_package_lists_as_sets_and_scripts_in_order() {
        const K1: &str = "567E347AD0044ADE55BA8A5F199E2F91FD431D51";
        const K2: &str = "0123456789ABCDEF0123456789ABCDEF01234567";
        let a = listing(
            "[kernel dracut, bash]",
            "[sshd.service, chronyd.service]",
            "[\"true\", \"false\"]",
            &format!("[{K1}, {{file: https://example.com/key}}, {K2}]"),
        );
        let b = listing(
            "[bash, dracut, kernel kernel]",
            "[chronyd.service, sshd.service]",
            "[\"true\", \"false\"]",
            &format!("[{{file: https://example.com/key}}, {K2}, {K1}]"),
        );
        assert_ne!(a.to_canonical_json(), b.to_canonical_json());
        assert_eq!(a.to_input_json(), b.to_input_json());
        let scripts = listing(
            "[kernel dracut, bash]",
            "[sshd.service, chronyd.service]",
            "[\"false\", \"true\"]",
            &format!("[{K1}, {{file: https://example.com/key}}, {K2}]"),
        );
        assert_ne!(a.to_input_json(), scripts.to_input_json());
        // A manifest whose sets are written sorted reads as written.
        let sorted = listing(
            "[bash, dracut, kernel]",
            "[chronyd.service, sshd.service]",
            "[\"true\"]",
            &format!("[{K2}, {K1}, {{file: https://example.com/key}}]"),
        );
        assert_eq!(sorted.to_canonical_json(), sorted.to_input_json());
    }
}
