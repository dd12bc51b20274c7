//! docs/cli.md is what the clap definitions generate: a flag added, renamed
//! or reworded without regenerating the reference fails here.
//! `STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs` rewrites it.

use std::path::Path;

#[test]
fn cli_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let generated = strata_cli::docs::markdown();
    if std::env::var_os("STRATA_REGENERATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != generated {
        let line = current
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(current.lines().count().min(generated.lines().count()));
        panic!(
            "docs/cli.md is out of date (first difference at line {}); regenerate it with \
             STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs",
            line + 1
        );
    }
}
