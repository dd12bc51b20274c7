//! The object importer: the tar entries of ostree layers → the objects of
//! the commit they carry.
//!
//! An ostree layer holds a repository's object store
//! (`sysroot/ostree/repo/objects/xx/<62 hex>.<ext>`); each object is written
//! with the checksum its path names, so libostree refuses any whose content
//! does not match, and xattrs reach content objects through the
//! `.file-xattrs` / `.file-xattrs-link` entries that precede them. Metadata
//! and xattrs objects are read under size limits. Other entries (checkout
//! hard links, the repo config, refs) are skipped. It writes objects only:
//! it neither opens nor commits the transaction, nor checks that the commit
//! is complete ([`super::import()`] does both).

use std::collections::HashMap;
use std::io::Read;

use oci_spec::image::Descriptor;
use ostree::gio;
use ostree::glib;
use sha2::{Digest as _, Sha256};

use super::entries::{bad_layer, empty_xattrs, entry_path, libc_s_ifreg, stream_content};
use crate::error::{Context, Error, Result};
use crate::layer_stream::LayerCheck;
use crate::layout::Layout;

/// Largest metadata object accepted (libostree's limit).
const MAX_METADATA_SIZE: u64 = 10 * 1024 * 1024;
/// Largest xattrs object accepted.
const MAX_XATTRS_SIZE: u64 = 1024 * 1024;
/// Files up to this size are written in one call.
const SMALL_FILE: u64 = 127 * 1024;
/// Where objects live in an ostree layer.
const OBJECTS_PREFIX: &str = "sysroot/ostree/repo/objects/";

/// Parses `xx/<62 hex>.<ext>` under the objects directory.
fn parse_object_path(rest: &str) -> Option<(String, &str)> {
    let (shard, name) = rest.split_once('/')?;
    let (hash, ext) = name.split_once('.')?;
    let checksum = format!("{shard}{hash}");
    let valid = shard.len() == 2 && crate::labels::is_sha256_hex(&checksum);
    valid.then_some((checksum, ext))
}

fn read_limited(
    entry: &mut impl Read,
    size: u64,
    limit: u64,
    desc: &Descriptor,
    what: &str,
) -> Result<Vec<u8>> {
    if size > limit {
        return Err(bad_layer(
            desc,
            format!("{what}: {size} bytes exceeds the limit of {limit}"),
        ));
    }
    let mut buf = Vec::with_capacity(size as usize);
    entry
        .read_to_end(&mut buf)
        .map_err(|e| bad_layer(desc, format!("reading {what}: {e}")))?;
    if buf.len() as u64 != size {
        return Err(bad_layer(desc, format!("{what}: truncated")));
    }
    Ok(buf)
}

/// Imports the objects of ostree layers.
pub(super) struct ObjectImporter<'r> {
    repo: &'r ostree::Repo,
    /// xattrs by their sha256, per layer.
    xattrs: HashMap<String, glib::Variant>,
    /// The `.file-xattrs-link` seen last: (object, xattrs checksum).
    pending: Option<(String, String)>,
    commit: Option<String>,
    commitmeta: Option<(String, glib::Variant)>,
}

impl<'r> ObjectImporter<'r> {
    pub(super) fn new(repo: &'r ostree::Repo) -> Self {
        Self {
            repo,
            xattrs: HashMap::new(),
            pending: None,
            commit: None,
            commitmeta: None,
        }
    }

    pub(super) fn import_layer(
        &mut self,
        layout: &Layout,
        desc: &Descriptor,
        check: LayerCheck,
        commit_layer: bool,
    ) -> Result<()> {
        self.xattrs.clear();
        self.pending = None;
        let reader = layout.open_layer(desc, check)?;
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries().map_err(|e| bad_layer(desc, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad_layer(desc, format!("reading tar: {e}")))?;
            let path = entry_path(&entry, desc)?;
            let kind = entry.header().entry_type();
            if kind.is_dir() {
                continue;
            }
            let Some(rest) = path.strip_prefix(OBJECTS_PREFIX) else {
                // Checkout hard links, the repo config, refs: not objects.
                continue;
            };
            let (checksum, ext) = parse_object_path(rest)
                .ok_or_else(|| bad_layer(desc, format!("invalid object path {path}")))?;
            self.object(&mut entry, desc, &checksum, ext, commit_layer)
                .map_err(|e| match e {
                    Error::Ostree { context, source } => Error::Ostree {
                        context: format!("layer {}: {context}", desc.digest()),
                        source,
                    },
                    e => e,
                })?;
        }
        // Reading to the end also checks the compression trailer (CRC).
        let mut rest = archive.into_inner();
        std::io::copy(&mut rest, &mut std::io::sink())
            .map_err(|e| bad_layer(desc, format!("reading to the end: {e}")))?;
        if let Some((obj, _)) = &self.pending {
            return Err(bad_layer(
                desc,
                format!("xattrs link for {obj} without the object"),
            ));
        }
        Ok(())
    }

