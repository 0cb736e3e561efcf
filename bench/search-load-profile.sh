#!/usr/bin/env bash
# Where a uid search's server time goes under load (issue 21): the uid searchrate of
# serve-vs-openldap.sh (8 threads, --attribute cn) against lmdir on the store that script left
# in $WORK_DIR/lmdir-serve, then against the protocol-only responder. For each server, over
# SECONDS_MEASURED seconds in the middle of its run:
# - CPU, context switches and system calls per search (perf stat);
# - the kernel's share of the server's samples and the top symbols (perf record -e cpu-clock).
# Run bench/serve-vs-openldap.sh 200000 first (same PROFILE and WORK_DIR), on a quiet machine.
# RATE=auth runs the authrate instead; then each figure is per request (a search or a bind).
# Usage: [LMDIR=binary] [SECONDS_MEASURED=5] [RATE=uid|auth] bench/search-load-profile.sh [PEOPLE]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-200000}"
SECONDS_MEASURED="${SECONDS_MEASURED:-5}"
RATE="${RATE:-uid}"
LMDIR_PORT=3891
RESPONDER_PORT=3899
require_served_stores "$PEOPLE"
command -v perf >/dev/null || { log "perf is needed (linux-perf)"; exit 1; }
ensure_unboundid
uid_workload "$PEOPLE"
build_lmdir
RESPONDER="$REPO_DIR/target/release/examples/protocol_only"
[ -x "$RESPONDER" ] || (cd "$REPO_DIR" && cargo build --release -p lmdir-server --example protocol_only)

# $1 port: the uid searchrate (RATE=uid) or authrate (RATE=auth: a search and a bind per
# authentication, each a request below) for 1 warm-up and 3 measured intervals of 5 s, in the
# background, with serve-vs-openldap.sh's arguments.
start_rate() {
  local tool=searchrate specific=(--attribute cn)
  if [ "$RATE" = auth ]; then tool=authrate; specific=(--credentials password); fi
  unboundid "$tool" --hostname 127.0.0.1 --port "$1" --bindDN "$ROOTDN" --bindPassword "$ROOTPW" \
    --intervalDuration 5 --numIntervals 3 --warmUpIntervals 1 --csv \
    "${UID_WORKLOAD[@]}" "${specific[@]}" > "$WORK_DIR/load-profile-rate.csv" 2>&1 &
  RATE_PID=$!
}

# $1 name, $2 pid, $3 port: measures the server under the searchrate; prints one report.
measure() {
  local name="$1" pid="$2" port="$3" stat="$WORK_DIR/load-profile-$1.stat"
  start_rate "$port"
  sleep 7
  perf stat -x, -e task-clock,context-switches,syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex \
    -p "$pid" -- sleep "$SECONDS_MEASURED" 2> "$stat"
  perf record -q -F 5000 -e cpu-clock -g -p "$pid" -o "$WORK_DIR/load-profile-$name.data" -- sleep 3 2>/dev/null
  wait "$RATE_PID"
  # Requests in the measured window: the recvfrom count (one read per request).
  awk -F, -v name="$name" -v secs="$SECONDS_MEASURED" '
    $3 == "task-clock" { cpu_ms = $1 }
    $3 == "context-switches" { switches = $1 }
    $3 ~ /sys_enter_/ { sub("syscalls:sys_enter_", "", $3); calls[$3] = $1 }
    END {
      requests = calls["recvfrom"]
      if (requests == 0) { print name ": no requests measured"; exit 1 }
      printf "%s: %.0f requests/s, server CPU %.1f us per request, context switches %.2f,", name, requests / secs, cpu_ms * 1000 / requests, switches / requests
      printf " per request: writev %.2f epoll_wait %.2f futex %.2f\n", calls["writev"] / requests, calls["epoll_wait"] / requests, calls["futex"] / requests
    }' "$stat"
  perf report -i "$WORK_DIR/load-profile-$name.data" --no-children --sort dso -g none 2>/dev/null \
    | awk -v name="$name" '/%/ && /kernel/ { print name ": kernel share of the samples " $1 }' || true
  perf report -i "$WORK_DIR/load-profile-$name.data" --no-children --sort sym -g none 2>/dev/null \
    | grep "%" | head -8 | sed "s/^/$name:   /" || true  # head closes the pipe early
}

"$LMDIR" --config "$CONFIG" serve --no-demo > "$WORK_DIR/load-profile-lmdir.log" 2>&1 &
LMDIR_PID=$!
"$RESPONDER" "127.0.0.1:$RESPONDER_PORT" > "$WORK_DIR/load-profile-responder.log" 2>&1 &
RESPONDER_PID=$!
trap 'kill $LMDIR_PID $RESPONDER_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  ldapsearch -x -H "ldap://127.0.0.1:$LMDIR_PORT" -b "" -s base >/dev/null 2>&1 && break
  sleep 0.3
done
# The store's pages in memory first (an idle machine's DAMON evicts them after a minute).
cat "$WORK_DIR"/lmdir-serve/*.mdb > /dev/null
measure lmdir "$LMDIR_PID" "$LMDIR_PORT"
measure protocol-only "$RESPONDER_PID" "$RESPONDER_PORT"
