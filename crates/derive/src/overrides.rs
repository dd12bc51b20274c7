//! `--override-rpm FILE`: a locally built RPM that replaces the release's
//! package of the same name (the CI job that rebuilds the kubelet).
//!
//! The file is a regular file (a FIFO or a device is refused by name,
//! unread), and what its header says is shown in errors and recorded in
//! labels: a name or version with a control character in it is refused.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// An override RPM, as recorded in the image label and meta.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRpm {
    pub name: String,
    pub nevra: String,
    pub path: PathBuf,
    pub sha256: String,
    #[serde(skip)]
    pub build_time: u64,
}

impl OverrideRpm {
    /// As the build's record keeps it.
    pub fn record(&self) -> strata_workdir::record::OverrideMeta {
        strata_workdir::record::OverrideMeta {
            name: self.name.clone(),
            nevra: self.nevra.clone(),
            path: self.path.display().to_string(),
            sha256: self.sha256.clone(),
        }
    }

    /// Reads the RPM's header and hashes the file.
    pub fn read(path: &Path) -> Result<Self> {
        let shown_path = strata_manifest::escaped(&path.display().to_string());
        let mut bytes = Vec::new();
        strata_manifest::open_regular(path)
            .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut bytes))
            .with_context(|| format!("--override-rpm {shown_path}: cannot read it"))?;
        let meta = rpm::PackageMetadata::parse(&mut std::io::Cursor::new(&bytes))
            .with_context(|| format!("--override-rpm {shown_path}: not an RPM package"))?;
        let field = |r: Result<&str, rpm::Error>| -> Result<String> {
            Ok(
                r.with_context(|| format!("--override-rpm {shown_path}: incomplete header"))?
                    .to_string(),
            )
        };
        let name = field(meta.get_name())?;
        let epoch = meta.get_epoch().unwrap_or(0);
        let evr = match epoch {
            0 => format!(
                "{}-{}",
                field(meta.get_version())?,
                field(meta.get_release())?
            ),
            e => format!(
                "{e}:{}-{}",
                field(meta.get_version())?,
                field(meta.get_release())?
            ),
        };
        let nevra = format!("{name}-{evr}.{}", field(meta.get_arch())?);
        if nevra.chars().any(char::is_control) || nevra.chars().any(char::is_whitespace) {
            anyhow::bail!(
                "--override-rpm {shown_path}: its header names `{}`, which no package can be called",
                strata_manifest::shown(&nevra)
            );
        }
        Ok(OverrideRpm {
            name,
            nevra,
            path: path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
            sha256: hex::encode(Sha256::digest(&bytes)),
            build_time: meta.get_build_time().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--override-rpm /dev/zero` read the device whole; a FIFO waited
    /// for a writer.
    #[test]
    fn an_override_rpm_that_is_a_device_or_fifo_is_refused_without_reading_it() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("k.rpm");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo (coreutils)");
        for (path, why) in [
            (
                Path::new("/dev/zero"),
                "a character device, not a regular file",
            ),
            (fifo.as_path(), "a FIFO, not a regular file"),
        ] {
            let e = format!("{:#}", OverrideRpm::read(path).unwrap_err());
            assert_eq!(
                e,
                format!("--override-rpm {}: cannot read it: {why}", path.display())
            );
        }
    }
}
