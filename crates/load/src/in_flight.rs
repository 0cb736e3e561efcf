//! The LDIF bytes between the reader and the writer, held to a share of the load's memory
//! budget. Batches are counted too (`BATCHES_IN_FLIGHT_PER_WORKER`), but a batch holds at
//! least one whole record: without a byte count, a few batches of large records (each up to
//! `--memory`) would be prepared at once, several times the budget.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

pub(crate) struct InFlight {
    state: Mutex<State>,
    changed: Condvar,
    limit_bytes: usize,
}

struct State {
    bytes: usize,
    /// The load is over (done or failed): nobody waits any more.
    closed: bool,
}

impl InFlight {
    pub(crate) fn new(limit_bytes: usize) -> InFlight {
        InFlight {
            state: Mutex::new(State {
                bytes: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            limit_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A batch fits when it stays within the limit, or when nothing else is in flight (one
    /// batch alone always passes: a record is never larger than the budget).
    fn admits(&self, state: &State, batch_bytes: usize) -> bool {
        state.bytes == 0 || state.bytes + batch_bytes <= self.limit_bytes
    }

    /// Counts a batch in, waiting while it does not fit; false once the load is closed.
    pub(crate) fn acquire(&self, batch_bytes: usize) -> bool {
        let mut state = self.lock();
        while !state.closed && !self.admits(&state, batch_bytes) {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.closed {
            return false;
        }
        state.bytes += batch_bytes;
        true
    }

    /// Counts a written batch out.
    pub(crate) fn release(&self, batch_bytes: usize) {
        let mut state = self.lock();
        state.bytes = state.bytes.saturating_sub(batch_bytes);
        self.changed.notify_all();
    }

    /// Ends every wait (the load is over or failed).
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    #[cfg(test)]
    fn would_admit(&self, batch_bytes: usize) -> bool {
        self.admits(&self.lock(), batch_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_fit_the_limit_and_one_alone_always_passes() {
        let in_flight = InFlight::new(100);
        assert!(in_flight.acquire(60));
        assert!(in_flight.would_admit(40));
        assert!(!in_flight.would_admit(41));
        in_flight.release(60);
        // Larger than the limit, but alone.
        assert!(in_flight.would_admit(500));
        assert!(in_flight.acquire(500));
        assert!(!in_flight.would_admit(1));
        in_flight.release(500);
        assert!(in_flight.would_admit(100));
    }

    #[test]
    fn a_waiting_batch_goes_on_when_another_is_written_or_the_load_closes() {
        let in_flight = InFlight::new(100);
        assert!(in_flight.acquire(80));
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| in_flight.acquire(50));
            in_flight.release(80);
            assert!(waiter.join().unwrap());
        });
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| in_flight.acquire(80));
            in_flight.close();
            assert!(!waiter.join().unwrap());
        });
    }
}
