#!/usr/bin/env bash
# Issue 22: a group of N members (bench/large-groups-client.py's data: 100,000 by default,
# 1000000 for the 1M case) replicated lmdir -> lmdir. A provider is loaded (`lmdir load`) and
# served; a consumer starts empty, catches up (the bulk refresh path), then CHANGES member adds
# and CHANGES member deletes on the big group are made on the provider, each waited for on the
# consumer (compare). Reports the catch-up time, the time until each change is visible (median,
# max), and both processes' peak resident memory (VmHWM), which must not grow with N the way the
# group's size does.
# Usage: [CHANGES=20] [LMDIR=binary] bench/large-group-replication.sh [N]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-100000}"
CHANGES="${CHANGES:-20}"
PROVIDER_PORT="${PROVIDER_PORT:-3896}"
CONSUMER_PORT="${CONSUMER_PORT:-3897}"
CLIENT="$BENCH_DIR/large-groups-client.py"
ensure_packages
[ -n "${LMDIR:-}" ] || build_lmdir
BIG="cn=big,ou=Groups,$SUFFIX"

LDIF="$WORK_DIR/large-groups-$PEOPLE.ldif"
[ -f "$LDIF" ] || { log "generating $LDIF"; python3 "$CLIENT" gen "$PEOPLE" > "$LDIF"; }
RUN_DIR="$WORK_DIR/large-group-replication-$PEOPLE"
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"

# lmdir config: $1 name, $2 port, $3 extra lines.
config() {
  cat > "$RUN_DIR/$1.toml" <<CONF
[server]
listen = ["ldap://127.0.0.1:$2"]
size_limit = 0
log = "warn"
[database]
suffix = "$SUFFIX"
directory = "$RUN_DIR/$1"
rootdn = "$ROOTDN"
rootpw = "$ROOTPW"
memberof = true
[database.index]
objectClass = ["eq"]
uid = ["eq"]
member = ["eq"]
memberOf = ["eq"]
entryUUID = ["eq"]
$3
CONF
  echo "$RUN_DIR/$1.toml"
}

peak_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
now() { date +%s.%N; }
elapsed_ms() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", (e - s) * 1000 }'; }

# Waits until compare member=$2 on the big group at port $1 answers $3 (TRUE or FALSE).
wait_compare() {
  local port="$1" member="$2" want="$3" tries=0 answer
  while :; do
    answer=$(ldapcompare -x -H "ldap://127.0.0.1:$port" -D "$ROOTDN" -w "$ROOTPW" "$BIG" "member:$member" 2>/dev/null || true)
    [ "$answer" = "$want" ] && return 0
    tries=$((tries + 1))
    [ "$tries" -lt 60000 ] || { log "change not visible on port $port after $tries polls"; return 1; }
  done
}

PROVIDER_CONF=$(config provider "$PROVIDER_PORT" "[replication]
server_id = 1
provider = true")
CONSUMER_CONF=$(config consumer "$CONSUMER_PORT" "[replication]
[[replication.consumer]]
rid = 1
provider = \"ldap://127.0.0.1:$PROVIDER_PORT\"
search_base = \"$SUFFIX\"
type = \"refreshAndPersist\"
retry_seconds = 1
bind_dn = \"$ROOTDN\"
credentials = \"$ROOTPW\"")

log "lmdir load $PEOPLE members into the provider"
echo "provider_load_seconds_peak_kib $(measure "$RUN_DIR/load.out" "$LMDIR" --config "$PROVIDER_CONF" load "$LDIF")"
"$LMDIR" --config "$PROVIDER_CONF" serve --no-demo > "$RUN_DIR/provider.log" 2>&1 &
PROVIDER_PID=$!
trap 'kill $PROVIDER_PID ${CONSUMER_PID:-} 2>/dev/null || true' EXIT
wait_ldap "$PROVIDER_PORT"

log "starting the empty consumer"
start=$(now)
"$LMDIR" --config "$CONSUMER_CONF" serve --no-demo > "$RUN_DIR/consumer.log" 2>&1 &
CONSUMER_PID=$!
wait_ldap "$CONSUMER_PORT"
wait_compare "$CONSUMER_PORT" "uid=u$(printf %07d $((PEOPLE - 1))),ou=People,$SUFFIX" TRUE
echo "consumer_catchup_ms $(elapsed_ms "$start" "$(now)")"

# One member change on the provider, timed until the consumer shows it: $1 add|delete, $2 k.
change() {
  local op="$1" member start
  member="uid=x$(printf %07d "$2"),ou=People,$SUFFIX"
  start=$(now)
  printf 'dn: %s\nchangetype: modify\n%s: member\nmember: %s\n' "$BIG" "$op" "$member" |
    ldapmodify -x -H "ldap://127.0.0.1:$PROVIDER_PORT" -D "$ROOTDN" -w "$ROOTPW" > /dev/null
  if [ "$op" = add ]; then wait_compare "$CONSUMER_PORT" "$member" TRUE; else wait_compare "$CONSUMER_PORT" "$member" FALSE; fi
  elapsed_ms "$start" "$(now)"
}
summary() {  # name, then values: median and max
  shift_name="$1"; shift
  printf '%s\n' "$@" | sort -n | awk -v name="$shift_name" '{ v[NR] = $1 } END { printf "%s median %.1f max %.1f\n", name, v[int((NR + 1) / 2)], v[NR] }'
}
adds=(); deletes=()
for k in $(seq 0 $((CHANGES - 1))); do adds+=("$(change add "$k")"); done
for k in $(seq 0 $((CHANGES - 1))); do deletes+=("$(change delete "$k")"); done
summary "member_add_visible_on_consumer_ms" "${adds[@]}"
summary "member_delete_visible_on_consumer_ms" "${deletes[@]}"
echo "provider_peak_kib $(peak_kib "$PROVIDER_PID")"
echo "consumer_peak_kib $(peak_kib "$CONSUMER_PID")"
echo "consumer_entries $(ldapsearch -x -LLL -H "ldap://127.0.0.1:$CONSUMER_PORT" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" -z 0 1.1 | grep -c '^dn:')"
