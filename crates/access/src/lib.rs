//! lmdir-access
