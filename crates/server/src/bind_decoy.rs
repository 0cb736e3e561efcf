//! What a bind to an entry that cannot authenticate (missing, hidden from binds, without a
//! userPassword) verifies, so it costs what a wrong password costs: one verification against
//! a stored value of the configured `password_hash`, whose password is random and never sent.
//! Without it a bind to a missing DN answered invalidCredentials at once while a wrong
//! password for a real one took the hash's time (tens of milliseconds under Argon2): the
//! answer's delay told which accounts exist. Entries whose values use another scheme than the
//! configured one still differ by the difference between the two schemes.

use crate::verify_gate::VerifyGate;
use lmdir_access::password::{self, Scheme};
use tokio::sync::Mutex;

/// The decoy value of the scheme last asked for (a reload may change the scheme).
#[derive(Debug, Default)]
pub struct BindDecoy {
    /// Held while a decoy is made, so concurrent binds wait for the one being made instead
    /// of each hashing their own.
    value: Mutex<Option<(Scheme, Vec<u8>)>>,
}

impl BindDecoy {
    /// The decoy of `scheme`: made on first use (a hash of 32 random bytes; when the scheme
    /// is slow, on the blocking pool through `gate`, which holds its share until the hash is
    /// done even if the bind waiting for it is gone), kept until the scheme changes. None
    /// when the scheme cannot hash (the configuration validates it can).
    pub async fn value(
        &self,
        scheme: Scheme,
        gate: &VerifyGate,
        budget_bytes: u64,
    ) -> Option<Vec<u8>> {
        let mut kept = self.value.lock().await;
        if let Some((kept_scheme, value)) = kept.as_ref() {
            if *kept_scheme == scheme {
                return Some(value.clone());
            }
        }
        let secret: [u8; 32] = rand::random();
        let made = if scheme.is_slow() {
            let memory_bytes = password::hash_memory_bytes(scheme);
            let hash = move || password::hash(scheme, &secret);
            // The server's own work, made once for every client: in no client's line.
            gate.run_blocking(None, memory_bytes, budget_bytes, hash)
                .await
                .ok()?
        } else {
            password::hash(scheme, &secret)
        };
        let value = made.ok()?;
        *kept = Some((scheme, value.clone()));
        Some(value)
    }
}
