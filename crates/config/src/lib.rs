//! lmdir-config
