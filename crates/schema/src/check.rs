//! Schema checking of entries.
