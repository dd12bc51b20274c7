//! What a depsolve reports about each package: plain data, no libdnf handles.
//!
//! Why it exists: compose writes lockfiles and meta.json from these records,
//! and derive ships them across a process boundary as JSON, so they must be
//! owned, serialisable values. What it must not do: reach back into libdnf;
//! anything needing a live package belongs to the FFI seam.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One package a transaction installs (or would install).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Package {
    pub name: String,
    /// 0 when the package has no epoch.
    pub epoch: u64,
    pub version: String,
    pub release: String,
    pub arch: String,
    /// `name-[epoch:]version-release.arch`, as libdnf prints it.
    pub nevra: String,
    /// Id of the repository it comes from (`@commandline` for local files).
    pub repo_id: String,
    /// The package checksum from the repodata (`None` only for packages
    /// without one, e.g. installed ones).
    pub checksum: Option<Checksum>,
    /// Size of the `.rpm` file in bytes.
    pub download_size: u64,
    /// Size of the installed payload in bytes.
    pub install_size: u64,
    /// The source RPM file name, e.g. `bash-4.4.20-4.el8.src.rpm`.
    pub source_rpm: Option<String>,
    /// Build time, seconds since the epoch.
    pub build_time: u64,
    /// Path of the `.rpm` relative to the repository root (`location href`).
    pub location: String,
    /// The verified local file, set once downloaded (for `file://`
    /// repositories: the file inside the repository itself).
    pub local_path: Option<PathBuf>,
}

impl Package {
    /// `epoch:version-release`, with the epoch omitted when 0.
    pub fn evr(&self) -> String {
        if self.epoch == 0 {
            format!("{}-{}", self.version, self.release)
        } else {
            format!("{}:{}-{}", self.epoch, self.version, self.release)
        }
    }
}

/// A package checksum from repodata.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Checksum {
    /// Algorithm name as in repodata: `sha256`, `sha512`, `sha1`, `md5`.
    pub kind: String,
    /// Lower-case hex digest.
    pub hex: String,
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(epoch: u64) -> Package {
        Package {
            name: "bash".into(),
            epoch,
            version: "4.4.20".into(),
            release: "4.el8".into(),
            arch: "x86_64".into(),
            nevra: String::new(),
            repo_id: "baseos".into(),
            checksum: None,
            download_size: 0,
            install_size: 0,
            source_rpm: None,
            build_time: 0,
            location: String::new(),
            local_path: None,
        }
    }

    #[test]
    fn evr_omits_zero_epoch() {
        assert_eq!(pkg(0).evr(), "4.4.20-4.el8");
        assert_eq!(pkg(2).evr(), "2:4.4.20-4.el8");
    }

    #[test]
    fn checksum_displays_as_kind_colon_hex() {
        let c = Checksum {
            kind: "sha256".into(),
            hex: "ab12".into(),
        };
        assert_eq!(c.to_string(), "sha256:ab12");
    }
}
