//! lmdir-schema
