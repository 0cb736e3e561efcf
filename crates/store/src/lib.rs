//! lmdir-store
