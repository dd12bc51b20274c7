//! The `strata` binary: a shim over [`strata_cli::main`].

fn main() -> std::process::ExitCode {
    quiet_on_closed_stdout();
    strata_cli::main(std::env::args_os().collect())
}

/// `strata inspect … | head`: when the reader of stdout goes away, `println!`
/// panics on the broken pipe. Exit as a C program killed by SIGPIPE would
/// (status 141), without a panic message; every other panic reports as usual.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}
