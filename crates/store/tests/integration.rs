//! Every integration test of this crate, one module per former test file, linked into one binary.
//! (One binary per file linked every dependency each time: gigabytes of a CI disk.)

mod common;

mod candidate_bounds;
mod change_records;
mod check_and_config;
mod codec_properties;
mod context_csn;
mod descriptions_reload;
mod dn_cache;
mod export_round_trip;
mod glue_probe;
mod map_growth;
mod memberof;
mod module_graph;
mod normalize_once;
mod normalized_lookup;
mod one_writer_and_damage;
mod out_of_line;
mod parents_first;
mod preparation_upgrade;
mod random_writes_then_check;
mod search_matches_brute_force;
mod session_log;
mod snapshot_isolation;
mod substring_candidates;
mod value_blocks;
mod write_bounds;
mod write_semantics;
