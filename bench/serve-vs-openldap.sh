#!/usr/bin/env bash
# Serve the same `lmdir gen N` data (same 19 indexes) from OpenLDAP slapd (back-mdb) and from lmdir, both up
# at once, and drive them with the UnboundID LDAP SDK tools, each test against one server then the other:
# searchrate uid equality (8 threads), searchrate mail substring (4 threads), authrate (search + bind,
# 8 threads), modrate (4 threads, both at default durability: fsync per commit), then full-subtree scans
# (three alternating rounds, median) and 1..16 concurrent full scans. Prints each figure for both servers
# and the ratio.
# Usage: [PROFILE=standard|large|mixed] [RATE_TESTS="uid substring auth modify"] [SCANS=1|0]
#        bench/serve-vs-openldap.sh N [interval_seconds] [intervals]
# RATE_TESTS picks the rate tests (default all four); SCANS=0 skips the full scans. CEILING=1 also
# runs each rate test against crates/server/examples/protocol_only.rs (no directory behind it:
# every search answers one entry), the rate this client reaches on this machine with no server work.
# ROUNDS=n (default 1) runs the rate tests n times, the servers' order swapped every round (ABBA),
# and reports each server's median: slapd's rates swing ±15 % between runs of a few minutes.
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-200000}"
INTERVAL_SECONDS="${2:-5}"
INTERVALS="${3:-3}"
RATE_TESTS="${RATE_TESTS:-uid substring auth modify}"
SCANS="${SCANS:-1}"
CEILING="${CEILING:-0}"
ROUNDS="${ROUNDS:-1}"
OPENLDAP_PORT=3890
LMDIR_PORT=3891
CEILING_PORT=3892
LAST=$((PEOPLE - 1))
uid_workload "$PEOPLE"
ensure_packages
ensure_unboundid
build_lmdir

LDIF=$(generated_ldif "$PEOPLE")

rm -rf "$WORK_DIR/openldap-serve" "$WORK_DIR/lmdir-serve" "$WORK_DIR/lmdir-serve.toml"
SLAPD_CONF=$(write_slapd_config "$WORK_DIR/openldap-serve")
LMDIR_CONF=$(write_lmdir_config "$WORK_DIR/lmdir-serve" "$LMDIR_PORT")
log "loading both servers"
slapadd -q -f "$SLAPD_CONF" -l "$LDIF" > "$WORK_DIR/serve-slapadd.out" 2>&1
"$LMDIR" --config "$LMDIR_CONF" load --quick "$LDIF" > "$WORK_DIR/serve-lmdir-load.out" 2>&1

common_rate_args() {
  echo --hostname 127.0.0.1 --port "$1" --bindDN "$ROOTDN" --bindPassword "$ROOTPW" \
    --intervalDuration "$INTERVAL_SECONDS" --numIntervals "$INTERVALS" --warmUpIntervals 1 --csv
}

# One rate test against one server: $1 test, $2 name, $3 port; prints "name metric value".
run_rate() {
  local test="$1" name="$2" port="$3" base="ou=People,$SUFFIX"
  local uid_pattern="uid=u[0-$LAST%0000000]"
  case "$test" in
    uid)
      unboundid searchrate $(common_rate_args "$port") "${UID_WORKLOAD[@]}" --attribute cn \
        > "$WORK_DIR/$name-search-eq.csv" 2>&1
      echo "$name search_uid_eq_per_second $(overall_rate 5 < "$WORK_DIR/$name-search-eq.csv")" ;;
    substring)
      # Each person's first mail: uNNNNNNN@example.com, in the mixed profile uNNNNNNN.0@example.com.
      local mail_start="u[0-$LAST%0000000]"
      [ "$PROFILE" = mixed ] && mail_start="$mail_start.0"
      unboundid searchrate $(common_rate_args "$port") --baseDN "$base" --scope sub \
        --filter "(mail=$mail_start@*)" --attribute cn --numThreads 4 > "$WORK_DIR/$name-search-sub.csv" 2>&1
      echo "$name search_mail_substring_per_second $(overall_rate 5 < "$WORK_DIR/$name-search-sub.csv")" ;;
    auth)
      unboundid authrate $(common_rate_args "$port") "${UID_WORKLOAD[@]}" --credentials password \
        > "$WORK_DIR/$name-auth.csv" 2>&1
      echo "$name auth_per_second $(overall_rate 4 < "$WORK_DIR/$name-auth.csv")" ;;
    modify)
      unboundid modrate $(common_rate_args "$port") --entryDN "$uid_pattern,$base" --attribute description \
        --valueLength 12 --numThreads 4 > "$WORK_DIR/$name-mod.csv" 2>&1
      echo "$name modify_per_second $(overall_rate 4 < "$WORK_DIR/$name-mod.csv")" ;;
  esac
}

# Both servers are up; each test runs against one, then the other, so that a slow phase of the
# (shared, virtual) machine does not land on one server's whole suite.
run_rates() {
  local test name port round names
  for round in $(seq 1 "$ROUNDS"); do
    names="openldap lmdir"
    [ $((round % 2)) = 0 ] && names="lmdir openldap"
    [ "$CEILING" = 1 ] && names="$names ceiling"
    for test in $RATE_TESTS; do
      for name in $names; do
        case "$name" in
          openldap) port=$OPENLDAP_PORT ;;
          lmdir) port=$LMDIR_PORT ;;
          ceiling) port=$CEILING_PORT ;;
        esac
        run_rate "$test" "$name" "$port"
      done
    done
  done
}

