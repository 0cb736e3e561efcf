//! What a bind to an entry that cannot authenticate (missing, hidden from binds, without a
//! userPassword) verifies, so it costs what a wrong password costs: one verification against
//! a stored value of the configured `password_hash`, whose password is random and never sent.
//! Without it a bind to a missing DN answered invalidCredentials at once while a wrong
//! password for a real one took the hash's time (tens of milliseconds under Argon2): the
//! answer's delay told which accounts exist. Entries whose values use another scheme than the
//! configured one still differ by the difference between the two schemes.

use lmdir_access::password::{self, Scheme};
use std::sync::Mutex;

/// The decoy value of the scheme last asked for (a reload may change the scheme).
#[derive(Debug, Default)]
pub struct BindDecoy {
    value: Mutex<Option<(Scheme, Vec<u8>)>>,
}

impl BindDecoy {
    /// The decoy of `scheme`: made on first use (a hash of 32 random bytes, on the blocking
    /// pool when the scheme is slow), kept until the scheme changes. None when the scheme
    /// cannot hash (the configuration validates it can).
    pub async fn value(&self, scheme: Scheme) -> Option<Vec<u8>> {
        if let Some((kept, value)) = self.lock().as_ref() {
            if *kept == scheme {
                return Some(value.clone());
            }
        }
        let secret: [u8; 32] = rand::random();
        let made = if scheme.is_slow() {
            tokio::task::spawn_blocking(move || password::hash(scheme, &secret))
                .await
                .ok()?
        } else {
            password::hash(scheme, &secret)
        };
        let value = made.ok()?;
        *self.lock() = Some((scheme, value.clone()));
        Some(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Scheme, Vec<u8>)>> {
        self.value
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
