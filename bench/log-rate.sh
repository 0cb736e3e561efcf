#!/usr/bin/env bash
# What per-operation log lines cost in search rate (issue 13): the lmdir data that
# bench/serve-vs-openldap.sh loaded (bench/work/lmdir-serve), served with `log = "info"` (lines to a
# file) and with `log = "warn"`, alternating, UnboundID searchrate uid equality (8 threads) each time.
# Prints every run and the median rate of each level. Run it on a quiet machine, after
# serve-vs-openldap.sh with the same N.
# Usage: bench/log-rate.sh N [rounds] [interval_seconds] [intervals]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-200000}"
ROUNDS="${2:-3}"
INTERVAL_SECONDS="${3:-5}"
INTERVALS="${4:-3}"
PORT=3892
uid_workload "$PEOPLE"
ensure_unboundid
build_lmdir
DATA="$WORK_DIR/lmdir-serve"
[ -d "$DATA" ] || { echo "no $DATA: run bench/serve-vs-openldap.sh $PEOPLE first" >&2; exit 2; }

config_for() {  # $1 level: a config serving $DATA at that level, log lines to a file
  local config="$WORK_DIR/log-rate-$1.toml"
  write_lmdir_config "$DATA" "$PORT" > /dev/null
  sed "s|^size_limit = 0|size_limit = 0\nlog = \"$1\"\nlog_file = \"$WORK_DIR/log-rate-$1.log\"|" "$DATA.toml" > "$config"
  echo "$config"
}

rate_at() {  # $1 level: prints the searchrate "overall" figure with the server at that level
  local config pid csv="$WORK_DIR/log-rate-$1.csv"
  config=$(config_for "$1")
  "$LMDIR" --config "$config" serve --no-demo > /dev/null 2>&1 &
  pid=$!
  wait_ldap "$PORT"
  unboundid searchrate --hostname 127.0.0.1 --port "$PORT" --bindDN "$ROOTDN" --bindPassword "$ROOTPW" \
    --intervalDuration "$INTERVAL_SECONDS" --numIntervals "$INTERVALS" --warmUpIntervals 1 --csv \
    "${UID_WORKLOAD[@]}" --attribute cn > "$csv" 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  overall_rate 5 < "$csv"
}

declare -A runs
for round in $(seq 1 "$ROUNDS"); do
  for level in info warn; do
    rate=$(rate_at "$level")
    log "round $round, log = $level: $rate searches/s"
    runs[$level]+="$rate "
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
info=$(median ${runs[info]}); warn=$(median ${runs[warn]})
echo "log=info searches/s: ${runs[info]}(median $info)"
echo "log=warn searches/s: ${runs[warn]}(median $warn)"
awk -v i="$info" -v w="$warn" 'BEGIN { printf "info costs %.1f%% of the warn rate\n", (w - i) * 100 / w }'
