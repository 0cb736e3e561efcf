#!/usr/bin/env bash
# Instructions of one member add to (and one member delete from) the big group of
# bench/large-groups.sh's data, and of its read kinds (readgroup, compare, search, memberof),
# lmdir under `valgrind --tool=callgrind` (counts repeat on a shared machine where times do not).
# Counters zeroed, N1 operations, dump; zeroed, N2 operations, dump; per operation =
# (total(N2) - total(N1)) / (N2 - N1): connection setup cancels out. Deletes are of the members
# just added. For a before/after pair run it twice with LMDIR=<binary of each build>.
# Usage: [LMDIR=binary] [READS="readgroup compare search memberof"] [WRITES=0: no add/delete]
#        bench/large-groups-instructions.sh [N] [N1] [N2]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-100000}"
N1="${2:-2}"
N2="${3:-6}"
PORT="${PORT:-38942}"
CLIENT="$BENCH_DIR/large-groups-client.py"
command -v valgrind >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
ensure_packages
build_lmdir
LDIF="$WORK_DIR/large-groups-$PEOPLE.ldif"
[ -f "$LDIF" ] || { log "generating $LDIF"; python3 "$CLIENT" gen "$PEOPLE" > "$LDIF"; }

DIR="$WORK_DIR/large-groups-instructions-$PEOPLE"
rm -rf "$DIR" "$DIR.toml"
cat > "$DIR.toml" <<EOF
[server]
listen = ["ldap://127.0.0.1:$PORT"]
log = "warn"
# Under callgrind a write runs ~50x slower than its budget assumes.
write_budget_milliseconds = 600000
[database]
suffix = "$SUFFIX"
directory = "$DIR"
rootdn = "$ROOTDN"
rootpw = "$ROOTPW"
memberof = true
# valgrind cannot reserve the default 1 TiB map.
map_size_bytes = 4294967296
[database.index]
objectClass = ["eq"]
uid = ["eq"]
member = ["eq"]
memberOf = ["eq"]
EOF
"$LMDIR" --config "$DIR.toml" load "$LDIF" > "$DIR.load.out" 2>&1
mkdir -p "$DIR/callgrind"
valgrind --tool=callgrind --callgrind-out-file="$DIR/callgrind/callgrind.out.%p" \
  "$LMDIR" --config "$DIR.toml" serve --no-demo > "$DIR.serve.log" 2>&1 &
PID=$!
# Waits for valgrind to exit (it writes its last dump first): a run right after this one can
# then listen on the same port.
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  kill -0 "$PID" 2>/dev/null || { log "lmdir stopped: see $DIR.serve.log"; exit 1; }
  ldapsearch -x -H "ldap://127.0.0.1:$PORT" -b "" -s base >/dev/null 2>&1 && break
  sleep 0.5
done

dump_total() {  # $1 label: dumps the counters, prints the instructions since they were zeroed
  local before after file
  before=$(ls "$DIR/callgrind" | wc -l)
  callgrind_control -d "$1" "$PID" > /dev/null 2>&1
  for _ in $(seq 1 100); do
    after=$(ls "$DIR/callgrind" | wc -l)
    [ "$after" -gt "$before" ] && break
    sleep 0.2
  done
  file=$(ls -t "$DIR/callgrind"/callgrind.out.* | head -1)
  awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

# `run` starts at outsider 0 each time: what one run adds, the next deletes.
zeroed_run() {  # $1 kind, $2 count: zero the counters, run, dump; prints the instructions
  callgrind_control -z "$PID" > /dev/null 2>&1
  python3 "$CLIENT" run "$1" "$2" "$PEOPLE" "$PORT"
  dump_total "$1-$2"
}
if [ "${WRITES:-1}" = 1 ]; then
  python3 "$CLIENT" run add 1 "$PEOPLE" "$PORT"     # warm: pages, caches, descriptions
  python3 "$CLIENT" run delete 1 "$PEOPLE" "$PORT"
  A1=$(zeroed_run add "$N1")
  python3 "$CLIENT" run delete "$N1" "$PEOPLE" "$PORT"
  A2=$(zeroed_run add "$N2")
  D1=$(zeroed_run delete "$N1")
  python3 "$CLIENT" run add "$N1" "$PEOPLE" "$PORT"
  D2=$(zeroed_run delete "$N2")
  echo "member_add_instructions_per_operation $(( (A2 - A1) / (N2 - N1) ))"
  echo "member_delete_instructions_per_operation $(( (D2 - D1) / (N2 - N1) ))"
fi
for kind in ${READS-readgroup compare search memberof}; do
  R1=$(zeroed_run "$kind" "$N1")
  R2=$(zeroed_run "$kind" "$N2")
  echo "${kind}_instructions_per_operation $(( (R2 - R1) / (N2 - N1) ))"
done
log "dumps in $DIR/callgrind (callgrind_annotate --inclusive=yes)"
