#!/usr/bin/env bash
# Where the instructions of one kind of operation go: inclusive callgrind costs of the search
# path's stages, divided by the operations of the dump (stages overlap where one calls another).
# Usage: bench/callgrind-stages.sh DUMP N   (a dump of bench/search-instructions.sh, N operations in it,
# e.g. bench/work/instructions-lmdir/callgrind/callgrind.out.PID.2 1200: the eq-1200 dump)
set -euo pipefail
f=$1; n=$2; annotated=$(mktemp); trap 'rm -f "$annotated"' EXIT
callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f" 2>/dev/null > "$annotated"
total=$(awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}' "$annotated")
get() { { grep -F "$1 [" "$annotated" || true; } | head -1 | awk '{gsub(",","",$1); print $1}'; }
printf "%-40s %10s %6s\n" stage instr share
for pair in "total:PROGRAM" "read txn open:lmdir_store::read::<impl lmdir_store::store::Store>::read" \
  "PDU decode:<lmdir_server::pdu::PduCodec as tokio_util::codec::decoder::Decoder>::decode" \
  "prepare (filter, estimate):lmdir_server::search::PreparedSearch::new" \
  "  estimate:lmdir_store::search::<impl lmdir_store::read::ReadTxn>::estimated_candidate_count" \
  "  filter prepare:lmdir_schema::filter::<impl lmdir_schema::schema::Schema>::prepare_filter" \
  "DN normalization:lmdir_schema::schema::Schema::normalize_dn_str" \
  "special bases (subschema):lmdir_server::search::subschema::subschema_search" \
  "special bases (monitor):lmdir_server::search::monitor::monitor_search" \
  "search job:lmdir_server::search::SearchJob::run" \
  "  base check:lmdir_server::entry_read::disclosed_entry" \
  "  attribute selection resolve:lmdir_server::entry_read::Selection::resolve" \
  "  store search open (base, candidates):lmdir_store::search::<impl lmdir_store::read::ReadTxn>::search" \
  "  cursor next (entry fetch+decode+filter):<lmdir_store::search::SearchCursor as core::iter::traits::iterator::Iterator>::next" \
  "  access checks:lmdir_server::search::VisibleEntries::access" \
  "  output (DN, attributes, BER):lmdir_server::search::SearchOutput::emit_with" \
  "result done + log:lmdir_server::operations::<impl lmdir_server::context::OperationContext>::finish_with_controls::{{closure}}" \
  "write to socket:lmdir_server::connection::write_outgoing::{{closure}}" \
  "allocator (mimalloc malloc):mi_malloc_aligned" "allocator (free):mi_free" \
  "LMDB B-tree search:mdb_page_search" ; do
  name=${pair%%:*}; fn=${pair#*:}
  if [ "$fn" = PROGRAM ]; then v=$total; else v=$(get "$fn"); fi
  [ -z "$v" ] && v=0
  printf "%-40s %10d %5.1f%%\n" "$name" $((v / n)) $(awk -v a=$v -v b=$total 'BEGIN{print 100*a/b}')
done
