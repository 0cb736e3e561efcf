#!/bin/bash
# What per-operation log lines cost (issue 13), in instructions, not time: the machine is shared,
# so rates and CPU ticks are noise, while callgrind's instruction count of the same work repeats.
#
#   bench/log-cost.sh LMDIR_BINARY [N1 N2 [CASES...]]    (defaults: 1000 4000, warn-text info-text info-json)
#
# For each case (LEVEL-FORMAT) the server runs twice under `valgrind --tool=callgrind` (all its
# threads counted together), once for N1 and once for N2 `(uid=uNNNNNNN)` equality searches sent by
# bench/search-client.py from outside valgrind over one connection, log lines going to a file.
# Instructions per search = (total(N2) - total(N1)) / (N2 - N1): start-up, loading and shutdown
# cancel out. 20,000 people (`lmdir gen 20000 --seed 1`, default indexes), loaded once natively;
# `[database] map_size_bytes` keeps LMDB's reservation small enough for valgrind.
# KEEP=DIR keeps each run's callgrind output as DIR/LEVEL-FORMAT-N.out (for callgrind_annotate).
set -euo pipefail
BIN=$(realpath "$1"); N1=${2:-1000}; N2=${3:-4000}; shift $(( $# < 3 ? $# : 3 ))
CASES=("$@"); [ ${#CASES[@]} -gt 0 ] || CASES=(warn-text info-text info-json)
CLIENT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/search-client.py"
WORK=$(mktemp -d /tmp/log-cost.XXXXXX)
SERVER=""
cleanup() { [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# config LEVEL FORMAT: a config file for that case, on the one database.
config() {
  local file="$WORK/$1-$2.toml"
  cat > "$file" <<EOF
[server]
listen = ["ldap://127.0.0.1:$PORT"]
log = "$1"
log_format = "$2"
log_file = "$WORK/lmdir.log"
size_limit = 0
[database]
directory = "$WORK/db"
map_size_bytes = 4294967296
EOF
  echo "$file"
}

# instructions CONFIG N: callgrind's total for a server that answers N searches (plus one probe).
instructions() {
  local out="$WORK/callgrind.out"
  rm -f "$out" "$WORK/lmdir.log"
  valgrind --tool=callgrind --trace-children=no --callgrind-out-file="$out" \
    "$BIN" --config "$1" serve > /dev/null 2> "$WORK/valgrind.err" &
  SERVER=$!
  # Start-up under valgrind takes seconds: probe until one search is answered (a hang guard).
  for _ in $(seq 1 600); do python3 "$CLIENT" "$PORT" 1 eq > /dev/null 2>&1 && break; sleep 0.5; done
  python3 "$CLIENT" "$PORT" "$2" eq > /dev/null
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=""
  [ -z "${KEEP:-}" ] || cp "$out" "$KEEP/$(basename "$1" .toml)-$2.out"
  sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out"
}

"$BIN" gen 20000 --seed 1 > "$WORK/people.ldif"
"$BIN" --config "$(config warn text)" load --quick "$WORK/people.ldif" > /dev/null 2>&1
echo "binary=$BIN N1=$N1 N2=$N2"
for case in "${CASES[@]}"; do
  level=${case%-*}; format=${case#*-}
  file=$(config "$level" "$format")
  first=$(instructions "$file" "$N1")
  second=$(instructions "$file" "$N2")
  echo "$case total_N1=$first total_N2=$second instructions_per_search=$(( (second - first) / (N2 - N1) ))"
done
