//! Generates the Berkeley DB bindings at build time.
//!
//! libdb has no pkg-config file on Debian: the header is `/usr/include/db.h`
//! (libdb5.3-dev) and the library `libdb-5.3.so`. Only what the rpmdb writer
//! calls is allowlisted: `db_create`, `db_strerror`, the `DB` handle (whose
//! methods are function pointers in the struct), `DBT` and the flag constants.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=db-5.3");
    if !std::path::Path::new("/usr/include/db.h").exists() {
        panic!("/usr/include/db.h is missing; install libdb5.3-dev");
    }
    let bindings = bindgen::Builder::default()
        .header_contents("wrapper.h", "#include <db.h>\n")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .allowlist_function("db_create")
        .allowlist_function("db_strerror")
        .allowlist_type("DB")
        .allowlist_type("DBT")
        .allowlist_type("DBTYPE")
        .allowlist_var("DB_CREATE")
        .allowlist_var("DB_EXCL")
        .allowlist_var("DB_NOOVERWRITE")
        .allowlist_var("DB_KEYEXIST")
        .allowlist_var("DB_NOSYNC")
        .generate()
        .expect("bindgen could not generate Berkeley DB bindings");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("bindings.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
