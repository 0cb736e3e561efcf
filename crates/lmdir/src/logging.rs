//! Where the logs go and in what shape: stderr (the default) or `[server] log_file`, as text or
//! JSON lines (`log_format`), with a filter (`log`) that SIGHUP can change without a restart.
//!
//! Under systemd, stderr goes to the journal, which stamps every line with the time and reads a
//! leading `<N>` as the syslog priority: there the text lines carry that prefix and no timestamp
//! of their own, so `journalctl -p warning` filters by level.
//!
//! Lines are written out in batches (`log_buffer`), at most `LOG_FLUSH_INTERVAL_MILLISECONDS`
//! after they are logged, instead of one write(2) per line.

use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use lmdir_config::{LogFormat, ServerConfig};
use tracing::{Level, Subscriber};
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::writer::MakeWriter;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::log_buffer::{Destination, LogBuffer};

/// What a running server can change in its logging on SIGHUP.
pub struct Logging {
    filter: reload::Handle<EnvFilter, Registry>,
    file: Option<LogFile>,
    buffer: LogBuffer,
}

impl Logging {
    /// Applies a new filter (`[server] log`, unless `RUST_LOG` overrides it) and reopens the
    /// log file, so a file moved away by logrotate is replaced by a fresh one at the same path.
    pub fn reload(&self, server: &ServerConfig) -> Result<()> {
        self.filter
            .reload(filter_for(server))
            .context("changing the log filter")?;
        match &self.file {
            Some(file) => self.buffer.flush_around(|| file.reopen()),
            None => Ok(()),
        }
    }

    /// Writes out the buffered lines now: before telling systemd the server is ready, and at
    /// shutdown, so nothing logged up to there waits on (or dies with) the flush interval.
    pub fn flush(&self) {
        self.buffer.flush();
    }
}

impl Drop for Logging {
    /// `serve` returning, with success or an error: the lines logged so far are written out.
    fn drop(&mut self) {
        self.buffer.flush();
    }
}

/// Offline commands (load, check, ...) log text to stderr: they are run by hand, and writing
/// into the server's log file could leave it owned by whoever ran them.
pub fn init_for_command(server: &ServerConfig) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter_for(server))
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// `lmdir serve`: the configured destination and format, with a reloadable filter.
pub fn init_for_server(server: &ServerConfig) -> Result<Logging> {
    let (filter, handle) = reload::Layer::new(filter_for(server));
    let file = if server.log_file.as_os_str().is_empty() {
        None
    } else {
        Some(LogFile::open(&server.log_file)?)
    };
    let destination = match &file {
        Some(file) => Destination::File(Arc::clone(&file.file)),
        None => Destination::Stderr,
    };
    // Lines are batched (see log_buffer): stderr and the file alike, text and JSON alike.
    let buffer = LogBuffer::start(destination).context("starting the log flusher thread")?;
    let output = match &file {
        Some(_) => format_layer(server.log_format, buffer.clone(), false),
        None if server.log_format == LogFormat::Text && stderr_is_journal() => {
            let lines = format::format().without_time().with_ansi(false);
            tracing_subscriber::fmt::layer()
                .event_format(SyslogPriority(lines))
                .with_writer(buffer.clone())
                .boxed()
        }
        None => format_layer(
            server.log_format,
            buffer.clone(),
            std::io::stderr().is_terminal(),
        ),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .try_init()
        .context("installing the logger")?;
    Ok(Logging {
        filter: handle,
        file,
        buffer,
    })
}

type OutputLayer =
    Box<dyn Layer<tracing_subscriber::layer::Layered<ReloadFilter, Registry>> + Send + Sync>;
type ReloadFilter = reload::Layer<EnvFilter, Registry>;

fn format_layer<W>(log_format: LogFormat, writer: W, ansi: bool) -> OutputLayer
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    match log_format {
        // One JSON object per line: time, level, target, the message and its fields.
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed(),
    }
}

/// `RUST_LOG` wins over the config, as it always has; a bad one falls back to the config.
fn filter_for(server: &ServerConfig) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&server.log))
}

/// systemd sets `JOURNAL_STREAM=device:inode` for a unit whose stderr is the journal; checking
/// the device and inode tells whether stderr is still that stream (and not redirected).
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(metadata) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    stream == format!("{}:{}", metadata.dev(), metadata.ino())
}

/// Prefixes each line with its syslog priority (`<3>` error … `<7>` trace) for the journal.
struct SyslogPriority<F>(F);

impl<S, N, F> FormatEvent<S, N> for SyslogPriority<F>
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
    N: for<'writer> FormatFields<'writer> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let priority = match *event.metadata().level() {
            Level::ERROR => 3,
            Level::WARN => 4,
            Level::INFO => 6,
            Level::DEBUG | Level::TRACE => 7,
        };
        write!(writer, "<{priority}>")?;
        self.0.format_event(context, writer, event)
    }
}

/// The log file, appended to, and reopened at the same path on SIGHUP. Cheap to clone.
#[derive(Clone)]
pub struct LogFile {
    path: PathBuf,
    /// Shared with the log buffer's destination, which writes each batch to the current file.
    file: Arc<Mutex<Arc<File>>>,
}

impl LogFile {
    fn open(path: &Path) -> Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(Arc::new(open_append(path)?))),
        })
    }

    fn reopen(&self) -> Result<()> {
        let fresh = Arc::new(open_append(&self.path)?);
        *self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh;
        Ok(())
    }
}

/// O_APPEND: each batch of whole lines lands at the end, even if another process appends too.
fn open_append(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening the log file {}", path.display()))
}
