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
use crate::replication_status::{ConsumerStatus, ReplicationMonitor};
use lmdir_config::ReplicationConfig;
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
    consumer_reasons(
        &context.settings().replication,
        &context.monitor.replication,
        &mut reasons,
    );
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

fn consumer_reasons(
    replication: &ReplicationConfig,
    monitor: &ReplicationMonitor,
    reasons: &mut Vec<String>,
) {
    if replication.consumer.is_empty() {
        return;
    }
    let registered: HashMap<u16, Arc<ConsumerStatus>> = monitor
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication_status::ConsumerIdentity;
    use lmdir_sync::Csn;

    fn consumer(rid: u16) -> lmdir_config::ConsumerConfig {
        lmdir_config::ConsumerConfig {
            rid,
            provider: "ldap://provider.example:389".into(),
            search_base: "dc=example,dc=com".into(),
            sync_type: lmdir_config::SyncType::RefreshAndPersist,
            interval_seconds: 60,
            retry_seconds: 5,
            bind_dn: String::new(),
            credentials: String::new(),
            starttls: false,
            tls_ca_certificate: String::new(),
            bulk_initial_refresh: true,
            pdu_bytes_max: lmdir_config::CONSUMER_PDU_BYTES_MAX_DEFAULT,
        }
    }

    fn reasons(replication: &ReplicationConfig, monitor: &ReplicationMonitor) -> Vec<String> {
        let mut reasons = Vec::new();
        consumer_reasons(replication, monitor, &mut reasons);
        reasons
    }

    #[test]
    fn a_consumer_is_ready_once_refreshed_and_within_the_lag() {
        let replication = ReplicationConfig {
            ready_lag_seconds_max: 2,
            consumer: vec![consumer(7), consumer(8)],
            ..ReplicationConfig::default()
        };
        let monitor = ReplicationMonitor::default();
        let status = monitor.register_consumer(ConsumerIdentity {
            rid: 7,
            provider: "ldap://provider.example:389".into(),
            search_base: "dc=example,dc=com".into(),
            sync_type: "refreshAndPersist",
        });
        assert_eq!(
            reasons(&replication, &monitor),
            [
                "replication rid=007: first refresh not complete",
                "replication rid=008: not started"
            ]
        );
        let committed = "20250101000000.000000Z#000000#001#000000";
        status.connecting(Some(format!("rid=007,csn={committed}").as_bytes()));
        status.searching("127.0.0.1:5000", None);
        status.persisting();
        status.flushed();
        let only_rid_7 = ReplicationConfig {
            consumer: vec![consumer(7)],
            ..replication.clone()
        };
        assert!(reasons(&only_rid_7, &monitor).is_empty());
        let within = Csn::parse(b"20250101000002.000000Z#000000#001#000000").unwrap();
        status.contact(Some(within), None);
        assert!(
            reasons(&only_rid_7, &monitor).is_empty(),
            "2 s is at most 2"
        );
        let beyond = Csn::parse(b"20250101000002.500000Z#000000#001#000000").unwrap();
        status.contact(Some(beyond), None);
        assert_eq!(
            reasons(&only_rid_7, &monitor),
            ["replication rid=007: lag 2.5 s above ready_lag_seconds_max 2"]
        );
    }
}
