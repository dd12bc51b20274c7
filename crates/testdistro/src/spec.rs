//! Package specifications and how they become signed RPM files.
//!
//! A [`PkgSpec`] is a plain description of one binary RPM: header fields,
//! dependencies, scriptlets and files. [`PkgSpec::build`] turns it into a
//! signed package with the `rpm` crate, reproducibly: every timestamp comes
//! from the spec's build time, never from the clock or the filesystem.
//! This module knows nothing about which packages the fixture contains.

use std::path::Path;

use anyhow::{Context, Result};
use rpm::{CompressionWithLevel, Dependency, FileOptions, Scriptlet, Timestamp};

/// One file, directory or symlink in a package.
#[derive(Clone, Debug)]
pub struct FileSpec {
    pub path: String,
    pub kind: FileKind,
    pub mode: u16,
    pub user: String,
    pub group: String,
    /// `%config(noreplace)`.
    pub config: bool,
    /// `%doc`: dropped by installs with documentation off.
    pub doc: bool,
    /// Files sharing an identity are hardlinks of one another.
    pub hardlink: Option<String>,
    /// `%caps`: file capabilities, e.g. `cap_setuid=ep`.
    pub caps: Option<String>,
}

#[derive(Clone, Debug)]
pub enum FileKind {
    File(Vec<u8>),
    /// A regular file whose bytes are generated when the package is built
    /// (the large synthetic packages: their content is never all in memory
    /// at once).
    Generated(crate::synth::Content),
    Dir,
    Symlink(String),
}

impl FileSpec {
    fn new(path: &str, kind: FileKind, mode: u16) -> Self {
        Self {
            path: path.to_string(),
            kind,
            mode,
            user: "root".into(),
            group: "root".into(),
            config: false,
            doc: false,
            hardlink: None,
            caps: None,
        }
    }

    pub fn file(path: &str, content: impl Into<Vec<u8>>, mode: u16) -> Self {
        Self::new(path, FileKind::File(content.into()), mode)
    }

    /// A regular file of generated content.
    pub fn generated(path: &str, content: crate::synth::Content, mode: u16) -> Self {
        Self::new(path, FileKind::Generated(content), mode)
    }

    pub fn dir(path: &str, mode: u16) -> Self {
        Self::new(path, FileKind::Dir, mode)
    }

    pub fn symlink(path: &str, target: &str) -> Self {
        Self::new(path, FileKind::Symlink(target.to_string()), 0o777)
    }

    pub fn config(mut self) -> Self {
        self.config = true;
        self
    }

    pub fn doc(mut self) -> Self {
        self.doc = true;
        self
    }

    pub fn owner(mut self, user: &str, group: &str) -> Self {
        self.user = user.into();
        self.group = group.into();
        self
    }

    pub fn caps(mut self, caps: &str) -> Self {
        self.caps = Some(caps.into());
        self
    }

    pub fn hardlink(mut self, identity: &str) -> Self {
        self.hardlink = Some(identity.into());
        self
    }

    pub fn size(&self) -> u64 {
        match &self.kind {
            FileKind::File(c) => c.len() as u64,
            FileKind::Generated(c) => c.size as u64,
            _ => 0,
        }
    }
}

/// A dependency as written in a spec file: `name`, `name >= 1.2`, …
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dep(pub String);

impl Dep {
    fn to_rpm(&self) -> Dependency {
        let parts: Vec<&str> = self.0.split_whitespace().collect();
        match parts.as_slice() {
            [name] => Dependency::any(*name),
            [name, "=", v] => Dependency::eq(*name, *v),
            [name, ">=", v] => Dependency::greater_eq(*name, *v),
            [name, ">", v] => Dependency::greater(*name, *v),
            [name, "<=", v] => Dependency::less_eq(*name, *v),
            [name, "<", v] => Dependency::less(*name, *v),
            _ => panic!("malformed fixture dependency {:?}", self.0),
        }
    }
}

/// One binary RPM.
#[derive(Clone, Debug)]
pub struct PkgSpec {
    pub name: String,
    pub epoch: u32,
    pub version: String,
    pub release: String,
    pub arch: String,
    pub summary: String,
    pub license: String,
    pub requires: Vec<Dep>,
    /// `Requires(pre):` — must be installed before this package's %pre runs.
    pub requires_pre: Vec<Dep>,
    pub provides: Vec<Dep>,
    pub conflicts: Vec<Dep>,
    pub pre: Option<String>,
    pub post: Option<String>,
    pub posttrans: Option<String>,
    pub preun: Option<String>,
    pub postun: Option<String>,
    /// `%transfiletriggerin -- PATHS` with a shell body: runs once after a
    /// transaction that installed files under PATHS.
    pub trans_file_triggers_in: Vec<(Vec<String>, String)>,
    pub files: Vec<FileSpec>,
    /// Seconds since the epoch: header build time and every file mtime.
    pub build_time: u32,
    /// An xz payload, as RHEL 8's rpm writes (`w2.xzdio`); zstd (RHEL 9's)
    /// otherwise.
    pub xz_payload: bool,
}

impl PkgSpec {
    pub fn new(name: &str, version: &str, release: &str) -> Self {
        Self {
            name: name.into(),
            epoch: 0,
            version: version.into(),
            release: release.into(),
            arch: "x86_64".into(),
            summary: format!("The {name} package"),
            license: "GPLv2+".into(),
            requires: Vec::new(),
            requires_pre: Vec::new(),
            provides: Vec::new(),
            conflicts: Vec::new(),
            pre: None,
            post: None,
            posttrans: None,
            preun: None,
            postun: None,
            trans_file_triggers_in: Vec::new(),
            files: Vec::new(),
            build_time: 0,
            xz_payload: false,
        }
    }

