//! The `strata` binary: a shim over [`strata_cli::run`].

fn main() -> std::process::ExitCode {
    strata_cli::init_logging();
    match strata_cli::run(std::env::args_os()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
