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
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::log_buffer::{Destination, LogBuffer};
use crate::log_line::{LineLayer, LineShape};

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
    // Lines are written by lmdir's own formatter (log_line), except on a terminal, where
    // tracing-subscriber's colours help a person reading and nothing is measured.
    let output = match &file {
        None if server.log_format == LogFormat::Text && stderr_is_journal() => {
            LineLayer::new(LineShape::Journal, buffer.clone()).boxed()
        }
        None if server.log_format == LogFormat::Text && std::io::stderr().is_terminal() => {
            tracing_subscriber::fmt::layer()
                .with_ansi(true)
                .with_writer(buffer.clone())
                .boxed()
        }
        _ => {
            let shape = match server.log_format {
                LogFormat::Text => LineShape::Text,
                LogFormat::Json => LineShape::Json,
            };
            LineLayer::new(shape, buffer.clone()).boxed()
        }
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
