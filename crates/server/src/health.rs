//! Whether this server is ready to take clients, for `/readyz` (and `/health`) on the metrics
//! listener: a load balancer or an orchestrator sends clients only to a ready node.
//!
//! Ready means: a database is open, a read transaction opens, the writer thread is alive, the
//! server is not shutting down, and every configured replication consumer has registered,
//! committed a whole refresh since it started (or since its last reload) and lags its provider
//! by at most `[replication] ready_lag_seconds_max` (`lmdir_replication_lag_seconds`). A
//! consumer cut off from its provider after its refresh stays ready: the lag it knows of is
//! what it received (operators alert on `lmdir_replication_connected`).
//!
//! The reasons name only rids and states, never provider URLs, DNs or file paths: the
//! endpoint answers anyone who reaches the metrics listener. Each check is a field read or
//! an LMDB read transaction opened and dropped; the whole is O(consumers).

use crate::context::Database;
use crate::context::ServerContext;
use crate::replication_status::ConsumerStatus;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tracing::warn;

/// Why the server is not ready, one reason a line (empty when ready).
pub fn not_ready_reasons(context: &ServerContext) -> Vec<String> {
    let mut reasons = Vec::new();
    match &context.database {
        Some(database) => database_reasons(database, &mut reasons),
        None => reasons.push("database: not open".to_string()),
    }
    consumer_reasons(context, &mut reasons);
    reasons
}

fn database_reasons(database: &Database, reasons: &mut Vec<String>) {
    if database.writes_stopping.load(Ordering::Acquire) {
        reasons.push("server: shutting down".to_string());
    }
    let writer_alive = database
        .writer_thread
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_ref()
        .is_some_and(|thread| !thread.is_finished());
    if !writer_alive {
        reasons.push("database: the writer thread is not running".to_string());
    }
    if let Err(error) = database.store().read() {
        // The error may name the database directory: logged, not answered.
        warn!("readiness: a read transaction does not open: {error}");
        reasons.push("database: a read transaction does not open".to_string());
    }
}

fn consumer_reasons(context: &ServerContext, reasons: &mut Vec<String>) {
    let replication = &context.settings.replication;
    if replication.consumer.is_empty() {
        return;
    }
    let registered: HashMap<u16, Arc<ConsumerStatus>> = context
        .monitor
        .replication
        .consumers()
        .into_iter()
        .map(|status| (status.identity.rid, status))
        .collect();
    let lag_max = replication.ready_lag_seconds_max as f64;
    for config in &replication.consumer {
        let rid = config.rid;
        let Some(status) = registered.get(&rid) else {
            reasons.push(format!("replication rid={rid:03}: not started"));
            continue;
        };
        if !status.refreshed() {
            reasons.push(format!(
                "replication rid={rid:03}: first refresh not complete"
            ));
            continue;
        }
        let lag = status.lag_seconds();
        if lag > lag_max {
            reasons.push(format!(
                "replication rid={rid:03}: lag {lag:.1} s above ready_lag_seconds_max {}",
                replication.ready_lag_seconds_max
            ));
        }
    }
}
