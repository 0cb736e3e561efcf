#!/usr/bin/env bash
# A/B of two lmdir binaries on the searchrate uid test (8 threads, 3 x 5 s), slapd alternating:
# slapd, A, slapd, B per round. Serves the DBs `bench/serve-vs-openldap.sh N` left in $WORK_DIR
# (lmdir-serve, openldap-serve): run that first with the same N.
# Usage: bench/searchrate-ab.sh BINARY_A BINARY_B [ROUNDS] [N_PEOPLE]
source "$(dirname "$0")/common.sh"
A="$1"; B="$2"; ROUNDS="${3:-3}"; PEOPLE="${4:-206000}"
ensure_unboundid
uid_workload "$PEOPLE"
rate() {  # $1 port: the overall searches per second
  unboundid searchrate --hostname 127.0.0.1 --port "$1" --bindDN "$ROOTDN" --bindPassword "$ROOTPW" \
    --intervalDuration 5 --numIntervals 3 --warmUpIntervals 1 --csv "${UID_WORKLOAD[@]}" \
    --attribute cn 2>&1 | overall_rate 5
}
start_slapd "$WORK_DIR/openldap-serve" 3890
for round in $(seq 1 "$ROUNDS"); do
  for binary in "$A" "$B"; do
    "$binary" --config "$WORK_DIR/lmdir-serve.toml" serve --no-demo > "$WORK_DIR/searchrate-ab.log" 2>&1 &
    pid=$!
    wait_ldap 3891
    echo "round $round slapd $(rate 3890)"
    echo "round $round $binary $(rate 3891)"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
stop_slapd "$WORK_DIR/openldap-serve"
