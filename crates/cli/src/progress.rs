//! Progress on a terminal: one live region at the bottom of stderr with a
//! line per running stage (several while derive installs releases side by
//! side), a bar per byte-bound task the libraries report as it runs
//! (downloads, layer compression, disk hashing and compression: [`Bars`]),
//! a line printed above it per finished stage, and the log printed above
//! it too, never through it ([`LogWriter`]). Not a terminal (CI): nothing
//! here; the library's log lines say the same in plain text.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata_pipeline::{Event, Progress, State};
use tracing_subscriber::layer::Context;

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

/// Draws the libraries' byte progress (`strata_process::progress` events)
/// as bars in the live region, one per task, gone when the task finishes.
/// Without a live region, nothing.
#[derive(Default)]
pub(crate) struct Bars {
    bars: Mutex<HashMap<String, ProgressBar>>,
}

/// One progress event's fields.
#[derive(Default)]
struct Fields {
    task: String,
    done: u64,
    total: u64,
    finished: bool,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "task" {
            self.task = value.to_string();
        }
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        match field.name() {
            "done" => self.done = value,
            "total" => self.total = value,
            _ => {}
        }
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        if field.name() == "finished" {
            self.finished = value;
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Bars {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != strata_process::progress::TARGET {
            return;
        }
        let Some(multi) = LIVE.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return;
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut bars = self.bars.lock().unwrap_or_else(|e| e.into_inner());
        if fields.finished {
            if let Some(bar) = bars.remove(&fields.task) {
                bar.finish_and_clear();
                multi.remove(&bar);
            }
            return;
        }
        let bar = bars.entry(fields.task.clone()).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new(fields.total));
            bar.set_style(
                ProgressStyle::with_template(
                    "  {msg} [{bar:30}] {bytes}/{total_bytes} {percent}% {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(fields.task.clone());
            bar
        });
        bar.set_length(fields.total);
        bar.set_position(fields.done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// A task's events become a bar with its bytes, gone once finished;
    /// without a live region, nothing is drawn.
    #[test]
    fn byte_progress_becomes_a_bar_while_the_task_runs() {
        let bars = Arc::new(Bars::default());
        let subscriber = tracing_subscriber::registry().with(BarsRef(bars.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let meter = strata_process::progress::Meter::new("hashing a.raw", 100);
            assert!(bars.bars.lock().unwrap().is_empty(), "no live region");
            drop(meter);

            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
            *LIVE.lock().unwrap() = Some(multi);
            let mut meter = strata_process::progress::Meter::new("hashing b.raw", 100);
            meter.add(40);
            std::thread::sleep(Duration::from_millis(120));
            meter.add(20);
            {
                let drawn = bars.bars.lock().unwrap();
                let bar = &drawn["hashing b.raw"];
                assert_eq!((bar.position(), bar.length()), (60, Some(100)));
            }
            meter.finish();
            assert!(bars.bars.lock().unwrap().is_empty(), "gone when finished");
            *LIVE.lock().unwrap() = None;
        });
    }

    /// The layer through a shared reference, so the test can look inside.
    struct BarsRef(Arc<Bars>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for BarsRef {
        fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
            tracing_subscriber::Layer::<S>::on_event(&*self.0, event, ctx);
        }
    }
}
