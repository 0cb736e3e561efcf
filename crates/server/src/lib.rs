//! lmdir-server
