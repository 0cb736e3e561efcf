//! lmdir-load: the parallel bulk loader and reindexer.
pub mod runs;
