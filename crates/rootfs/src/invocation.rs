//! How one run of an initramfs generator is called: the command line, the
//! kernel and strata's own compression. `initramfs` makes it and runs it;
//! `initramfs_cache` keys its entries on it.
//!
//! Must not: depend on either of them (both depend on this).

/// Where a tree keeps the initramfs of kernel `kver`, relative to its root.
pub fn image_path(kver: &str) -> String {
    format!("usr/lib/modules/{kver}/initramfs.img")
}

/// How a run of the generator is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The command line, run with the tree as `/`.
    pub argv: Vec<String>,
    /// The kernel it is made for.
    pub kver: String,
    /// The gzip level strata compresses the image at after the generator
    /// ran, if it does.
    pub gzip: Option<u8>,
}
