//! `strata-dnf-child JOB OUTCOME`: serves one install job in a process of
//! its own, as strata's stages start their workers ([`strata_dnf::job`]).
//! The child of strata-dnf's own tests (`tests/child.rs`); exits 0 when
//! the install worked, 1 when it failed (the outcome file says why), 2 on
//! a bad command line.

fn main() -> std::process::ExitCode {
    strata_dnf::job::serve_child(std::env::args_os().skip(1))
}
