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
//!
//! First come, first served alone let one client queue everyone else: 16 connections binding
//! over and over to an account with a slow hash (its own, or missing DNs, which verify a
//! decoy) kept 16 verifications ahead of any other client's bind. So each client (an address,
//! an IPv6 /64, a local user) has at most one verification per core at the shared gate; its
//! others wait in its own line. Another client's bind then waits behind at most a core's
//! worth of each busy client's, and one client alone (a load balancer's address) still has
//! every core.

use crate::client_limits::ClientKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The whole budget, in shares.
const SHARES: u32 = 1 << 16;

/// Slow verifications' admission: a fair, weighted semaphore.
#[derive(Debug)]
pub struct VerifyGate {
    shares: Arc<Semaphore>,
    /// Verifications running at once at most: the CPU cores.
    cores: u32,
    /// Each client's own line: `cores` turns at the shared gate. A client is here only while
    /// one of its verifications waits or runs.
    clients: Arc<Mutex<HashMap<ClientKey, Arc<Semaphore>>>>,
}

/// Held while a verification runs; its shares return when it is dropped.
struct VerifyPermit {
    _shares: OwnedSemaphorePermit,
}

/// One of a client's turns at the shared gate, from the moment it starts waiting for it: when
/// dropped (the verification done, or its bind abandoned while waiting), the turn returns and
/// a client with nothing left waiting or running leaves the table.
struct ClientTurn {
    client: ClientKey,
    line: Arc<Semaphore>,
    clients: Arc<Mutex<HashMap<ClientKey, Arc<Semaphore>>>>,
    held: bool,
}

impl ClientTurn {
    /// Waits for one of the client's turns.
    async fn take(&mut self) {
        self.line
            .acquire()
            .await
            .expect("a client's line is never closed")
            .forget();
        self.held = true;
    }
}

impl Drop for ClientTurn {
    fn drop(&mut self) {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if self.held {
            self.line.add_permits(1);
        }
        // The table's and this one: no other turn of this client waits or runs. New turns
        // clone the line under the table's lock, so none can appear meanwhile.
        if Arc::strong_count(&self.line) == 2 {
            clients.remove(&self.client);
        }
    }
}

impl VerifyGate {
    /// A gate for `cores` verifications at once (at least one).
    pub fn new(cores: usize) -> VerifyGate {
        VerifyGate {
            shares: Arc::new(Semaphore::new(SHARES as usize)),
            cores: u32::try_from(cores.max(1)).unwrap_or(u32::MAX).min(SHARES),
            clients: Arc::default(),
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
    /// the gate admits it within `budget_bytes` — after `client`'s earlier ones, when it
    /// names the client asking (None: the server's own work, in no client's line); its share
    /// is held until `work` ends, even when the caller waiting for it is gone. Err only if
    /// `work` panicked.
    pub async fn run_blocking<T: Send + 'static>(
        &self,
        client: Option<ClientKey>,
        memory_bytes: u64,
        budget_bytes: u64,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let turn = match client {
            Some(client) => Some(self.client_turn(client).await),
            None => None,
        };
        let permit = self.enter(memory_bytes, budget_bytes).await;
        tokio::task::spawn_blocking(move || {
            let _held = (turn, permit);
            work()
        })
        .await
    }

    /// Waits for one of `client`'s turns at the shared gate.
    async fn client_turn(&self, client: ClientKey) -> ClientTurn {
        let line = {
            let mut clients = self
                .clients
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            let cores = self.cores as usize;
            clients
                .entry(client)
                .or_insert_with(|| Arc::new(Semaphore::new(cores)))
                .clone()
        };
        let mut turn = ClientTurn {
            client,
            line,
            clients: self.clients.clone(),
            held: false,
        };
        turn.take().await;
        turn
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

    /// Clients with a verification waiting or running.
    #[cfg(test)]
    fn clients_in_line(&self) -> usize {
        self.clients.lock().expect("not poisoned").len()
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

    /// A client whose verifications wait in its own line.
    fn client(last_octet: u8) -> ClientKey {
        ClientKey::of_ip(std::net::IpAddr::from([127, 0, 0, last_octet]))
    }

    /// Runs a verification of `client` through `gate` that records `label` in `order` and,
    /// with `hold`, ends only when told to.
    fn verification(
        gate: &Arc<VerifyGate>,
        client: ClientKey,
        label: &'static str,
        order: &Arc<Mutex<Vec<&'static str>>>,
        hold: Option<std::sync::mpsc::Receiver<()>>,
    ) -> tokio::task::JoinHandle<()> {
        let (gate, order) = (gate.clone(), order.clone());
        tokio::spawn(async move {
            let work = move || {
                order.lock().expect("not poisoned").push(label);
                if let Some(hold) = hold {
                    hold.recv().expect("told to end");
                }
            };
            gate.run_blocking(Some(client), 0, 1024 * MIB, work)
                .await
                .expect("no panic");
        })
    }

    /// Polls `condition` until it holds (a minute at most: then the test fails).
    async fn until(condition: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !condition() {
            assert!(std::time::Instant::now() < deadline, "never came to pass");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_with_many_waiting_does_not_hold_back_another() {
        let gate = Arc::new(VerifyGate::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let (busy, other) = (client(1), client(2));
        let (end_first, held) = std::sync::mpsc::channel();
        let first = verification(&gate, busy, "busy", &order, Some(held));
        until(|| order.lock().expect("not poisoned").len() == 1).await;
        let queued: Vec<_> = (0..4)
            .map(|_| verification(&gate, busy, "busy", &order, None))
            .collect();
        let line_of = |key: ClientKey| {
            gate.clients
                .lock()
                .expect("not poisoned")
                .get(&key)
                .cloned()
        };
        // The table's line, the running turn's and the four waiting ones'.
        until(|| line_of(busy).is_some_and(|line| Arc::strong_count(&line) == 1 + 1 + 1 + 4)).await;
        let late = verification(&gate, other, "other", &order, None);
        // Its turn asked for (the table's, its own and this look's): it takes it and waits at
        // the shared gate in the same poll.
        until(|| line_of(other).is_some_and(|line| Arc::strong_count(&line) == 3)).await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        end_first.send(()).expect("the first runs");
        for task in [first, late].into_iter().chain(queued) {
            task.await.expect("no panic");
        }
        let order = order.lock().expect("not poisoned").clone();
        assert_eq!(order.len(), 6);
        assert_eq!(
            order[..2],
            ["busy", "other"],
            "first come, first served: {order:?}"
        );
        assert_eq!(gate.clients_in_line(), 0);
        assert_eq!(gate.idle_fraction(), 1.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_abandoned_wait_leaves_nothing_behind() {
        let gate = Arc::new(VerifyGate::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let (end_first, held) = std::sync::mpsc::channel();
        let first = verification(&gate, client(1), "first", &order, Some(held));
        until(|| order.lock().expect("not poisoned").len() == 1).await;
        let abandoned = verification(&gate, client(1), "abandoned", &order, None);
        let waiting = verification(&gate, client(2), "waiting", &order, None);
        until(|| gate.clients_in_line() == 2).await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        abandoned.abort();
        waiting.abort();
        assert!(abandoned.await.is_err_and(|error| error.is_cancelled()));
        assert!(waiting.await.is_err_and(|error| error.is_cancelled()));
        end_first.send(()).expect("the first runs");
        first.await.expect("no panic");
        assert_eq!(*order.lock().expect("not poisoned"), ["first"]);
        assert_eq!(gate.clients_in_line(), 0);
        assert_eq!(gate.idle_fraction(), 1.0);
    }
}
