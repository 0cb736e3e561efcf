//! lmdir-ldif
