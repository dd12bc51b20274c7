//! Registry options shared by the commands that pull or push images.

use std::path::PathBuf;

use strata_oscontainer::TransportOptions;

/// How registries (docker://…) are reached.
#[derive(Debug, Clone, clap::Args, PartialEq, Eq)]
pub struct RegistryArgs {
    /// Require HTTPS and verify certificates for docker:// references
    /// (`--tls-verify=false` for a local registry).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub tls_verify: bool,
    /// A containers-auth.json with registry credentials.
    #[arg(long)]
    pub authfile: Option<PathBuf>,
}

impl RegistryArgs {
    pub(crate) fn transport(&self) -> TransportOptions {
        let mut t = TransportOptions::default();
        t.tls_verify = self.tls_verify;
        t.authfile = self.authfile.clone();
        t
    }

    /// `--push DEST` of compose and derive: copies `image` (manifest digest
    /// `digest`) to `dest` unless the registry already serves it there.
    pub(crate) fn push(
        &self,
        image: &str,
        digest: &str,
        dest: &str,
    ) -> anyhow::Result<strata_oscontainer::Pushed> {
        use anyhow::Context;
        let src = strata_oscontainer::ImageRef::parse(image, None)?;
        let to = strata_oscontainer::ImageRef::parse(dest, None)?;
        strata_oscontainer::push_unless_present(&src, digest, &to, &self.transport())
            .with_context(|| format!("pushing {image} to {dest}"))
    }
}