scan_seconds() {  # $1 port, $2 output file; prints the wall seconds of one full-subtree ldapsearch
  local start end
  start=$(date +%s.%N)
  ldapsearch -x -LLL -H "ldap://127.0.0.1:$1" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" -s sub -z 0 '(objectClass=*)' > "$2"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }'
}

concurrent_scans_seconds() {  # $1 port, $2 concurrency
  local start end i
  start=$(date +%s.%N)
  for i in $(seq 1 "$2"); do
    ldapsearch -x -LLL -H "ldap://127.0.0.1:$1" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" -s sub -z 0 '(objectClass=*)' > /dev/null &
  done
  wait
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }'
}

# Scans are bound by ldapsearch's own CPU and by whatever else the machine does (disk writeback
# after modrate, for one), so their runs alternate between the servers: three rounds, the
# median reported.
run_scans() {
  local round name port concurrency
  declare -A runs
  for round in 1 2 3; do
    for name in openldap lmdir; do
      port=$OPENLDAP_PORT; [ "$name" = lmdir ] && port=$LMDIR_PORT
      runs[$name]+="$(scan_seconds "$port" "$WORK_DIR/$name-scan.ldif") "
    done
  done
  for name in openldap lmdir; do
    log "$name full scan runs (seconds): ${runs[$name]}"
    echo "$name full_scan_seconds $(printf '%s\n' ${runs[$name]} | sort -n | sed -n 2p)"
    echo "$name full_scan_entries $(grep -c '^dn:' "$WORK_DIR/$name-scan.ldif")"
  done
  for concurrency in 1 2 4 8 16; do
    for name in openldap lmdir; do
      port=$OPENLDAP_PORT; [ "$name" = lmdir ] && port=$LMDIR_PORT
      echo "$name concurrent_scans_${concurrency}_seconds $(concurrent_scans_seconds "$port" "$concurrency")"
    done
  done
}

RESULTS="$WORK_DIR/serve-results.txt"
: > "$RESULTS"
log "starting OpenLDAP slapd and lmdir serve"
start_slapd "$WORK_DIR/openldap-serve" "$OPENLDAP_PORT"
"$LMDIR" --config "$LMDIR_CONF" serve --no-demo > "$WORK_DIR/lmdir-serve.log" 2>&1 &
LMDIR_PID=$!
CEILING_PID=
if [ "$CEILING" = 1 ]; then
  (cd "$REPO_DIR" && cargo build --release -q -p lmdir-server --example protocol_only)
  "${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/examples/protocol_only" "127.0.0.1:$CEILING_PORT" \
    > "$WORK_DIR/protocol-only.log" 2>&1 &
  CEILING_PID=$!
fi
trap 'kill $LMDIR_PID $CEILING_PID 2>/dev/null || true; stop_slapd "$WORK_DIR/openldap-serve"' EXIT
wait_ldap "$LMDIR_PORT"
log "rates, alternating between the servers"
run_rates | tee -a "$RESULTS"
if [ "$SCANS" != 0 ]; then
  log "full scans, alternating between the servers"
  run_scans | tee -a "$RESULTS"
fi
kill "$LMDIR_PID" $CEILING_PID; wait "$LMDIR_PID" 2>/dev/null || true
stop_slapd "$WORK_DIR/openldap-serve"

printf '\n%s people (profile %s), %s cores, %s; rates are UnboundID "overall" figures\n' "$PEOPLE" "$PROFILE" "$(nproc)" "$(date -u +%F)"
# Each (server, metric)'s median over its rounds (one value without ROUNDS); with rounds, the
# per-round ratios are printed first.
awk -v rounds="$ROUNDS" '
     function median(name, m,    k, j, t, list) {
       for (k = 1; k <= count[name, m]; k++) list[k] = runs[name, m, k]
       for (k = 2; k <= count[name, m]; k++) for (j = k; j > 1 && list[j - 1] > list[j]; j--) {
         t = list[j]; list[j] = list[j - 1]; list[j - 1] = t }
       return count[name, m] ? list[int((count[name, m] + 1) / 2)] : ""
     }
     { runs[$1, $2, ++count[$1, $2]] = $3; order[++n] = $2 }
     END { for (i = 1; i <= n; i++) { m = order[i]; if (listed[m]++ || rounds < 2) continue;
             printf "%-34s per round:", m
             for (k = 1; k <= count["lmdir", m]; k++) {
               o = runs["openldap", m, k]; l = runs["lmdir", m, k]
               printf " %.2fx", (m ~ /seconds/) ? (l > 0 ? o / l : 0) : (o > 0 ? l / o : 0) }
             printf "\n" }
           for (key in count) { split(key, part, SUBSEP); value[part[1], part[2]] = median(part[1], part[2]) }
           printf "%-34s %12s %12s %8s %12s %8s\n", "metric", "OpenLDAP", "lmdir", "ratio", "ceiling", "c/OpenLDAP";
           for (i = 1; i <= n; i++) { m = order[i]; if (seen[m]++) continue;
             o = value["openldap", m]; l = value["lmdir", m]; c = value["ceiling", m];
             ratio = (m ~ /seconds/) ? (l > 0 ? o / l : 0) : (o > 0 ? l / o : 0);
             if (c == "") printf "%-34s %12s %12s %7.2fx\n", m, o, l, ratio;
             else printf "%-34s %12s %12s %7.2fx %12s %7.2fx\n", m, o, l, ratio, c, (o > 0 ? c / o : 0) } }' "$RESULTS"
echo "(ratio > 1 means lmdir is better: rate ratio lmdir/OpenLDAP, time ratio OpenLDAP/lmdir;"
echo " ceiling: the protocol-only responder's rate with the same client, the most any server reaches here)"
