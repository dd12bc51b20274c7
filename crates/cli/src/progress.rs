//! Progress on a terminal: one live region at the bottom of stderr with a
//! line per running stage (several while derive installs releases side by
//! side), a line printed above it per finished stage, and the log printed
//! above it too, never through it ([`LogWriter`]). Not a terminal (CI):
//! nothing here; the library's log lines say the same in plain text.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata_pipeline::{Event, Progress, State};

/// The live region, when one is drawn: the log writer prints above it.
static LIVE: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// The live region of a running command; cleared when dropped.
pub(crate) struct Live {
    multi: MultiProgress,
    running: Arc<Mutex<HashMap<(String, String), ProgressBar>>>,
}

impl Live {
    /// A live region when stderr is a terminal.
    pub(crate) fn on_terminal() -> Option<Live> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        *LIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(multi.clone());
        Some(Live {
            multi,
            running: Arc::default(),
        })
    }

    /// The pipeline's progress callback drawing in this region.
    pub(crate) fn progress(&self) -> Progress {
        let multi = self.multi.clone();
        let running = self.running.clone();
        Arc::new(move |e: &Event| {
            let key = (e.stage.to_string(), e.subject.clone());
            let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
            match &e.state {
                State::Started => {
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} {elapsed:.dim}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.set_message(format!("{} {}", e.stage, e.subject));
                    bar.enable_steady_tick(Duration::from_millis(120));
                    running.insert(key, bar);
                }
                State::Done { changed } => {
                    let elapsed = running.remove(&key).map(|bar| {
                        let t = bar.elapsed();
                        bar.finish_and_clear();
                        multi.remove(&bar);
                        t
                    });
                    let took = elapsed
                        .map(|t| format!(" in {:.1}s", t.as_secs_f64()))
                        .unwrap_or_default();
                    let line = if *changed {
                        format!("✔ {} {}{took}", e.stage, e.subject)
                    } else {
                        format!("= {} {} (unchanged){took}", e.stage, e.subject)
                    };
                    // Through the same path as log lines: above the
                    // region, on a line of its own.
                    multi.suspend(|| eprintln!("{line}"));
                }
            }
        })
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        for (_, bar) in self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
        {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
        *LIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Where log lines go: stderr, above the live region while one is drawn
/// (the region is hidden for the write and drawn again below the line).
#[derive(Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match live {
            Some(multi) => multi.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}
