//! lmdir-server: the LDAPv3 server (listeners, PDU framing, BER encoding, operations, controls).
//!
//! Module layers, each importing only from layers below it (ARCHITECTURE.md draws the graph):
//! server → {connection, health} → operations → {search, compare, update, password, rootdse} →
//! entry_read → context → {writer → integrity, dynlist} → {session, sink, subject, filter} →
//! leaves (ber, controls, result, settings, limits, monitor, replication_status, ppolicy,
//! persist, selection, filter_text, log_text, ...).

pub mod accesslog;
mod bases;
pub mod ber;
pub mod ber_read;
mod bind_decoy;
pub mod client_limits;
mod compare;
pub mod config_identity;
pub mod connection;
pub mod context;
pub mod controls;
mod dynlist;
mod entry_read;
pub mod extensions;
pub mod filter;
mod glue;
pub mod health;
pub mod http;
pub mod identity;
mod integrity;
pub mod limits;
pub mod live;
pub mod log_text;
pub mod matched_values;
pub mod metrics_http;
pub mod monitor;
pub mod operations;
mod password;
pub mod pdu;
mod persist;
pub mod ppolicy;
mod prehash;
pub mod proxy_authz;
mod proxy_header;
pub mod reload;
pub mod replication;
pub mod replication_status;
pub mod request;
pub mod result;
pub mod rootdse;
mod rules;
mod search;
pub mod selection;
pub mod server;
pub mod session;
pub mod settings;
pub mod sink;
pub mod stream;
mod subject;
mod sync_apply;
pub mod tls;
mod transaction;
mod transaction_queue;
mod update;
mod verify_gate;
mod write_request;
mod writer;

/// The database as the CLI opens it (kept at this path for `lmdir`'s commands).
pub mod database {
    pub use crate::context::{schema_from_config, Database};
}

pub use context::Database;
pub use search::hidden::HiddenEntries;
pub use server::{
    serve, serve_settings, start, BoundAddress, RunningServer, ServerContext, ServerError,
};
pub use settings::{ListenAddress, ServerSettings};
pub use tls::{ensure_demo_tls, DemoTlsFiles};
