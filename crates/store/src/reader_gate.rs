//! The reader gate: counts this process's open read txns, so that the map is grown only when
//! none is open (LMDB's rule for `mdb_env_set_mapsize`), and closes to new ones meanwhile.
//!
//! Every read passes it twice, on two threads at once on a busy server. A mutex there cost
//! each search a contended lock and, through the condvar's `notify_all`, a `futex` syscall
//! on the way out (two per search under `searchrate`). The gate's state is therefore one
//! atomic word: a read's way in and out is one atomic add each; the mutex and condvar serve
//! only the rare slow paths (a read arriving while the map grows, a growth waiting for reads).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Set in the state while a growth waits for readers or runs: no read may enter.
const CLOSED: usize = 1 << (usize::BITS - 1);

pub(crate) struct ReaderGate {
    /// Open read txns, plus `CLOSED`.
    state: AtomicUsize,
    /// Held across each check-then-wait of the slow paths, and by whoever notifies them, so
    /// no wake-up falls between a waiter's check and its wait.
    waiting: Mutex<()>,
    changed: Condvar,
}

impl Default for ReaderGate {
    fn default() -> Self {
        ReaderGate {
            state: AtomicUsize::new(0),
            waiting: Mutex::new(()),
            changed: Condvar::new(),
        }
    }
}

impl ReaderGate {
    /// Counts a read in, waiting while the gate is closed.
    pub(crate) fn enter(&self) {
        loop {
            // The add and the check are one atomic step: a growth that closes the gate after
            // it counts this reader and waits for it.
            let before = self.state.fetch_add(1, Ordering::SeqCst);
            assert!(before & !CLOSED < CLOSED - 1, "reader count overflow");
            if before & CLOSED == 0 {
                return;
            }
            // Closed: back out (waking the growth if this was the count it waited on), then
            // wait for it to reopen.
            self.leave();
            let mut guard = crate::lock::lock(&self.waiting);
            while self.state.load(Ordering::SeqCst) & CLOSED != 0 {
                guard = self
                    .changed
                    .wait(guard)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
    }

    /// Counts a read out.
    pub(crate) fn leave(&self) {
        let before = self.state.fetch_sub(1, Ordering::SeqCst);
        assert!(before & !CLOSED > 0, "a read left that never entered");
        if before & CLOSED != 0 {
            let _guard = crate::lock::lock(&self.waiting);
            self.changed.notify_all();
        }
    }

    /// Read txns open now.
    pub(crate) fn readers(&self) -> usize {
        self.state.load(Ordering::SeqCst) & !CLOSED
    }

    /// Closes the gate, waits up to `wait_max` for the open reads to end, runs `change` with
    /// none open and reopens. None (and `change` not run) when reads stayed open past the
    /// wait. Callers hold the store's writer lock: one change at a time.
    pub(crate) fn with_no_readers<T>(
        &self,
        wait_max: Duration,
        change: impl FnOnce() -> T,
    ) -> Option<T> {
        let mut guard = crate::lock::lock(&self.waiting);
        let before = self.state.fetch_or(CLOSED, Ordering::SeqCst);
        assert!(before & CLOSED == 0, "two changes closed the reader gate");
        let deadline = Instant::now() + wait_max;
        let result = loop {
            if self.readers() == 0 {
                break Some(change());
            }
            let now = Instant::now();
            if now >= deadline {
                break None;
            }
            guard = self
                .changed
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        };
        self.state.fetch_and(!CLOSED, Ordering::SeqCst);
        self.changed.notify_all();
        drop(guard);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn a_change_waits_for_open_reads_and_runs_with_none() {
        let gate = Arc::new(ReaderGate::default());
        gate.enter();
        let reading = Arc::new(AtomicBool::new(true));
        let leaver = {
            let (gate, reading) = (gate.clone(), reading.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                reading.store(false, Ordering::SeqCst);
                gate.leave();
            })
        };
        let ran = gate.with_no_readers(Duration::from_secs(60), || {
            assert!(!reading.load(Ordering::SeqCst), "ran while a read was open");
            gate.readers()
        });
        assert_eq!(ran, Some(0));
        leaver.join().unwrap();
        gate.enter();
        assert_eq!(gate.readers(), 1, "the gate reopened");
        gate.leave();
    }

    #[test]
    fn a_change_gives_up_when_a_read_stays_open_and_reads_go_on() {
        let gate = ReaderGate::default();
        gate.enter();
        assert_eq!(gate.with_no_readers(Duration::from_millis(20), || ()), None);
        gate.enter();
        assert_eq!(gate.readers(), 2);
        gate.leave();
        gate.leave();
        assert_eq!(gate.readers(), 0);
    }

    /// Many threads enter and leave while changes run: no change ever sees an open read, and
    /// every reader gets in.
    #[test]
    fn reads_and_changes_interleave_without_overlap() {
        let gate = Arc::new(ReaderGate::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (gate, inside) = (gate.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        gate.enter();
                        inside.fetch_add(1, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        gate.leave();
                    }
                })
            })
            .collect();
        let mut changes_run = 0;
        for _ in 0..200 {
            if let Some(open) =
                gate.with_no_readers(Duration::from_secs(60), || inside.load(Ordering::SeqCst))
            {
                assert_eq!(open, 0, "a change ran beside a read");
                changes_run += 1;
            }
        }
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(changes_run, 200);
        assert_eq!(gate.readers(), 0);
    }
}
