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
}
