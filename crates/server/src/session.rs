//! What an operation knows of its connection: how it was accepted, who is bound, whom per-client
//! limits count against. Below the connection, so operations never import it.

use crate::client_limits::ClientKey;
use crate::identity::Identity;
use std::sync::Arc;

/// How a connection was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Tls,
    /// Unix socket with the peer's uid/gid (SASL EXTERNAL identity).
    Ldapi {
        uid: u32,
        gid: u32,
    },
}

/// Per-connection state visible to operations.
#[derive(Debug, Clone)]
pub struct Session {
    pub connection_id: u64,
    pub identity: Identity,
    pub transport: Transport,
    /// Whom per-client limits (bind throttling) count against.
    pub client: ClientKey,
    /// TLS active (ldaps or after StartTLS).
    pub tls_active: bool,
    /// This connection's entry in cn=Monitor.
    pub monitor: Arc<crate::monitor::ConnectionRecord>,
    /// The bind said changeAfterReset: until the password is changed only that change may run
    /// (`ppolicy::change_after_reset_refusal`). Shared with the operation tasks, whose
    /// successful password change clears it.
    pub password_must_change: Arc<std::sync::atomic::AtomicBool>,
    /// Open LDAP transactions (RFC 5805) and their queued updates; they end with the
    /// connection, and a bind aborts them.
    pub transactions: Arc<crate::transaction_queue::Transactions>,
}

impl Session {
    /// Whether the channel counts as confidential for `require_tls`.
    pub fn is_secure(&self) -> bool {
        self.tls_active || matches!(self.transport, Transport::Ldapi { .. })
    }
}
