#!/usr/bin/env bash
# Instructions per operation, lmdir against OpenLDAP slapd (back-mdb), each server under
# `valgrind --tool=callgrind` (instruction counts repeat on a shared machine; rates and CPU times do
# not). Same data (`lmdir gen N --seed 1`, PROFILE=standard|large|mixed), same 19 indexes
# (bench/common.sh), both at log level warn / loglevel 0, the client (bench/search-client.py, one
# connection, anonymous searches asking for every attribute) outside valgrind.
# For each operation kind: counters zeroed, N1 operations, dump; zeroed, N2 operations, dump;
# instructions per operation = (total(N2) - total(N1)) / (N2 - N1), so connection setup and warm-up
# cancel out. Kinds: eq (uid=u…), eqrate (as searchrate sends it: rootdn, under ou=People, cn
# only), sub (mail=*NNNNN*), bind (simple bind as a person, {SSHA}),
# authsearch (uid=u… as the rootdn asking for no attributes: authrate's search half; not in the
# default KINDS), scan (objectClass=* over the suffix; reported per returned entry), modify (the
# rootdn replaces one person's description) and add (the rootdn adds a person): both fsync per
# commit on both servers, which callgrind does not count (user space only).
# Usage: [PROFILE=standard|large|mixed] [SERVERS="lmdir openldap"] [KINDS="eq sub bind scan"] [LMDIR=binary]
#        bench/search-instructions.sh [N_PEOPLE] [N1] [N2]
# Keeps the callgrind dumps in $WORK_DIR/instructions-*/ for callgrind_annotate --inclusive=yes.
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-20000}"
N1="${2:-200}"
N2="${3:-1200}"
SERVERS="${SERVERS:-lmdir openldap}"
KINDS="${KINDS:-eq sub bind scan}"
PORT="${PORT:-38941}"
MAP_BYTES=4294967296
CLIENT="$BENCH_DIR/search-client.py"
command -v valgrind >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
ensure_packages
if [ -z "${LMDIR:-}" ]; then build_lmdir; fi
LDIF=$(generated_ldif "$PEOPLE")

# The totals line of a callgrind dump: instructions (Ir) since the counters were last zeroed.
dump_total() {  # $1 directory, $2 pid, $3 label
  local before after file
  before=$(ls "$1" | wc -l)
  callgrind_control -d "$3" "$2" > /dev/null 2>&1
  for _ in $(seq 1 100); do
    after=$(ls "$1" | wc -l)
    [ "$after" -gt "$before" ] && break
    sleep 0.2
  done
  file=$(ls -t "$1"/callgrind.out.* | head -1)
  awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

# Instructions per operation of one kind on the server (pid $2, dumps in $1); prints "kind value".
measure_kind() {  # $1 dump dir, $2 pid, $3 kind
  local dir="$1" pid="$2" kind="$3" n1="$N1" n2="$N2" warm=20 total1 total2 entries
  if [ "$kind" = scan ]; then n1=1; n2=2; warm=1; fi
  python3 "$CLIENT" "$PORT" "$warm" "$kind" "$PEOPLE" > /dev/null  # warm the pages and caches
  callgrind_control -z "$pid" > /dev/null 2>&1
  python3 "$CLIENT" "$PORT" "$n1" "$kind" "$PEOPLE" > /dev/null
  total1=$(dump_total "$dir" "$pid" "$kind-$n1")
  callgrind_control -z "$pid" > /dev/null 2>&1
  entries=$(python3 "$CLIENT" "$PORT" "$n2" "$kind" "$PEOPLE" | awk '{ print $4 }')
  total2=$(dump_total "$dir" "$pid" "$kind-$n2")
  if [ "$kind" = scan ]; then
    echo "scan_per_entry $(( (total2 - total1) / (entries / n2) ))"
  else
    echo "${kind}_per_operation $(( (total2 - total1) / (n2 - n1) ))"
  fi
}

wait_port() {
  for _ in $(seq 1 600); do
    python3 "$CLIENT" "$PORT" 1 eq "$PEOPLE" > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  log "server on port $PORT did not come up"; return 1
}

run_lmdir() {
  local dir="$WORK_DIR/instructions-lmdir" config
  rm -rf "$dir" "$dir.toml"
  config=$(write_lmdir_config "$dir" "$PORT")
  # Under callgrind an update runs ~50x slower: a write budget of a minute, not 1 s (the
  # instructions do not depend on it).
  sed -i "s/^\[server\]$/[server]\nlog = \"warn\"\nwrite_budget_milliseconds = 60000/; s/^\[database\]$/[database]\nmap_size_bytes = $MAP_BYTES/" "$config"
  "$LMDIR" --config "$config" load --quick "$LDIF" > "$dir.load.out" 2>&1
  mkdir -p "$dir/callgrind"
  valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind/callgrind.out.%p" \
    "$LMDIR" --config "$config" serve --no-demo > "$dir.serve.log" 2>&1 &
  local pid=$!
  wait_port
  for kind in $KINDS; do echo "lmdir $(measure_kind "$dir/callgrind" "$pid" "$kind")"; done
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

run_openldap() {
  local dir="$WORK_DIR/instructions-openldap" config
  rm -rf "$dir"
  config=$(write_slapd_config "$dir")
  sed -i "s/^maxsize .*/maxsize $MAP_BYTES\nloglevel 0/" "$config"
  slapadd -q -f "$config" -l "$LDIF" > "$dir.slapadd.out" 2>&1
  mkdir -p "$dir/callgrind"
  # -d 0: stay in the foreground (valgrind follows this process), no debug output.
  valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind/callgrind.out.%p" \
    slapd -d 0 -f "$config" -h "ldap://127.0.0.1:$PORT/" > "$dir.serve.log" 2>&1 &
  local pid=$!
  wait_port
  for kind in $KINDS; do echo "openldap $(measure_kind "$dir/callgrind" "$pid" "$kind")"; done
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

RESULTS="$WORK_DIR/instructions-results.txt"
: > "$RESULTS"
for server in $SERVERS; do "run_$server" | tee -a "$RESULTS"; done

printf '\n%s people (profile %s), N1=%s N2=%s, %s; instructions (callgrind Ir) per operation\n' \
  "$PEOPLE" "$PROFILE" "$N1" "$N2" "$(date -u +%F)"
awk '{ value[$1, $2] = $3; metrics[$2] = 1; order[++n] = $2 }
     END { printf "%-22s %14s %14s %8s\n", "metric", "OpenLDAP", "lmdir", "lmdir/OpenLDAP";
           for (i = 1; i <= n; i++) { m = order[i]; if (seen[m]++) continue;
             o = value["openldap", m]; l = value["lmdir", m];
             printf "%-22s %14s %14s %8.2f\n", m, o, l, (o > 0 ? l / o : 0) } }' "$RESULTS"
