#!/usr/bin/env bash
# Server CPU per full scan (issue 11: "utime+stime around one ldapsearch of every entry, best of
# 3"), lmdir against OpenLDAP slapd (back-mdb), on the same data and indexes (bench/common.sh),
# with what the kernel does for it: page faults (minflt/majflt of /proc/PID/stat) per scan, and
# the syscalls of one more scan under `strace -c -f -p PID` (write/sendmsg calls and bytes).
# The scan is bench/serve-vs-openldap.sh's: `ldapsearch -x -LLL` as the rootdn, `(objectClass=*)`
# over the suffix, here to /dev/null. Both servers stay up; rounds alternate between them.
# CPU times are noise on a shared machine (best of ROUNDS is reported); counts are not.
# Usage: [PROFILE=standard|large|mixed] [LMDIR=binary] [ROUNDS=3] [STRACE=1] bench/scan-cpu.sh [N_PEOPLE]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-206000}"
ROUNDS="${ROUNDS:-3}"
LMDIR_PORT="${LMDIR_PORT:-38951}"
OPENLDAP_PORT="${OPENLDAP_PORT:-38952}"
ensure_packages
if [ -z "${LMDIR:-}" ]; then build_lmdir; fi
LDIF=$(generated_ldif "$PEOPLE")
LMDIR_DIR="$WORK_DIR/scan-cpu-lmdir-$PROFILE"
OPENLDAP_DIR="$WORK_DIR/scan-cpu-openldap-$PROFILE"

if [ ! -d "$LMDIR_DIR" ]; then
  log "loading lmdir"
  config=$(LMDIR_LOG=warn write_lmdir_config "$LMDIR_DIR" "$LMDIR_PORT")
  "$LMDIR" --config "$config" load --quick "$LDIF" > "$LMDIR_DIR.load.out" 2>&1
fi
if [ ! -d "$OPENLDAP_DIR" ]; then
  log "loading OpenLDAP"
  config=$(SLAPD_LOGLEVEL=0 write_slapd_config "$OPENLDAP_DIR")
  slapadd -q -f "$config" -l "$LDIF" > "$OPENLDAP_DIR.slapadd.out" 2>&1
fi

start_slapd "$OPENLDAP_DIR" "$OPENLDAP_PORT"
"$LMDIR" --config "$LMDIR_DIR.toml" serve --no-demo > "$LMDIR_DIR.serve.log" 2>&1 &
LMDIR_PID=$!
trap 'kill $LMDIR_PID 2>/dev/null || true; stop_slapd "$OPENLDAP_DIR"' EXIT
wait_ldap "$LMDIR_PORT"
OPENLDAP_PID=$(cat "$OPENLDAP_DIR/slapd.pid")
TICK=$(getconf CLK_TCK)

scan() {  # $1 port
  ldapsearch -x -LLL -H "ldap://127.0.0.1:$1" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" -s sub -z 0 \
    '(objectClass=*)' > /dev/null
}
# "ticks minflt majflt" of a process so far.
counters() { awk '{ print $14 + $15, $10, $12 }' "/proc/$1/stat"; }

declare -A best faults
for name in openldap lmdir; do best[$name]=999999; done
for round in $(seq 0 "$ROUNDS"); do
  for name in openldap lmdir; do
    pid=$OPENLDAP_PID; port=$OPENLDAP_PORT
    [ "$name" = lmdir ] && { pid=$LMDIR_PID; port=$LMDIR_PORT; }
    read -r t0 min0 maj0 < <(counters "$pid")
    scan "$port"
    read -r t1 min1 maj1 < <(counters "$pid")
    ms=$(( (t1 - t0) * 1000 / TICK ))
    log "$name round $round: server cpu ${ms} ms, minflt $((min1 - min0)), majflt $((maj1 - maj0))"
    # Round 0 warms the map and the caches; it is not counted.
    [ "$round" = 0 ] && continue
    [ "$ms" -lt "${best[$name]}" ] && best[$name]=$ms
    faults[$name]="$((min1 - min0))/$((maj1 - maj0))"
  done
done
for name in openldap lmdir; do
  echo "$name server_cpu_ms_per_scan_best_of_$ROUNDS ${best[$name]} faults_min/maj_last ${faults[$name]}"
done
awk -v o="${best[openldap]}" -v l="${best[lmdir]}" 'BEGIN { printf "lmdir/OpenLDAP %.2f\n", l / o }'

if [ "${STRACE:-1}" = 1 ]; then
  for name in openldap lmdir; do
    pid=$OPENLDAP_PID; port=$OPENLDAP_PORT
    [ "$name" = lmdir ] && { pid=$LMDIR_PID; port=$LMDIR_PORT; }
    out="$WORK_DIR/scan-cpu-$name-$PROFILE.strace"
    strace -c -f -p "$pid" -o "$out" & tracer=$!
    sleep 1
    scan "$port"
    kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
    log "$name syscalls of one scan ($out):"
    sed -n '1,14p' "$out" >&2
    # Bytes per write: strace again, counting the returned sizes of the writes (-e trace).
    out="$WORK_DIR/scan-cpu-$name-$PROFILE.writes"
    strace -f -p "$pid" -e trace=write,writev,sendmsg,sendto -o "$out" & tracer=$!
    sleep 1
    scan "$port"
    kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
    awk '/= [0-9]+$/ { calls++; bytes += $NF } END { printf "%s writes %d bytes %d per_write %d\n", name, calls, bytes, (calls ? bytes / calls : 0) }' \
      name="$name" "$out"
  done
fi
