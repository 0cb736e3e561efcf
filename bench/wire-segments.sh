#!/usr/bin/env bash
# TCP segments on the wire per authentication, for slapd and for lmdir: the UnboundID authrate
# of serve-vs-openldap.sh (a `1.1` search on one connection, a simple bind on another, 8
# threads) against each server on the stores that script left in $WORK_DIR, with `nstat`
# counting the loopback's segments over the run. Four is the fewest: two requests and two
# responses, one segment each, each ACK carried by the next segment. A server that writes an
# entry and its result apart, or a side that sends pure ACKs, shows more; each extra segment is
# a trip through the loopback's softirq and, for data, a wake-up of the reader.
# nstat counts the whole network namespace: run it on a quiet machine.
# Usage: [LMDIR=binary] [SECONDS_MEASURED=10] bench/wire-segments.sh [PEOPLE]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-200000}"
require_served_stores "$PEOPLE"
SECONDS_MEASURED="${SECONDS_MEASURED:-10}"
INTERVAL_SECONDS=5
OPENLDAP_PORT=3890
LMDIR_PORT=3891
command -v nstat >/dev/null || { log "nstat is needed (iproute2)"; exit 1; }
ensure_unboundid
uid_workload "$PEOPLE"
build_lmdir

# $1 name, $2 port: the authrate for SECONDS_MEASURED seconds, no warm-up interval (nstat would
# count its segments too); prints the segments and pure ACKs per authentication.
segments_per_authentication() {
  local name="$1" port="$2" csv="$WORK_DIR/wire-segments-$1.csv" counters
  nstat -n > /dev/null
  unboundid authrate --hostname 127.0.0.1 --port "$port" --bindDN "$ROOTDN" --bindPassword "$ROOTPW" \
    --intervalDuration "$INTERVAL_SECONDS" --numIntervals $((SECONDS_MEASURED / INTERVAL_SECONDS)) \
    --warmUpIntervals 0 --csv "${UID_WORKLOAD[@]}" --credentials password > "$csv" 2>&1
  counters=$(nstat -z TcpOutSegs TcpExtTCPPureAcks TcpExtDelayedACKs)
  # The CSV's first column is each interval's authentications per second.
  awk -F, -v name="$name" -v interval="$INTERVAL_SECONDS" -v counters="$counters" '
    NF > 3 && $1 ~ /^[0-9"]/ { gsub(/"/, "", $1); authentications += $1 * interval }
    END {
      if (authentications == 0) { print name ": no authentications measured"; exit 1 }
      n = split(counters, lines, "\n")
      for (i = 1; i <= n; i++) { split(lines[i], field, " "); count[field[1]] = field[2] }
      printf "%s: %d authentications, TCP segments %.2f per authentication, pure ACKs %.3f, delayed ACKs %.3f\n",
        name, authentications, count["TcpOutSegs"] / authentications,
        count["TcpExtTCPPureAcks"] / authentications, count["TcpExtDelayedACKs"] / authentications
    }' "$csv"
}

start_slapd "$WORK_DIR/openldap-serve" "$OPENLDAP_PORT"
"$LMDIR" --config "$CONFIG" serve --no-demo > "$WORK_DIR/wire-segments-lmdir.log" 2>&1 &
LMDIR_PID=$!
trap 'kill $LMDIR_PID 2>/dev/null || true; stop_slapd "$WORK_DIR/openldap-serve"' EXIT
wait_ldap "$LMDIR_PORT"
warm_files "$WORK_DIR"/lmdir-serve/*.mdb "$WORK_DIR"/openldap-serve/db/*.mdb
segments_per_authentication openldap "$OPENLDAP_PORT"
segments_per_authentication lmdir "$LMDIR_PORT"
