//! lmdir-gen
