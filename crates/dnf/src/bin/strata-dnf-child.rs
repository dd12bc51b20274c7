//! `strata-dnf-child JOB OUTCOME`: serves one install job in a process of
//! its own, as strata's stages start their workers ([`strata_dnf::job`]).
//! The child of strata-dnf's own tests (`tests/child.rs`); exits 0 when
//! the install worked, 1 when it failed (the outcome file says why), 2 on
//! a bad command line.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [job, outcome] = args.as_slice() else {
        eprintln!("usage: strata-dnf-child JOB OUTCOME");
        return ExitCode::from(2);
    };
    match strata_dnf::job::serve_child(Path::new(job), Path::new(outcome)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
