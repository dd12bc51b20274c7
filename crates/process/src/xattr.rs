//! Reading a file's extended attributes, never through a symlink.
//!
//! Every stage that copies a tree (the commit, a derived layer, a disk's
//! filesystem) keeps some of its files' xattrs, capabilities first. They
//! read them the same way here: the size asked first, then the value at
//! that size, asked again if it grew in between; a filesystem without
//! xattrs has none; an attribute the file lacks is `None`.

use std::ffi::{CStr, CString};
use std::io;
use std::path::Path;

use rustix::io::Errno;

/// The names of the xattrs of `path` (the link itself when it is one), in
/// the order the filesystem lists them. None on a filesystem without
/// xattrs.
pub fn names(path: &Path) -> io::Result<Vec<CString>> {
    let list = sized(
        || rustix::fs::llistxattr_query(path),
        |buf| rustix::fs::llistxattr(path, buf),
    )
    .map_err(|e| at("listing the xattrs of", path, e))?;
    Ok(list
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| CString::new(name).expect("split at NUL"))
        .collect())
}

/// The value of xattr `name` of `path` (the link itself when it is one):
/// `None` when the file has no such attribute or its filesystem no xattrs.
pub fn get(path: &Path, name: &CStr) -> io::Result<Option<Vec<u8>>> {
    sized(
        || rustix::fs::lgetxattr_query(path, name),
        |buf| rustix::fs::lgetxattr(path, name, buf),
    )
    .map_err(|e| {
        let what = format!("reading xattr {} of", name.to_string_lossy());
        at(&what, path, e)
    })
}

/// Every xattr of `path`, names with their values, in listing order.
pub fn all(path: &Path) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let mut out = Vec::new();
    for name in names(path)? {
        // One removed since the listing is simply not there.
        if let Some(value) = get(path, &name)? {
            out.push((name, value));
        }
    }
    Ok(out)
}

/// Whether overlayfs marked the directory `path` of an upper dir opaque
/// (it replaces a directory of the lower dirs, hiding their content):
/// `trusted.overlay.opaque`, or `user.overlay.opaque` for an overlay
/// mounted with `userxattr` in a user namespace, is `y`.
pub fn overlay_opaque(path: &Path) -> io::Result<bool> {
    for name in [c"trusted.overlay.opaque", c"user.overlay.opaque"] {
        if get(path, name)?.as_deref() == Some(b"y") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Asks `query` for the size, then `read`s at that size; again when the
/// value grew in between, a few times (a filesystem whose sizes keep
/// falling short gets ERANGE, not a loop). `None` for a missing attribute
/// or a filesystem without xattrs.
fn sized(
    query: impl Fn() -> rustix::io::Result<usize>,
    read: impl Fn(&mut [u8]) -> rustix::io::Result<usize>,
) -> rustix::io::Result<Option<Vec<u8>>> {
    for _ in 0..8 {
        let size = match query() {
            Ok(n) => n,
            Err(Errno::NODATA | Errno::NOTSUP) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut buf = vec![0u8; size];
        match read(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(Some(buf));
            }
            Err(Errno::RANGE) => continue,
            Err(Errno::NODATA | Errno::NOTSUP) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Err(Errno::RANGE)
}

fn at(what: &str, path: &Path, e: Errno) -> io::Error {
    let e = io::Error::from(e);
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn reads_names_and_values_of_the_file_not_the_link_target() {
        // Under target/, not /tmp: a tmpfs before Linux 6.6 has no user
        // xattrs.
        let d = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "x").unwrap();
        rustix::fs::setxattr(&f, "user.a", b"one", rustix::fs::XattrFlags::empty())
            .expect("setting a user xattr: the filesystem of target/ must have them");
        let big = vec![7u8; 3000];
        rustix::fs::setxattr(&f, "user.big", &big, rustix::fs::XattrFlags::empty()).unwrap();
        let mut listed = names(&f).unwrap();
        listed.sort();
        assert_eq!(listed, [c("user.a"), c("user.big")]);
        assert_eq!(get(&f, &c("user.a")).unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(get(&f, &c("user.big")).unwrap(), Some(big));
        assert_eq!(get(&f, &c("user.missing")).unwrap(), None);
        assert_eq!(all(&f).unwrap().len(), 2);

        // A symlink's own xattrs (none) are read, not its target's.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(names(&link).unwrap().is_empty());
        assert_eq!(get(&link, &c("user.a")).unwrap(), None);

        assert!(!overlay_opaque(d.path()).unwrap());
        rustix::fs::setxattr(
            d.path(),
            "user.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        assert!(overlay_opaque(d.path()).unwrap());
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = names(Path::new("/nonexistent/strata-xattr")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("/nonexistent/strata-xattr"), "{e}");
    }
}
