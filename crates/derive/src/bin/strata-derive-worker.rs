//! `strata-derive-worker JOB OUTCOME`: serves one derive install job (the
//! CLI uses its own executable with a hidden subcommand instead).
//!
//! `strata-derive-worker derive WORKDIR BASE KEY=VALUE MANIFEST…` runs a
//! whole derive with itself as the worker, its results as JSON on stdout,
//! so that tests can run one as another user; like `strata derive`, it
//! first makes itself root of a user namespace when an ordinary user
//! starts it.
//!
//! `strata-derive-worker install JOB OUTCOME` serves a compose's install
//! job, for the tests that compose the base they derive from.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.split_first() {
        Some((mode, rest)) if mode == "derive" => derive(rest),
        Some((mode, rest)) if mode == "install" => strata_dnf::job::serve_child(rest.to_vec()),
        _ => strata_derive::worker::main(args.into_iter()),
    }
}

fn derive(args: &[OsString]) -> ExitCode {
    let [workdir, base, var, manifests @ ..] = args else {
        eprintln!("usage: strata-derive-worker derive WORKDIR BASE KEY=VALUE MANIFEST…");
        return ExitCode::from(2);
    };
    let result = (|| -> anyhow::Result<_> {
        strata_process::userns::become_root("derive")?;
        let worker = strata_derive::Worker::new(std::env::current_exe()?);
        let opts = strata_derive::DeriveOptions::new(
            workdir,
            base.to_string_lossy(),
            manifests.iter().map(PathBuf::from).collect(),
            worker,
        )
        .vars(strata_manifest::Vars::from_assignments([
            var.to_string_lossy()
        ])?);
        strata_derive::derive(&opts)
    })();
    strata_process::worker::print_result(result)
}
