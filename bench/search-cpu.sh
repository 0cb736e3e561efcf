#!/bin/bash
# Server CPU (utime+stime from /proc/PID/stat) per search over one connection, after 500 warm-up
# searches: search-cpu.sh LMDIR_BINARY CONFIG PORT eq|sub N. CPU time, not rates: a shared machine
# still adds noise, so alternate the binaries and compare medians of several runs.
set -euo pipefail
BIN=$1; CONFIG=$2; PORT=$3; KIND=$4; N=$5
CLIENT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/search-client.py"
"$BIN" serve --config "$CONFIG" > /dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do python3 "$CLIENT" "$PORT" 1 eq > /dev/null 2>&1 && break; sleep 0.2; done
python3 "$CLIENT" "$PORT" 500 "$KIND" > /dev/null
T0=$(awk '{print $14+$15}' /proc/$PID/stat)
python3 "$CLIENT" "$PORT" "$N" "$KIND" > /dev/null
T1=$(awk '{print $14+$15}' /proc/$PID/stat)
TICK=$(getconf CLK_TCK)
echo "$KIND $(basename "$BIN") cpu_us_per_search=$(( (T1 - T0) * 1000000 / TICK / N ))"
