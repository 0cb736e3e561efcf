//! Progress: an indicatif bar on a terminal (entries, entries/s, MB read, ETA by bytes), plain
//! log lines to stderr every few seconds otherwise, nothing when disabled.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

const LOG_INTERVAL: Duration = Duration::from_secs(5);

pub struct Progress {
    bar: Option<ProgressBar>,
    log_lines: bool,
    started: Instant,
    last_log: Instant,
    phase: &'static str,
}

impl Progress {
    pub fn new(enabled: bool, total_bytes: u64) -> Self {
        let on_terminal = std::io::stderr().is_terminal();
        let bar = (enabled && on_terminal).then(|| {
            let bar = ProgressBar::new(total_bytes);
            // Standard input has no size: no bar and no ETA, only what was read so far.
            let template = if total_bytes == 0 {
                "{spinner} [{elapsed_precise}] {binary_bytes} {msg}"
            } else {
                "{spinner} [{elapsed_precise}] {bar:30} {binary_bytes}/{binary_total_bytes} {msg} ETA {eta}"
            };
            let style =
                ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            log_lines: enabled && !on_terminal,
            started: now,
            last_log: now,
            phase: "loading",
        }
    }

    pub fn update(&mut self, entries: u64, bytes_read: u64) {
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = entries as f64 / elapsed;
        if let Some(bar) = &self.bar {
            bar.set_position(bytes_read);
            bar.set_message(format!("{entries} entries, {rate:.0}/s"));
        } else if self.log_lines && self.last_log.elapsed() >= LOG_INTERVAL {
            self.last_log = Instant::now();
            eprintln!(
                "lmdir load: {}: {entries} entries, {rate:.0} entries/s, {:.1} MB read",
                self.phase,
                bytes_read as f64 / 1e6
            );
        }
    }

    /// Announces a later phase (merging indexes) that has no byte position.
    pub fn phase(&mut self, phase: &'static str) {
        self.phase = phase;
        if let Some(bar) = &self.bar {
            bar.set_message(phase);
        } else if self.log_lines {
            eprintln!("lmdir load: {phase}");
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
