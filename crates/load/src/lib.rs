//! lmdir-load
