//! Progress as data: long byte-bound steps (downloads, layer compression,
//! disk writes and hashes) report how far they are as `tracing` events of
//! the target [`TARGET`] at trace level, which no log filter shows by
//! default. Only the CLI draws them (a bar per task on a terminal); library
//! crates never draw anything.
//!
//! Each event has the field `task` (what is being done, e.g.
//! `compressing layer 3/12`), and either `done` and `total` (bytes) or
//! `finished = true`.

use std::time::{Duration, Instant};

/// The events' target.
pub const TARGET: &str = "strata::progress";

/// How often a [`Meter`] reports at most.
const EVERY: Duration = Duration::from_millis(100);

/// Counts a task's bytes and reports them, at most every 100 ms, then
/// once more when finished (or dropped).
#[derive(Debug)]
pub struct Meter {
    task: String,
    total: u64,
    done: u64,
    reported: Option<Instant>,
    finished: bool,
}

impl Meter {
    /// A task of `total` bytes.
    pub fn new(task: impl Into<String>, total: u64) -> Self {
        let mut meter = Self {
            task: task.into(),
            total,
            done: 0,
            reported: None,
            finished: false,
        };
        meter.report();
        meter
    }

    /// `n` more bytes done.
    pub fn add(&mut self, n: u64) {
        self.done = self.done.saturating_add(n);
        if self.reported.is_none_or(|t| t.elapsed() >= EVERY) {
            self.report();
        }
    }

    /// The bytes done so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    fn report(&mut self) {
        self.reported = Some(Instant::now());
        tracing::trace!(
            target: TARGET,
            task = self.task.as_str(),
            done = self.done,
            total = self.total
        );
    }

    /// The task is over.
    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if !self.finished {
            self.finished = true;
            // The last bytes, then the end.
            self.report();
            tracing::trace!(target: TARGET, task = self.task.as_str(), finished = true);
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.end();
    }
}

/// A reader that meters what is read through it.
#[derive(Debug)]
pub struct MeteredRead<R> {
    inner: R,
    meter: Meter,
}

impl<R> MeteredRead<R> {
    pub fn new(inner: R, meter: Meter) -> Self {
        Self { inner, meter }
    }
}

impl<R: std::io::Read> std::io::Read for MeteredRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.meter.add(n as u64);
        Ok(n)
    }
}
