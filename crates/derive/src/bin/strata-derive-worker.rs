//! Serves one derive install job: `strata-derive-worker JOB OUTCOME`.

fn main() -> std::process::ExitCode {
    strata_derive::worker::main(std::env::args_os().skip(1))
}
