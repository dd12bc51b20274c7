//! The deploy worker of this crate's tests: `strata-disk-worker JOB OUTCOME`.
//! (The CLI uses its own executable with a hidden subcommand instead.)

fn main() -> std::process::ExitCode {
    strata_disk::worker_main(std::env::args_os().skip(1))
}