    /// `name-[epoch:]version-release.arch`
    pub fn nevra(&self) -> String {
        let epoch = if self.epoch > 0 {
            format!("{}:", self.epoch)
        } else {
            String::new()
        };
        format!(
            "{}-{epoch}{}-{}.{}",
            self.name, self.version, self.release, self.arch
        )
    }

    /// The file name createrepo_c and dnf expect.
    pub fn file_name(&self) -> String {
        format!(
            "{}-{}-{}.{}.rpm",
            self.name, self.version, self.release, self.arch
        )
    }

    pub fn requires(mut self, deps: &[&str]) -> Self {
        self.requires
            .extend(deps.iter().map(|d| Dep(d.to_string())));
        self
    }

    pub fn requires_pre(mut self, deps: &[&str]) -> Self {
        self.requires_pre
            .extend(deps.iter().map(|d| Dep(d.to_string())));
        self
    }

    pub fn provides(mut self, deps: &[&str]) -> Self {
        self.provides
            .extend(deps.iter().map(|d| Dep(d.to_string())));
        self
    }

    pub fn files(mut self, files: impl IntoIterator<Item = FileSpec>) -> Self {
        self.files.extend(files);
        self
    }

    pub fn noarch(mut self) -> Self {
        self.arch = "noarch".into();
        self
    }

    pub fn payload_size(&self) -> u64 {
        self.files.iter().map(FileSpec::size).sum()
    }

    /// Builds the package and signs it with `signer` (unsigned when `None`),
    /// writing it to `out`.
    pub fn build(&self, signer: Option<&rpm::signature::pgp::Signer>, out: &Path) -> Result<()> {
        let pkg = self
            .to_package(signer)
            .with_context(|| format!("building fixture package {}", self.nevra()))?;
        pkg.write_file(out)
            .with_context(|| format!("writing {}", out.display()))?;
        Ok(())
    }

    fn to_package(&self, signer: Option<&rpm::signature::pgp::Signer>) -> Result<rpm::Package> {
        let time = Timestamp::from(self.build_time);
        let compression = if self.xz_payload {
            CompressionWithLevel::Xz(2)
        } else {
            CompressionWithLevel::Zstd(3)
        };
        let config = rpm::BuildConfig::v4()
            .source_date(time)
            .compression(compression);
        let mut b = rpm::PackageBuilder::new(
            &self.name,
            &self.version,
            &self.license,
            &self.arch,
            &self.summary,
        );
        b.using_config(config)
            .release(self.release.as_str())
            .description(format!(
                "{}.\nPart of the strata fixture distribution.",
                self.summary
            ))
            .vendor("strata fixture")
            .packager("strata fixture <fixture@strata.invalid>")
            .build_host("fixture.strata.invalid")
            .url("https://strata.invalid/fixture");
        if self.epoch > 0 {
            b.epoch(self.epoch);
        }
        for d in &self.requires {
            b.requires(d.to_rpm());
        }
        for d in &self.requires_pre {
            b.requires(Dependency::script_pre(d.to_rpm().name));
        }
        for d in &self.provides {
            b.provides(d.to_rpm());
        }
        for d in &self.conflicts {
            b.conflicts(d.to_rpm());
        }
        // The builder records each interpreter as a dependency
        // (`Requires(post): /bin/sh`), as rpmbuild does.
        if let Some(pre) = &self.pre {
            b.pre_install_script(Scriptlet::new(pre.as_str()).prog(vec!["/bin/sh"]));
        }
        if let Some(post) = &self.post {
            b.post_install_script(Scriptlet::new(post.as_str()).prog(vec!["/bin/sh"]));
        }
        if let Some(posttrans) = &self.posttrans {
            b.post_trans_script(Scriptlet::new(posttrans.as_str()).prog(vec!["/bin/sh"]));
        }
        if let Some(preun) = &self.preun {
            b.pre_uninstall_script(Scriptlet::new(preun.as_str()).prog(vec!["/bin/sh"]));
        }
        if let Some(postun) = &self.postun {
            b.post_uninstall_script(Scriptlet::new(postun.as_str()).prog(vec!["/bin/sh"]));
        }
        for (paths, body) in &self.trans_file_triggers_in {
            for path in paths {
                b.trans_file_trigger_in(
                    path,
                    None,
                    Scriptlet::new(body.as_str()).prog(vec!["/bin/sh"]),
                );
            }
        }
        for f in &self.files {
            let mut opts = match &f.kind {
                FileKind::File(_) | FileKind::Generated(_) => FileOptions::new(f.path.as_str()),
                FileKind::Dir => FileOptions::dir(f.path.as_str()),
                FileKind::Symlink(target) => FileOptions::symlink(f.path.as_str(), target.as_str()),
            }
            .user(f.user.as_str())
            .group(f.group.as_str())
            .modified_at(time);
            if !matches!(f.kind, FileKind::Symlink(_)) {
                opts = opts.permissions(f.mode);
            }
            if f.config {
                opts = opts.config().noreplace();
            }
            if f.doc {
                opts = opts.doc();
            }
            if let Some(id) = &f.hardlink {
                opts = opts.hardlink(id.as_str());
            }
            if let Some(caps) = &f.caps {
                opts = opts.caps(caps.as_str())?;
            }
            match &f.kind {
                FileKind::File(content) => b.with_file_contents(content.clone(), opts)?,
                FileKind::Generated(content) => b.with_file_contents(content.bytes(), opts)?,
                FileKind::Dir => b.with_dir_entry(opts)?,
                FileKind::Symlink(_) => b.with_symlink(opts)?,
            };
        }
        Ok(match signer {
            Some(s) => b.build_and_sign(s.clone())?,
            None => b.build()?,
        })
    }
}
