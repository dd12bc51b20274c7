//! What a build's input hash covers, for compose and derive alike: the
//! policy's keys (fingerprint and file content), the flattened manifest,
//! every file the manifest read, and every resolved package's NEVRA and
//! repodata checksum. Each stage adds what is its own (a format tag before,
//! the base and overrides for derive).

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use strata_dnf::Package;
use strata_manifest::InputFile;

use crate::policy::Policy;

/// Feeds the common inputs into `h`.
pub fn hash_common(
    h: &mut Sha256,
    policy: &Policy,
    manifest_json: &str,
    files: &[InputFile],
    packages: &[Package],
) -> Result<()> {
    for key in &policy.keys {
        h.update(key.fingerprint.as_bytes());
        h.update(Sha256::digest(
            std::fs::read(&key.file).with_context(|| format!("reading {}", key.file.display()))?,
        ));
    }
    h.update(manifest_json.as_bytes());
    let mut files: Vec<_> = files.iter().map(|f| (&f.path, &f.sha256)).collect();
    files.sort();
    for (path, sha) in files {
        h.update(path.as_os_str().as_encoded_bytes());
        h.update(sha.as_bytes());
    }
    for p in packages {
        h.update(p.nevra.as_bytes());
        if let Some(c) = &p.checksum {
            h.update(c.kind.as_bytes());
            h.update(c.hex.as_bytes());
        }
    }
    Ok(())
}