    fn object<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        desc: &Descriptor,
        checksum: &str,
        ext: &str,
        commit_layer: bool,
    ) -> Result<()> {
        let header = entry.header().clone();
        let size = entry.size();
        let kind = header.entry_type();
        let metadata = |entry: &mut tar::Entry<R>, what: &str| -> Result<Vec<u8>> {
            if kind != tar::EntryType::Regular {
                return Err(bad_layer(
                    desc,
                    format!("{what} {checksum} is not a regular file"),
                ));
            }
            read_limited(entry, size, MAX_METADATA_SIZE, desc, what)
        };
        match ext {
            "commit" => {
                if !commit_layer {
                    return Err(bad_layer(desc, "a commit object outside the first layer"));
                }
                if self.commit.is_some() {
                    return Err(bad_layer(desc, "more than one commit object"));
                }
                let data = metadata(entry, "commit")?;
                self.write_metadata(ostree::ObjectType::Commit, checksum, &data)?;
                self.commit = Some(checksum.to_string());
            }
            "commitmeta" => {
                let data = metadata(entry, "commitmeta")?;
                let v = glib::Variant::from_data_with_type(data, glib::VariantTy::VARDICT);
                self.commitmeta = Some((checksum.to_string(), v.normal_form()));
            }
            "dirtree" => {
                let data = metadata(entry, "dirtree")?;
                self.write_metadata(ostree::ObjectType::DirTree, checksum, &data)?;
            }
            "dirmeta" => {
                let data = metadata(entry, "dirmeta")?;
                self.write_metadata(ostree::ObjectType::DirMeta, checksum, &data)?;
            }
            "file-xattrs" => {
                if kind != tar::EntryType::Regular {
                    return Err(bad_layer(
                        desc,
                        format!("xattrs {checksum} is not a regular file"),
                    ));
                }
                let data = read_limited(entry, size, MAX_XATTRS_SIZE, desc, "xattrs")?;
                self.cache_xattrs(desc, data, Some(checksum))?;
            }
            "file-xattrs-link" => {
                if let Some((prev, _)) = &self.pending {
                    return Err(bad_layer(
                        desc,
                        format!("xattrs link for {prev} without the object"),
                    ));
                }
                let xattrs = match kind {
                    tar::EntryType::Link => {
                        let target = entry
                            .link_name_bytes()
                            .map(|l| String::from_utf8_lossy(&l).into_owned())
                            .unwrap_or_default();
                        // The target is `…/objects/xx/<rest>.file-xattrs`.
                        let tail: Vec<&str> = target.rsplitn(3, '/').collect();
                        let joined = match tail.as_slice() {
                            [name, shard, ..] => format!("{shard}/{name}"),
                            _ => String::new(),
                        };
                        match parse_object_path(&joined) {
                            Some((x, "file-xattrs")) => x,
                            _ => {
                                return Err(bad_layer(
                                    desc,
                                    format!("bad xattrs link target {target:?}"),
                                ))
                            }
                        }
                    }
                    tar::EntryType::Regular => {
                        let data = read_limited(entry, size, MAX_XATTRS_SIZE, desc, "xattrs")?;
                        self.cache_xattrs(desc, data, None)?
                    }
                    other => return Err(bad_layer(desc, format!("xattrs link of type {other:?}"))),
                };
                self.pending = Some((checksum.to_string(), xattrs));
            }
            "file" => self.content(entry, desc, checksum, &header)?,
            other => return Err(bad_layer(desc, format!("unknown object type .{other}"))),
        }
        Ok(())
    }

    fn cache_xattrs(
        &mut self,
        desc: &Descriptor,
        data: Vec<u8>,
        expected: Option<&str>,
    ) -> Result<String> {
        let sum = hex::encode(Sha256::digest(&data));
        if let Some(e) = expected {
            if e != sum {
                return Err(bad_layer(
                    desc,
                    format!("xattrs object {e} hashes to {sum}"),
                ));
            }
        }
        let ty = glib::VariantTy::new("a(ayay)").map_err(|e| bad_layer(desc, e))?;
        let v = glib::Variant::from_data_with_type(data, ty);
        self.xattrs.insert(sum.clone(), v.normal_form());
        Ok(sum)
    }

    fn write_metadata(&self, kind: ostree::ObjectType, checksum: &str, data: &[u8]) -> Result<()> {
        let ty = ostree::metadata_variant_type(kind);
        let v = glib::Variant::from_data_with_type(data, &ty).normal_form();
        self.repo
            .write_metadata(kind, Some(checksum), &v, gio::Cancellable::NONE)
            .context_with(|| format!("writing {kind:?} object {checksum}"))?;
        Ok(())
    }

    fn content<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        desc: &Descriptor,
        checksum: &str,
        header: &tar::Header,
    ) -> Result<()> {
        let xattrs = match self.pending.take() {
            Some((obj, x)) if obj == checksum => self.xattrs.get(&x).cloned().ok_or_else(|| {
                bad_layer(desc, format!("xattrs {x} of {checksum} not in the layer"))
            })?,
            Some((obj, _)) => {
                return Err(bad_layer(
                    desc,
                    format!("xattrs link for {obj} followed by object {checksum}"),
                ))
            }
            // Not in the format, but a checksum check below catches any
            // object whose xattrs were really lost.
            None => empty_xattrs(),
        };
        if self
            .repo
            .has_object(ostree::ObjectType::File, checksum, gio::Cancellable::NONE)
            .context_with(|| format!("checking object {checksum}"))?
        {
            return Ok(());
        }
        let bad = |e: std::io::Error| bad_layer(desc, format!("tar header of {checksum}: {e}"));
        let uid = u32::try_from(header.uid().map_err(bad)?).map_err(|e| bad_layer(desc, e))?;
        let gid = u32::try_from(header.gid().map_err(bad)?).map_err(|e| bad_layer(desc, e))?;
        let mode = header.mode().map_err(bad)? & 0o7777;
        let ctx = || format!("writing content object {checksum}");
        match header.entry_type() {
            tar::EntryType::Regular => {
                let size = entry.size();
                if size <= SMALL_FILE {
                    let data = read_limited(entry, size, SMALL_FILE, desc, "file")?;
                    self.repo
                        .write_regfile_inline(
                            Some(checksum),
                            uid,
                            gid,
                            libc_s_ifreg() | mode,
                            Some(&xattrs),
                            &data,
                            gio::Cancellable::NONE,
                        )
                        .context_with(ctx)?;
                } else {
                    let w = self
                        .repo
                        .write_regfile(
                            Some(checksum),
                            uid,
                            gid,
                            libc_s_ifreg() | mode,
                            size,
                            Some(&xattrs),
                        )
                        .context_with(ctx)?;
                    stream_content(entry, &w, size, desc, checksum)?;
                    w.finish(gio::Cancellable::NONE).context_with(ctx)?;
                }
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| bad_layer(desc, format!("symlink {checksum} without target")))?;
                let target = std::str::from_utf8(&target)
                    .map_err(|_| bad_layer(desc, format!("symlink {checksum}: target not UTF-8")))?
                    .to_string();
                self.repo
                    .write_symlink(
                        Some(checksum),
                        uid,
                        gid,
                        Some(&xattrs),
                        &target,
                        gio::Cancellable::NONE,
                    )
                    .context_with(ctx)?;
            }
            other => return Err(bad_layer(desc, format!("object {checksum} is a {other:?}"))),
        }
        Ok(())
    }

    /// The commit checksum, after writing its detached metadata.
    pub(super) fn finish(self, commit_layer: &Descriptor) -> Result<String> {
        let commit = self
            .commit
            .ok_or_else(|| bad_layer(commit_layer, "no commit object in the first layer"))?;
        if let Some((c, meta)) = &self.commitmeta {
            if *c != commit {
                return Err(bad_layer(
                    commit_layer,
                    format!("detached metadata for {c}, not {commit}"),
                ));
            }
            self.repo
                .write_commit_detached_metadata(&commit, Some(meta), gio::Cancellable::NONE)
                .context_with(|| format!("writing detached metadata of {commit}"))?;
        }
        Ok(commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_paths() {
        let c = "a86d80a3e9ff77c2e3144c787b7769b300f91ffd770221aac27bab854960b964";
        let rest = format!("{}/{}.file", &c[..2], &c[2..]);
        assert_eq!(parse_object_path(&rest), Some((c.to_string(), "file")));
        let x = format!("{}/{}.file-xattrs-link", &c[..2], &c[2..]);
        assert_eq!(parse_object_path(&x).map(|p| p.1), Some("file-xattrs-link"));
        for bad in [
            "a8/6d.file",
            "a8",
            "zz/6d80a3e9ff77c2e3144c787b7769b300f91ffd770221aac27bab854960b964.file",
        ] {
            assert_eq!(parse_object_path(bad), None, "{bad}");
        }
    }
}
