//! A value the configuration reload replaces while the server runs: readers take the current
//! snapshot (an `Arc`) once per operation and use it throughout, so one operation never sees
//! half of an old configuration and half of a new one.

use std::sync::{Arc, RwLock};

pub struct Live<T>(RwLock<Arc<T>>);

impl<T> Live<T> {
    pub fn new(value: T) -> Live<T> {
        Live(RwLock::new(Arc::new(value)))
    }

    /// The current snapshot.
    pub fn load(&self) -> Arc<T> {
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Replaces the snapshot; operations already holding the old one finish with it.
    pub fn store(&self, value: Arc<T>) {
        *self
            .0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = value;
    }
}

impl<T: Default> Default for Live<T> {
    fn default() -> Live<T> {
        Live::new(T::default())
    }
}
