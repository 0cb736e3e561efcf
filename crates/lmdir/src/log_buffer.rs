//! The server's log lines reach stderr or the log file in batches: a write(2) per line cost about
//! a third of a simple search's CPU time (docs/benchmarks.md, issue 13). Each formatted line is
//! appended to one preallocated buffer; a flusher thread writes the batch out at most
//! `LOG_FLUSH_INTERVAL_MILLISECONDS` after its first line, a full buffer is written out inline
//! by the thread that filled it (so a burst never grows memory), and readiness, SIGHUP, shutdown
//! and a panic flush it at once.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tracing_subscriber::fmt::writer::MakeWriter;

/// Bytes of log lines held before they are written out: one write(2) per this many bytes at
/// most, and the most memory a burst of lines can take.
pub const LOG_BUFFER_BYTES: usize = 64 * 1024;
/// Longest a logged line waits in the buffer before the flusher thread writes it out, so a
/// terminal or the journal still sees lines promptly on an idle server.
pub const LOG_FLUSH_INTERVAL_MILLISECONDS: u64 = 100;

/// Where a batch of lines goes.
#[derive(Clone)]
pub enum Destination {
    Stderr,
    /// The file currently open at `[server] log_file` (swapped on SIGHUP).
    File(Arc<Mutex<Arc<File>>>),
}

impl Destination {
    /// A failed write loses those lines: there is nowhere to report it but the log itself.
    fn write_all(&self, bytes: &[u8]) {
        let _ = match self {
            Destination::Stderr => std::io::stderr().write_all(bytes),
            Destination::File(file) => {
                let file = lock(file).clone();
                (&*file).write_all(bytes)
            }
        };
    }
}

/// The shared line buffer; cheap to clone. A `MakeWriter` for the fmt layer.
#[derive(Clone)]
pub struct LogBuffer(Arc<Shared>);

struct Shared {
    pending: Mutex<Vec<u8>>,
    /// Wakes the flusher when the buffer gets its first line since the last flush.
    has_lines: Condvar,
    destination: Destination,
}

impl LogBuffer {
    /// Starts the flusher thread and chains a panic hook that writes out buffered lines before
    /// the panic message, so the lines leading up to a panic are never lost with it.
    pub fn start(destination: Destination) -> std::io::Result<LogBuffer> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::with_capacity(LOG_BUFFER_BYTES)),
            has_lines: Condvar::new(),
            destination,
        });
        let for_flusher = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("log-flush".into())
            .spawn(move || flush_periodically(&for_flusher))?;
        chain_panic_hook(Arc::downgrade(&shared));
        Ok(LogBuffer(shared))
    }

    /// Adds one whole line (or several), written out with the next batch.
    pub fn append(&self, line: &[u8]) {
        self.0.append(line);
    }

    /// Writes out every buffered line now.
    pub fn flush(&self) {
        self.0.flush(lock(&self.0.pending));
    }

    /// Writes out the buffered lines, then runs `change` (a log file swap) before any later line
    /// is buffered: lines logged before a reopen go to the old file, later ones to the new one.
    pub fn flush_around<T>(&self, change: impl FnOnce() -> T) -> T {
        let mut pending = lock(&self.0.pending);
        self.0.destination.write_all(&pending);
        pending.clear();
        change()
    }

    #[cfg(test)]
    fn buffered_bytes(&self) -> (usize, usize) {
        let pending = lock(&self.0.pending);
        (pending.len(), pending.capacity())
    }
}

impl Shared {
    fn flush(&self, mut pending: MutexGuard<'_, Vec<u8>>) {
        if !pending.is_empty() {
            self.destination.write_all(&pending);
            pending.clear();
        }
    }

    fn append(&self, line: &[u8]) {
        let mut pending = lock(&self.pending);
        if pending.len() + line.len() > LOG_BUFFER_BYTES {
            self.destination.write_all(&pending);
            pending.clear();
            if line.len() > LOG_BUFFER_BYTES {
                // Larger than the whole buffer: straight out, keeping the order of lines.
                self.destination.write_all(line);
                return;
            }
        }
        let first = pending.is_empty();
        pending.extend_from_slice(line);
        drop(pending);
        if first {
            self.has_lines.notify_one();
        }
    }
}

/// Waits for a first line, lets more lines join it for one interval, writes them out; repeats.
/// An idle server's flusher sleeps on the condition variable and costs nothing.
fn flush_periodically(shared: &Shared) {
    loop {
        let pending = shared
            .has_lines
            .wait_while(lock(&shared.pending), |pending| pending.is_empty())
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        drop(pending);
        std::thread::sleep(Duration::from_millis(LOG_FLUSH_INTERVAL_MILLISECONDS));
        shared.flush(lock(&shared.pending));
    }
}

fn chain_panic_hook(shared: Weak<Shared>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // try_lock: the panicking thread may itself hold the buffer (a panic inside a write).
        if let Some(shared) = shared.upgrade() {
            if let Ok(pending) = shared.pending.try_lock() {
                shared.flush(pending);
            }
        }
        previous(info);
    }));
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One event's writer: the fmt layer formats the whole line into its reused thread-local string
/// and hands it over in one `write_all`, so a line is never split between two batches.
pub struct BufferedLine<'a>(&'a Shared);

impl Write for BufferedLine<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'writer> MakeWriter<'writer> for LogBuffer {
    type Writer = BufferedLine<'writer>;

    fn make_writer(&'writer self) -> BufferedLine<'writer> {
        BufferedLine(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_buffer(path: &std::path::Path) -> LogBuffer {
        let file = File::create(path).unwrap();
        LogBuffer::start(Destination::File(Arc::new(Mutex::new(Arc::new(file))))).unwrap()
    }

    #[test]
    fn a_burst_is_written_out_inline_and_never_grows_the_buffer() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("log");
        let buffer = file_buffer(&path);
        let line = format!("{}\n", "x".repeat(199));
        let lines = 5 * LOG_BUFFER_BYTES / line.len();
        let mut writer = buffer.make_writer();
        for _ in 0..lines {
            writer.write_all(line.as_bytes()).unwrap();
            let (held, capacity) = buffer.buffered_bytes();
            assert!(held <= LOG_BUFFER_BYTES && capacity == LOG_BUFFER_BYTES);
        }
        // Whatever the flusher did meanwhile, at most one buffer's worth is still held.
        let written = std::fs::metadata(&path).unwrap().len() as usize;
        assert!(
            written >= lines * line.len() - LOG_BUFFER_BYTES,
            "{written}"
        );
        buffer.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), lines);
        assert!(text.lines().all(|written| written.len() == 199));
    }

    #[test]
    fn a_line_larger_than_the_buffer_goes_out_whole_and_in_order() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("log");
        let buffer = file_buffer(&path);
        let mut writer = buffer.make_writer();
        writer.write_all(b"first\n").unwrap();
        let huge = format!("{}\n", "y".repeat(2 * LOG_BUFFER_BYTES));
        writer.write_all(huge.as_bytes()).unwrap();
        writer.write_all(b"last\n").unwrap();
        buffer.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("first\n{huge}last\n"));
        assert_eq!(buffer.buffered_bytes().1, LOG_BUFFER_BYTES);
    }
}
