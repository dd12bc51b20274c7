//! `strata-compose MANIFEST WORKDIR LOCKFILE|- [KEY=VALUE…]`: a compose as
//! a program of its own, its result as JSON on stdout. This crate's tests
//! run it as an ordinary user; like `strata compose`, it first makes
//! itself root of a user namespace when an ordinary user starts it.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [manifest, workdir, lockfile, vars @ ..] = args.as_slice() else {
        eprintln!("usage: strata-compose MANIFEST WORKDIR LOCKFILE|- [KEY=VALUE…]");
        return ExitCode::from(2);
    };
    let result = strata_process::userns::become_root("compose")
        .map_err(anyhow::Error::new)
        .and_then(|()| Ok(strata_manifest::Vars::from_assignments(vars)?))
        .and_then(|vars| {
            strata_compose::compose(
                &strata_compose::ComposeOptions::new(manifest, workdir)
                    .vars(vars)
                    .lockfile((lockfile != "-").then(|| PathBuf::from(lockfile))),
            )
        });
    match result {
        Ok(r) => {
            println!("{}", serde_json::to_string(&r).expect("serialisable"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
