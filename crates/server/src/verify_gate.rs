//! The gate every slow password verification passes (PBKDF2, Argon2, scrypt, yescrypt,
//! bcrypt, crypt(3)): at most one per CPU core runs at once, and those running together need
//! at most `password_verify_memory_bytes_max` of memory. One bind's cost is bounded by the
//! stored value's cost limits (`lmdir_access::password::check_cost`); without this gate, many
//! binds at once were bounded only by the 512 blocking threads: 100 concurrent binds of an
//! entry holding `mkpasswd -m scrypt`'s hash (64 MiB each) took the server to 6.5 GB.
//!
//! The gate is a fair semaphore of `SHARES`; a verification takes the share of the budget its
//! memory needs, and no less than one core's share, so both bounds hold with one count. Shares
//! are computed from the budget at each acquisition: a reload changes the budget for the next
//! verification (those running keep their share until they end). A waiting verification holds
//! no thread, and one whose bind is abandoned leaves the queue with its future.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The whole budget, in shares.
const SHARES: u32 = 1 << 16;

/// Slow verifications' admission: a fair, weighted semaphore.
#[derive(Debug)]
pub struct VerifyGate {
    shares: Arc<Semaphore>,
    /// Verifications running at once at most: the CPU cores.
    cores: u32,
}

/// Held while a verification runs; its shares return when it is dropped.
pub struct VerifyPermit {
    _shares: OwnedSemaphorePermit,
}

impl VerifyGate {
    /// A gate for `cores` verifications at once (at least one).
    pub fn new(cores: usize) -> VerifyGate {
        VerifyGate {
            shares: Arc::new(Semaphore::new(SHARES as usize)),
            cores: u32::try_from(cores.max(1)).unwrap_or(u32::MAX).min(SHARES),
        }
    }

    /// A gate for this machine's cores.
    pub fn for_this_machine() -> VerifyGate {
        VerifyGate::new(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// Waits (first come, first served) until a verification needing `memory_bytes` may run
    /// within `budget_bytes`. One needing more than the whole budget runs alone.
    async fn enter(&self, memory_bytes: u64, budget_bytes: u64) -> VerifyPermit {
        let weight = self.weight(memory_bytes, budget_bytes);
        let permit = self
            .shares
            .clone()
            .acquire_many_owned(weight)
            .await
            .expect("the verify gate is never closed");
        VerifyPermit { _shares: permit }
    }

    /// Runs `work` (a verification or a hash needing `memory_bytes`) on the blocking pool once
    /// the gate admits it within `budget_bytes`; its share is held until `work` ends, even
    /// when the caller waiting for it is gone. Err only if `work` panicked.
    pub async fn run_blocking<T: Send + 'static>(
        &self,
        memory_bytes: u64,
        budget_bytes: u64,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let permit = self.enter(memory_bytes, budget_bytes).await;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
    }

    /// Shares of a verification needing `memory_bytes` out of `budget_bytes`: its part of the
    /// budget, rounded up, at least one core's part, at most everything.
    fn weight(&self, memory_bytes: u64, budget_bytes: u64) -> u32 {
        let budget_bytes = budget_bytes.max(1);
        let by_memory = (u128::from(memory_bytes) * u128::from(SHARES))
            .div_ceil(u128::from(budget_bytes))
            .min(u128::from(SHARES));
        let by_core = SHARES / self.cores;
        let weight = u32::try_from(by_memory).unwrap_or(SHARES).max(by_core);
        debug_assert!((1..=SHARES).contains(&weight));
        weight
    }

    /// The part of the gate free now (1 when nothing runs).
    #[cfg(test)]
    fn idle_fraction(&self) -> f64 {
        self.shares.available_permits() as f64 / f64::from(SHARES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn weights_bound_cores_and_memory() {
        let gate = VerifyGate::new(4);
        // Light ones: one core's share, four at once.
        assert_eq!(gate.weight(0, 1024 * MIB), SHARES / 4);
        // 64 MiB of a 1 GiB budget is less than a core's share.
        assert_eq!(gate.weight(64 * MIB, 1024 * MIB), SHARES / 4);
        // 512 MiB: half the budget, two at once.
        assert_eq!(gate.weight(512 * MIB, 1024 * MIB), SHARES / 2);
        // Over the budget: alone.
        assert_eq!(gate.weight(4096 * MIB, 1024 * MIB), SHARES);
        // A small budget: 64 MiB each in 128 MiB, two at once.
        assert_eq!(gate.weight(64 * MIB, 128 * MIB), SHARES / 2);
        // One core: one at a time whatever it needs.
        assert_eq!(VerifyGate::new(1).weight(0, 1024 * MIB), SHARES);
        assert_eq!(VerifyGate::new(0).weight(0, 1024 * MIB), SHARES);
    }

    #[tokio::test]
    async fn a_verification_waits_until_its_share_is_free() {
        let gate = VerifyGate::new(2);
        let first = gate.enter(0, 1024 * MIB).await;
        let second = gate.enter(0, 1024 * MIB).await;
        assert_eq!(gate.idle_fraction(), 0.0);
        let third = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            gate.enter(0, 1024 * MIB),
        )
        .await;
        assert!(third.is_err(), "a third ran beside two on two cores");
        drop(first);
        let _third = gate.enter(0, 1024 * MIB).await;
        drop(second);
        assert_eq!(gate.idle_fraction(), 0.5);
    }
}
