//! `--override-rpm FILE`: a locally built RPM that replaces the release's
//! package of the same name (the CI job that rebuilds the kubelet).

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
        let bytes = std::fs::read(path)
            .with_context(|| format!("--override-rpm {}: cannot read it", path.display()))?;
        let meta = rpm::PackageMetadata::parse(&mut std::io::Cursor::new(&bytes))
            .with_context(|| format!("--override-rpm {}: not an RPM package", path.display()))?;
        let field = |r: Result<&str, rpm::Error>| -> Result<String> {
            Ok(
                r.with_context(|| format!("--override-rpm {}: incomplete header", path.display()))?
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
        Ok(OverrideRpm {
            name,
            nevra,
            path: path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
            sha256: hex::encode(Sha256::digest(&bytes)),
            build_time: meta.get_build_time().unwrap_or(0),
        })
    }
}
