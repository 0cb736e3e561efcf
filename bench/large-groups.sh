#!/usr/bin/env bash
# Issue 22: one group of N people (100,000 by default; 1000000 for the 1M variant) plus 100
# groups of 100, served by OpenLDAP slapd 2.5 tuned as its documentation advises (back-mdb,
# `sortvals member`, the memberof overlay, eq indexes on member and memberOf) and by lmdir
# (memberof = true, the same indexes). Both servers are up at once; one connection each, bound as
# the rootdn; each operation alternates between the servers, 10 repetitions, median reported
# (bench/large-groups-client.py): add one member to the big group, delete it, (member=dn) under
# ou=Groups, compare member on the big group, read a person's memberOf, read the whole group.
# Timing: run it on a quiet machine. Prints "server operation median_ms min_ms max_ms" lines and
# keeps them in $WORK_DIR/large-groups-N.txt.
# NOSYNC=1 runs both servers without an fsync per commit (lmdir `sync = false`, slapd `dbnosync`):
# the operation without the disk's flush, which on a small VM costs about a millisecond itself.
# Usage: [REPS=10] [NOSYNC=1] [SOLO=1] [LMDIR=binary] bench/large-groups.sh [N]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-100000}"
REPS="${REPS:-10}"
NOSYNC="${NOSYNC:-0}"
SLAPD_PORT="${SLAPD_PORT:-3892}"
LMDIR_PORT="${LMDIR_PORT:-3893}"
CLIENT="$BENCH_DIR/large-groups-client.py"
ensure_packages
build_lmdir

LDIF="$WORK_DIR/large-groups-$PEOPLE.ldif"
[ -f "$LDIF" ] || { log "generating $LDIF"; python3 "$CLIENT" gen "$PEOPLE" > "$LDIF"; }

SLAPD_DIR="$WORK_DIR/large-groups-slapd-$PEOPLE"
LMDIR_DIR="$WORK_DIR/large-groups-lmdir-$PEOPLE"
rm -rf "$SLAPD_DIR" "$LMDIR_DIR" "$LMDIR_DIR.toml"
write_memberof_slapd_config "$SLAPD_DIR"
if [ "$NOSYNC" = 1 ]; then echo "dbnosync" >> "$SLAPD_DIR/slapd.conf"; fi
cat > "$LMDIR_DIR.toml" <<EOF
[server]
listen = ["ldap://127.0.0.1:$LMDIR_PORT"]
size_limit = 0
log = "warn"
[database]
suffix = "$SUFFIX"
directory = "$LMDIR_DIR"
rootdn = "$ROOTDN"
rootpw = "$ROOTPW"
memberof = true
sync = $([ "$NOSYNC" = 1 ] && echo false || echo true)
[database.index]
objectClass = ["eq"]
uid = ["eq"]
member = ["eq"]
memberOf = ["eq"]
EOF

log "loading slapd (slapadd -q) and lmdir (lmdir load)"
echo "slapadd_seconds_peak_kib $(measure "$SLAPD_DIR.slapadd.out" slapadd -q -f "$SLAPD_DIR/slapd.conf" -l "$LDIF")"
echo "lmdir_load_seconds_peak_kib $(measure "$LMDIR_DIR.load.out" "$LMDIR" --config "$LMDIR_DIR.toml" load "$LDIF")"

slapd -f "$SLAPD_DIR/slapd.conf" -h "ldap://127.0.0.1:$SLAPD_PORT/"
"$LMDIR" --config "$LMDIR_DIR.toml" serve --no-demo > "$LMDIR_DIR.serve.log" 2>&1 &
LMDIR_PID=$!
cleanup() { kill "$LMDIR_PID" 2>/dev/null || true; stop_slapd "$SLAPD_DIR"; }
trap cleanup EXIT
wait_ldap "$SLAPD_PORT"
wait_ldap "$LMDIR_PORT"

warm_files "$SLAPD_DIR"/db/data.mdb "$LMDIR_DIR"/data.mdb
RESULTS="$WORK_DIR/large-groups-$PEOPLE.txt"
: > "$RESULTS"
for kind in add delete search compare memberof readgroup; do
  python3 "$CLIENT" time "$kind" "$REPS" "$PEOPLE" "openldap:$SLAPD_PORT" "lmdir:$LMDIR_PORT" | tee -a "$RESULTS"
done
# SOLO=1: lmdir's member add and delete again with slapd idle, one right after the other (an
# absolute latency: in the alternating runs each lmdir operation follows one of slapd's, up to
# 1.7 s of work at 1,000,000 members, and starts on a machine that was busy elsewhere).
if [ "${SOLO:-0}" = 1 ]; then
  for kind in add delete; do
    python3 "$CLIENT" time "$kind" "$REPS" "$PEOPLE" "lmdir-solo:$LMDIR_PORT" | tee -a "$RESULTS"
  done
fi
log "results in $RESULTS (columns: server operation median_ms min_ms max_ms)"
