//! `lmdir serve` as a service: systemd readiness (`Type=notify`), and the signals an operator
//! sends: SIGTERM/SIGINT stop gracefully, SIGHUP reloads the config file (what can change
//! live, see `lmdir_server::reload`), the log filter, reopens the log file and re-reads the TLS
//! certificate and key, all without dropping a connection.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use lmdir_config::Config;
use lmdir_server::config_identity::ConfigIdentity;
use lmdir_server::{RunningServer, ServerContext, ServerSettings};
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};

use crate::logging::{self, Logging};

/// How long in-flight operations get to answer at shutdown before connections are closed.
const SHUTDOWN_GRACE_SECONDS: u64 = 30;

pub fn serve(mut config: Config, config_path: Option<&Path>, no_demo: bool) -> Result<ExitCode> {
    if config_path.is_none() && !no_demo {
        trial_run_http(&mut config)?;
    }
    let logging = logging::init_for_server(&config.server)?;
    // Read-write: a second server on this directory is refused here, before anything else.
    let store = crate::commands::open_store(&config, crate::commands::Access::Write)?;
    let empty = store.read()?.entry_count()? == 0;
    drop(store);
    // Demo people (password "password") belong only to the no-config trial run: a server
    // started with a config file, a production one or a new replica, never gets them.
    let offer_demo = config_path.is_none() && !no_demo;
    // On an empty database the banner says what to do next (and what the demo holds when it
    // was loaded); a server with data starts silently.
    let banner = if empty {
        Some(offer_demo && crate::commands::load_demo(&config)?)
    } else {
        None
    };
    let settings = ServerSettings::from_config(&config).map_err(anyhow::Error::msg)?;
    let runtime = lmdir_server::server::runtime()?;
    runtime.block_on(async {
        let database = lmdir_server::Database::open(&config)?;
        let running = lmdir_server::start(settings, Some(database)).await?;
        if let Some(path) = config_path {
            match std::fs::read(path) {
                Ok(text) => {
                    let identity = ConfigIdentity::of(&text, &path.display().to_string());
                    info!("configuration {} is live", identity.describe());
                    running.context().set_config_identity(identity);
                }
                Err(problem) => warn!("hashing {}: {problem}", path.display()),
            }
        }
        if let Some(demo_loaded) = banner {
            crate::banner::print(&config, demo_loaded, &running.addresses);
            crate::banner::print_http(&config, running.http_address());
        }
        let signals = install_signals()?;
        logging.flush();
        notify("READY=1");
        wait_for_stop(signals, &running, &config, config_path, &logging).await?;
        notify("STOPPING=1");
        running
            .shutdown(Duration::from_secs(SHUTDOWN_GRACE_SECONDS))
            .await;
        logging.flush();
        Ok::<_, anyhow::Error>(ExitCode::SUCCESS)
    })
}

/// The HTTP port of the no-config trial run (SCIM and the web console).
pub const TRIAL_HTTP_LISTEN: &str = "127.0.0.1:8443";

/// The no-config trial run serves SCIM and the web console too, over HTTPS on loopback with
/// a self-signed certificate made (once) beside the data directory, in `<its name>-tls/` (the
/// store refuses foreign files inside its own): the embedded default keeps `[http]` off, so a
/// configured server only serves it when asked.
pub fn trial_run_http(config: &mut Config) -> Result<()> {
    if !config.http.listen.is_empty() {
        return Ok(());
    }
    if !config.server.tls_enabled() {
        let data = config.database_directory()?;
        let mut name = data.file_name().unwrap_or_default().to_os_string();
        name.push("-tls");
        let directory = data.with_file_name(name);
        std::fs::create_dir_all(&directory)
            .with_context(|| format!("creating {}", directory.display()))?;
        let files = lmdir_server::ensure_demo_tls(&directory)
            .with_context(|| format!("making a certificate in {}", directory.display()))?;
        config.server.tls_certificate = files.certificate_path;
        config.server.tls_key = files.key_path;
    }
    config.http.listen = TRIAL_HTTP_LISTEN.to_string();
    Ok(())
}

/// The signals `lmdir serve` handles. Installed before readiness is announced: a SIGHUP sent
/// the moment systemd (or a test) sees READY=1 must reload, not kill with the default action.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

fn install_signals() -> Result<Signals> {
    Ok(Signals {
        terminate: signal(SignalKind::terminate()).context("handling SIGTERM")?,
        interrupt: signal(SignalKind::interrupt()).context("handling SIGINT")?,
        hangup: signal(SignalKind::hangup()).context("handling SIGHUP")?,
    })
}

/// Serves until SIGTERM or SIGINT, reloading on every SIGHUP meanwhile.
async fn wait_for_stop(
    signals: Signals,
    running: &RunningServer,
    config: &Config,
    config_path: Option<&Path>,
    logging: &Logging,
) -> Result<()> {
    let Signals {
        mut terminate,
        mut interrupt,
        mut hangup,
    } = signals;
    let mut config = config.clone();
    loop {
        tokio::select! {
            _ = terminate.recv() => {
                info!("SIGTERM received");
                return Ok(());
            }
            _ = interrupt.recv() => {
                info!("SIGINT received");
                return Ok(());
            }
            _ = hangup.recv() => {
                notify("RELOADING=1");
                reload(running.context(), &mut config, config_path, logging);
                logging.flush();
                notify("READY=1");
            }
        }
    }
}

