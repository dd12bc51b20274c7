//! The deploy worker of this crate's tests: `strata-disk-worker JOB OUTCOME`.
//! (The CLI uses its own executable with a hidden subcommand instead.)
//!
//! `strata-disk-worker build WORKDIR IMAGE PLATFORM,... [TARGET-IMAGE]` runs
//! a whole build with itself as the worker, so that tests can run one as
//! another user.
//!
//! `strata-disk-worker install JOB OUTCOME` serves a compose's install job,
//! for the tests that compose the base they make disks of.
//!
//! `strata-disk-worker rollback DISK` rolls a node's disk back, with itself
//! as the worker: a process for the tests to kill mid-way.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "install") {
        return strata_dnf::job::serve_child(args[1..].to_vec());
    }
    if args.first().is_some_and(|a| a == "build") && (args.len() == 4 || args.len() == 5) {
        let exe = std::env::current_exe().expect("own executable");
        let platforms = args[3]
            .to_string_lossy()
            .split(',')
            .map(str::to_string)
            .collect();
        let opts = strata_disk::DiskOptions::new(
            &args[1],
            args[2].to_string_lossy(),
            platforms,
            Command::new(exe),
        )
        .target_image(args.get(4).map(|t| t.to_string_lossy().into_owned()));
        return strata_process::worker::print_result(strata_disk::build(&opts));
    }
    if args.first().is_some_and(|a| a == "rollback") && args.len() == 2 {
        let exe = std::env::current_exe().expect("own executable");
        let disk = std::path::Path::new(&args[1]);
        return strata_process::worker::print_result(strata_disk::node::rollback(
            disk,
            Command::new(exe),
        ));
    }
    strata_disk::worker_main(args)
}
