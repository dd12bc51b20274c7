//! Generates the libdnf bindings at build time.
//!
//! pkg-config (`libdnf gobject-2.0 gio-2.0`, plus `rpm` for the keyring calls)
//! supplies both the include paths handed to clang and the link flags. The
//! headers are parsed as C (`-x c`): libdnf's public C headers keep their C++
//! parts behind `__cplusplus` guards. Only the functions, types and constants
//! the `strata-dnf` wrapper uses are allowlisted, so the generated file stays
//! small and a libdnf upgrade that changes an unused symbol cannot break us.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");

    let mut include_paths = Vec::new();
    for lib in ["libdnf", "gobject-2.0", "gio-2.0", "glib-2.0", "rpm"] {
        let mut config = pkg_config::Config::new();
        config.print_system_libs(false);
        // strata-dnf relies on libdnf 0.69's handling of a replaced sack
        // (`Context::setup_sack` releases the orphaned one): another minor
        // must be checked before it is accepted.
        if lib == "libdnf" {
            config.range_version("0.69".."0.70");
        }
        let found = config
            .probe(lib)
            .unwrap_or_else(|e| {
                panic!("pkg-config could not find {lib} ({e}); install libdnf-dev (0.69) libglib2.0-dev librepo-dev librpm-dev libsolv-dev")
            });
        include_paths.extend(found.include_paths);
    }

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_arg("-x")
        .clang_arg("c")
        .clang_args(include_paths.iter().map(|p| format!("-I{}", p.display())))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(false)
        .layout_tests(false)
        .generate_comments(false);

    // Functions: the libdnf C API families the wrapper calls, plus glib and
    // librpm helpers to free what libdnf hands back.
    for f in [
        "dnf_context_.*",
        "dnf_repo_get_id",
        "dnf_repo_get_location",
        "dnf_repo_get_packages",
        "dnf_repo_set_location",
        "dnf_repo_set_packages",
        "dnf_repo_get_enabled",
        "dnf_repo_is_local",
        "dnf_sack_add_cmdline_package",
        "dnf_sack_add_excludes",
        "dnf_sack_count",
        "dnf_package_.*",
        "dnf_packageset_.*",
        "dnf_goal_depsolve",
        "dnf_goal_get_packages",
        "dnf_transaction_.*",
        "dnf_state_new",
        "dnf_state_reset",
        "dnf_keyring_add_public_key",
        "dnf_keyring_check_untrusted_file",
        "dnf_error_quark",
        "dnf_conf_main_set_option",
        "dnf_conf_main_get_option",
        "hy_goal_.*",
        "hy_query_.*",
        "hy_selector_.*",
        "hy_subject_.*",
        "hy_chksum_name",
        "hy_chksum_str",
        "g_object_ref",
        "g_object_unref",
        "g_error_free",
        "g_free",
        "g_strfreev",
        "g_ptr_array_unref",
        "g_quark_to_string",
        "g_log_set_handler",
        "g_signal_connect_data",
        "g_signal_handler_disconnect",
        "rpmKeyringNew",
        "rpmKeyringFree",
        "rpmExpand",
        "rpmPushMacro",
        "rpmFreeMacros",
        "rpmReadConfigFiles",
        "rpmlogClose",
        "rpmlogPrint",
        "rpmlogSetFile",
        "fdopen",
        "fclose",
    ] {
        builder = builder.allowlist_function(f);
    }

    // Types: opaque GObject instances, handles, and the plain structs the
    // allowlisted signatures mention.
    for t in [
        "DnfContext",
        "DnfRepo",
        "DnfSack",
        "DnfPackage",
        "DnfPackageSet",
        "DnfTransaction",
        "DnfState",
        "DnfRepoLoader",
        "DnfDb",
        "DnfReldepList",
        "DnfPackageDelta",
        "DnfAdvisory",
        "DnfLock",
        "HyGoal",
        "HyQuery",
        "HySelector",
        "HySubject",
        "HyNevra",
        "HyRepo",
        "HyModuleForm",
        "_HyModuleForm",
        "HyForm",
        "_HyForm",
        "Id",
        "Map",
        "Pool",
        "GError",
        "GPtrArray",
        "_GPtrArray",
        "GCancellable",
        "GQuark",
        "GLogLevelFlags",
        "GLogFunc",
        "gboolean",
        "gchar",
        "guchar",
        "gint",
        "guint",
        "guint32",
        "guint64",
        "gint64",
        "gsize",
        "gpointer",
        "gconstpointer",
        "rpmKeyring",
        "rpmMacroContext",
        "DnfGoalActions",
        "DnfPackageInfo",
        "DnfStateAction",
        "DnfRepoEnabled",
        "DnfRepoKind",
        "DnfContextSetupSackFlags",
        "DnfContextCleanFlags",
        "DnfTransactionFlag",
        "DnfConfPriority",
        "DnfError",
        "DnfSackAddFlags",
        "DnfPluginHookData",
        "DnfPluginError",
        "DnfPluginHook",
        "_hy_key_name_e",
        "_hy_comparison_type_e",
        "DnfRepoUpdateFlags",
    ] {
        builder = builder.allowlist_type(t);
    }
    builder = builder
        .opaque_type("Map")
        .opaque_type("_Pool")
        .allowlist_var("HY_.*")
        .allowlist_var("DNF_.*")
        .allowlist_var("G_LOG_LEVEL_.*")
        .allowlist_var("G_LOG_FLAG_.*");

    let bindings = builder
        .generate()
        .expect("bindgen could not generate libdnf bindings");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("bindings.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