/// SIGHUP: re-reads the config file and applies it (`lmdir_server::reload`: limits, access,
/// `[[limits]]`, schema additions, new indexes, ...), its `log` filter, reopens the log file, and reloads the TLS
/// certificate and key from their running paths. An invalid file changes nothing and the log
/// says why; keys that need a restart are named and keep their running values.
fn reload(
    context: &std::sync::Arc<ServerContext>,
    running: &mut Config,
    config_path: Option<&Path>,
    logging: &Logging,
) {
    info!("SIGHUP received: reloading the configuration and the TLS certificate");
    match config_path {
        Some(path) => reload_file(context, running, path, logging),
        None => {
            if let Err(problem) = logging.reload(&running.server) {
                error!("SIGHUP: {problem:#}");
            }
        }
    }
    match context.reload_tls() {
        Ok(true) => info!("SIGHUP: TLS certificate and key reloaded"),
        Ok(false) => {}
        Err(problem) => error!("SIGHUP: {problem}; still presenting the previous certificate"),
    }
}

/// Reads, checks and applies the config file at `path`; on success what runs of it (the file,
/// with the running value of each key that needs a restart) becomes `running`.
fn reload_file(
    context: &std::sync::Arc<ServerContext>,
    running: &mut Config,
    path: &Path,
    logging: &Logging,
) {
    let live = context.config_identity().map_or_else(
        || "the running one".to_string(),
        |identity| identity.describe(),
    );
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(problem) => {
            error!(
                "SIGHUP: reading {}: {problem}; nothing changed, the live configuration is {live}",
                path.display()
            );
            return;
        }
    };
    let identity = ConfigIdentity::of(&text, &path.display().to_string());
    let source = path.display().to_string();
    let fresh = match std::str::from_utf8(&text)
        .map_err(|problem| format!("{source}: not UTF-8: {problem}"))
        .and_then(|text| Config::from_str(text, &source).map_err(|error| error.to_string()))
    {
        Ok(fresh) => fresh,
        Err(problem) => {
            error!("SIGHUP: {problem}; nothing changed, the live configuration is {live}");
            return;
        }
    };
    let applied = match lmdir_server::reload::reload(context, running, &fresh, identity) {
        Ok(applied) => applied,
        Err(problem) => {
            error!(
                "SIGHUP: {source}: {problem}; nothing changed, the live configuration is {live}"
            );
            return;
        }
    };
    if let Err(problem) = logging.reload(&applied.server) {
        error!("SIGHUP: {problem:#}");
    }
    if let Some(identity) = context.config_identity() {
        info!(
            "SIGHUP: configuration {} is live ({} access rules, {} limits rules)",
            identity.describe(),
            applied.access.len(),
            applied.limits.len()
        );
    }
    // What runs: the keys that need a restart keep their running values, so the next reload
    // compares with what actually runs (and names them again).
    *running = applied;
}

/// Tells systemd about the service's state (sd_notify): `READY=1` once listening, `RELOADING=1`
/// / `READY=1` around a SIGHUP reload, `STOPPING=1` at shutdown. Without `$NOTIFY_SOCKET` (not
/// under systemd) it does nothing; a failure to send is logged, never fatal.
pub fn notify(state: &str) {
    let Some(socket_path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(problem) = send_notification(&socket_path, state) {
        warn!(
            "sd_notify {state:?} to {}: {problem}",
            socket_path.to_string_lossy()
        );
    }
}

fn send_notification(socket_path: &OsStr, state: &str) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    // `@name` is a socket in Linux's abstract namespace; anything else is a file system path.
    match socket_path.as_bytes().strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(state.as_bytes(), &address)?;
        }
        None => {
            socket.send_to(state.as_bytes(), socket_path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod trial_tests {
    use super::*;

    #[test]
    fn the_trial_run_serves_https_on_loopback_with_a_made_certificate() {
        let scratch = tempfile::tempdir().unwrap();
        let mut config = Config::embedded_default();
        config.database.directory = scratch.path().join("data");
        assert!(config.http.listen.is_empty(), "off in the embedded default");
        trial_run_http(&mut config).unwrap();
        assert_eq!(config.http.listen, TRIAL_HTTP_LISTEN);
        assert!(config.http.tls);
        assert!(config
            .server
            .tls_certificate
            .starts_with(scratch.path().join("data-tls")));
        assert!(config.server.tls_certificate.exists() && config.server.tls_key.exists());
        // A configured listener is kept as it is.
        config.http.listen = "127.0.0.1:9999".to_string();
        trial_run_http(&mut config).unwrap();
        assert_eq!(config.http.listen, "127.0.0.1:9999");
    }
}
