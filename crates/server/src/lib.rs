//! lmdir-server: the LDAPv3 server (listeners, PDU framing, BER encoding, operations, controls).

pub mod ber;
pub mod client_limits;
pub mod connection;
pub mod controls;
pub mod database;
pub mod filter_text;
pub mod limits;
pub mod log_text;
pub mod matched_values;
pub mod metrics_http;
pub mod monitor;
pub mod operations;
pub mod pdu;
pub mod ppolicy;
pub mod proxy_authz;
pub mod result;
pub mod rootdse;
pub mod selection;
pub mod server;
pub mod settings;
pub mod tls;
mod writer;

pub use database::Database;
pub use server::{
    serve, serve_settings, start, BoundAddress, RunningServer, ServerContext, ServerError,
};
pub use settings::{ListenAddress, ServerSettings};
pub use tls::{ensure_demo_tls, DemoTlsFiles};
