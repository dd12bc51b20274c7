//! Generates the libext2fs bindings at build time.
//!
//! The header is `/usr/include/ext2fs/ext2fs.h` (libext2fs-dev, the same
//! version as the e2fsprogs that writes the empty filesystem). Only what
//! strata's populate step calls is allowlisted.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=ext2fs");
    println!("cargo:rustc-link-lib=com_err");
    if !std::path::Path::new("/usr/include/ext2fs/ext2fs.h").exists() {
        panic!("/usr/include/ext2fs/ext2fs.h is missing; install libext2fs-dev");
    }
    let mut b = bindgen::Builder::default()
        .header_contents("wrapper.h", "#include <ext2fs/ext2fs.h>\n")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .allowlist_var("unix_io_manager")
        .allowlist_var("EXT2_.*")
        .allowlist_var("LINUX_S_.*")
        .allowlist_var("EXT4_.*_FL")
        .allowlist_type("ext2_inode_large");
    for f in [
        "ext2fs_open2",
        "ext2fs_close2",
        "ext2fs_read_bitmaps",
        "ext2fs_new_inode",
        "ext2fs_inode_alloc_stats2",
        "ext2fs_write_new_inode",
        "ext2fs_read_inode",
        "ext2fs_write_inode",
        "ext2fs_read_inode_full",
        "ext2fs_write_inode_full",
        "ext2fs_link",
        "ext2fs_lookup",
        "ext2fs_expand_dir",
        "ext2fs_mkdir",
        "ext2fs_symlink",
        "ext2fs_fallocate",
        "ext2fs_extent_open2",
        "ext2fs_extent_get",
        "ext2fs_extent_free",
        "ext2fs_inode_size_set",
        "ext2fs_xattrs_open",
        "ext2fs_xattrs_read",
        "ext2fs_xattr_set",
        "ext2fs_xattrs_close",
        "ext2fs_free",
        "error_message",
    ] {
        b = b.allowlist_function(f);
    }
    let bindings = b
        .generate()
        .expect("bindgen could not generate libext2fs bindings");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("bindings.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
