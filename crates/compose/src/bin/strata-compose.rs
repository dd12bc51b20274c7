//! `strata-compose MANIFEST WORKDIR LOCKFILE|- [KEY=VALUE…]`: a compose as
//! a program of its own, its result as JSON on stdout. This crate's tests
//! run it as an ordinary user; like `strata compose`, it first makes
//! itself root of a user namespace when an ordinary user starts it.
//!
//! `strata-compose install JOB OUTCOME` serves the install job a compose
//! starts (the compose's installer, here this program; the CLI's is its
//! hidden `__install-worker`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "install") {
        return strata_dnf::job::serve_child(std::env::args_os().skip(2));
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [manifest, workdir, lockfile, vars @ ..] = args.as_slice() else {
        eprintln!("usage: strata-compose MANIFEST WORKDIR LOCKFILE|- [KEY=VALUE…]");
        return ExitCode::from(2);
    };
    let result = strata_process::userns::become_root("compose")
        .map_err(anyhow::Error::new)
        .and_then(|()| Ok(strata_manifest::Vars::from_assignments(vars)?))
        .and_then(|vars| {
            let installer =
                strata_process::worker::Worker::new(std::env::current_exe()?).arg("install");
            strata_compose::compose(
                &strata_compose::ComposeOptions::new(manifest, workdir, installer)
                    .vars(vars)
                    .lockfile((lockfile != "-").then(|| PathBuf::from(lockfile))),
            )
        });
    strata_process::worker::print_result(result)
}
