//! The server tests that read the server's log, in a binary of their own: one process-wide
//! tracing subscriber (there can be only one) captures what every test's server logs here.

mod common;

mod attacks_net;
mod controls_criticality;
mod scim_attacks;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Log lines written by this test process (every test's server logs here), at INFO.
pub fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Sink(sink.clone()))
            .try_init()
            .expect("the only subscriber of this test binary");
        logs
    })
    .clone()
}

/// Appends what the subscriber writes to the captured bytes.
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
