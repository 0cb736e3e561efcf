#!/usr/bin/env bash
# Instructions, not seconds: the bulk load of N generated people (default 20,000) under
# `valgrind --tool=callgrind`, lmdir (`bench_load --quick --small-map`, the loader `lmdir load
# --quick` runs) against OpenLDAP (`slapadd -q`, tool-threads 1), same LDIF, same 19 indexes,
# for each profile. Instruction counts do not depend on what else the machine runs, so this is
# the measurement to use on a shared machine; wall time on 2 cores also depends on how much of
# the work is serial, so lmdir's count is split into the phase that runs on every core (reader,
# workers, the sequencer appending id2entry) and the tail after the workers are done (merge,
# DN tree and index APPEND writes, the final commit).
# Kernel work (page faults, fsync, write(2)) is not counted by callgrind: user space only.
#
# Usage: [PROFILES="standard large mixed"] [SLAPADD=yes|no] [BENCH_LOAD=binary TAG=name] bench/load-instructions.sh [N]
# Output: one table per profile on stdout; the callgrind files stay in $WORK_DIR/instructions/.
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-20000}"
PROFILES="${PROFILES:-standard large mixed}"
SLAPADD="${SLAPADD:-yes}"
OUT="$WORK_DIR/instructions"
mkdir -p "$OUT"
command -v valgrind >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
[ "$SLAPADD" = no ] || ensure_packages

# BENCH_LOAD=path measures a binary built earlier (a before/after pair) instead of building.
if [ -z "${BENCH_LOAD:-}" ]; then
  log "building the loader benchmark (release)"
  (cd "$REPO_DIR" && cargo build --release -q -p lmdir-load --example bench_load)
  BENCH_LOAD="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/examples/bench_load"
fi
TAG="${TAG:-lmdir}"

# The annotated profile of callgrind file $1, inclusive costs, written once beside it.
annotated() {
  [ -f "$1.inclusive" ] || callgrind_annotate --inclusive=yes --threshold=100 "$1" > "$1.inclusive" 2>/dev/null
  echo "$1.inclusive"
}
# Inclusive instructions of the function (symbol) whose name matches $2 in callgrind file $1;
# lines naming a binary in brackets are whole symbols (the others are code inlined into them).
inclusive() {
  awk -v pattern="$2" '/ \[\// && $0 ~ pattern { gsub(",", "", $1); print $1; found = 1; exit }
    END { if (!found) print 0 }' "$(annotated "$1")"
}
# The same for a function whose inclusive line may lack the bracket (a generic function
# instantiated in another crate: callgrind names it by its source file only).
inclusive_any() {
  awk -v pattern="$2" '$0 ~ pattern { gsub(",", "", $1); print $1; found = 1; exit }
    END { if (!found) print 0 }' "$(annotated "$1")"
}
total() { awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$(annotated "$1")"; }
per_entry() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.0f", a / n }'; }

for profile in $PROFILES; do
  ldif="$OUT/people-$PEOPLE-$profile.ldif"
  [ -f "$ldif" ] || "$BENCH_LOAD" "$PEOPLE" "$OUT" --profile "$profile" --ldif "$ldif" --small-map >/dev/null 2>&1
  entries=$(grep -c '^dn:' "$ldif")
  lmdir_cg="$OUT/$TAG-$profile.cg"
  # REUSE=yes: tabulate the callgrind files of an earlier run instead of running again.
  if [ "${REUSE:-no}" != yes ] || [ ! -f "$lmdir_cg" ]; then
    log "lmdir under callgrind: $entries entries, profile $profile"
    valgrind --tool=callgrind --callgrind-out-file="$lmdir_cg" \
      "$BENCH_LOAD" "$PEOPLE" "$OUT" --ldif "$ldif" --small-map > "$OUT/$TAG-$profile.out" 2>&1
    rm -rf "$OUT/db-$PEOPLE" "$lmdir_cg.inclusive"
  fi
  lmdir_total=$(total "$lmdir_cg")

  slapadd_total=0
  if [ "$SLAPADD" != no ] && { [ "${REUSE:-no}" != yes ] || [ ! -f "$OUT/slapadd-$profile.cg" ]; }; then
    instance="$OUT/openldap-$profile"
    rm -rf "$instance"
    config=$(write_slapd_config "$instance")
    log "slapadd -q under callgrind: profile $profile"
    valgrind --tool=callgrind --callgrind-out-file="$OUT/slapadd-$profile.cg" \
      slapadd -q -f "$config" -l "$ldif" > "$OUT/slapadd-$profile.out" 2>&1
    rm -rf "$instance" "$OUT/slapadd-$profile.cg.inclusive"
  fi
  [ "$SLAPADD" = no ] || slapadd_total=$(total "$OUT/slapadd-$profile.cg")

  printf '\nprofile %s: %s entries (%s people), %s\n' "$profile" "$entries" "$PEOPLE" "$(date -u +%F)"
  printf '%-58s %16s %12s\n' "phase (inclusive, all threads)" "instructions" "per entry"
  row() { printf '%-58s %16s %12s\n' "$1" "$2" "$(per_entry "$2" "$entries")"; }
  row "lmdir total" "$lmdir_total"
  # Parallel part: the reader, the workers and the sequencer run together.
  row "  parallel: LDIF reader (record splitting)" "$(inclusive "$lmdir_cg" 'pipeline::read_batches')"
  row "  parallel: workers (prepare_batches)" "$(inclusive "$lmdir_cg" 'pipeline::prepare_batches')"
  row "    LDIF parse (parse_record_view)" "$(inclusive "$lmdir_cg" 'parse::parse_record_view')"
  row "    normalize values (normalize_pairs)" "$(inclusive "$lmdir_cg" 'rows::normalize_pairs')"
  row "    operational attributes (stamp_creation)" "$(inclusive "$lmdir_cg" 'stamp_creation')"
  row "    DN placement (tree_place)" "$(inclusive "$lmdir_cg" 'Inner>::tree_place')"
  row "    id2entry value (encode_attributes)" "$(inclusive "$lmdir_cg" 'rows::encode_attributes')"
  row "    index keys (index_keys_for_value: grams, hashes, pushes)" "$(inclusive "$lmdir_cg" 'layout::index_keys_for_value')"
  row "    pair sorts (sort_pairs; in the pushes when a buffer fills)" "$(inclusive "$lmdir_cg" 'PostingRun::sort_pairs')"
  row "  parallel: sequencer (id2entry APPEND, tree)" "$(inclusive "$lmdir_cg" 'pipeline::sequence')"
  # Serial tail: after the workers finish (two threads: the merge feeds the one writer).
  row "  tail, writer thread (write_tree_and_indexes)" "$(inclusive "$lmdir_cg" 'pipeline::write_tree_and_indexes')"
  row "    DN tree (write_dn_tree)" "$(inclusive "$lmdir_cg" 'pipeline::write_dn_tree')"
  row "    index chunk APPEND (append_index_chunks)" "$(inclusive_any "$lmdir_cg" 'bulk.rs:lmdir_store::bulk::BulkWriter::append_index_chunks?( |$)')"
  row "  tail, merge thread (merge_and_encode)" "$(inclusive "$lmdir_cg" 'pipeline::merge_and_encode')"
  row "  tail: final commit (BulkWriter::finish)" "$(inclusive "$lmdir_cg" 'BulkWriter::finish')"
  if [ "$SLAPADD" != no ]; then
    row "slapadd -q total" "$slapadd_total"
    awk -v s="$slapadd_total" -v l="$lmdir_total" 'BEGIN { printf "instructions slapadd / lmdir: %.2fx\n", s / l }'
  fi
done
