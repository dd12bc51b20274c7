//! Progress on a terminal: one spinner naming the running stage, and a line
//! per finished stage. Not a terminal (CI): nothing here; the library's log
//! lines (stderr, `RUST_LOG`) say the same in plain text.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use strata_pipeline::{Event, Progress, State};

/// The spinner, drawn while a command runs; cleared when dropped.
pub(crate) struct Spinner {
    bar: ProgressBar,
}

impl Spinner {
    /// A spinner when stderr is a terminal.
    pub(crate) fn on_terminal() -> Option<Spinner> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Some(Spinner { bar })
    }

    /// The pipeline's progress callback drawing on this spinner.
    pub(crate) fn progress(&self) -> Progress {
        let bar = self.bar.clone();
        Arc::new(move |e: &Event| match &e.state {
            State::Started => bar.set_message(format!("{} {}", e.stage, e.subject)),
            State::Done { changed } => bar.println(format!(
                "{} {} {}",
                if *changed { "✔" } else { "=" },
                e.stage,
                if *changed {
                    e.subject.clone()
                } else {
                    format!("{} (unchanged)", e.subject)
                }
            )),
        })
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
