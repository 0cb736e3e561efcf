#!/usr/bin/env bash
# A fresh consumer catching up a provider of N generated entries (`lmdir gen`, same 19 indexes on
# every server): lmdir -> lmdir against slapd -> slapd (provider loaded with slapadd -w and the
# syncprov overlay, consumer with a syncrepl directive). Each time runs from the consumer's start
# (an empty database) to the moment its suffix's contextCSN equals the provider's, polled every
# POLL_SECONDS, so the figure includes the consumer's start-up and is precise to one poll.
# The two pairs run one after the other, never at once.
# Usage: [PROFILE=standard|large|mixed] [SYNC_TYPE=refreshOnly|refreshAndPersist] bench/replication-catchup.sh [N]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-200000}"
# refreshOnly by default: a catch-up is one refresh either way, and lmdir's provider answers
# refreshAndPersist only once persist mode is in.
SYNC_TYPE="${SYNC_TYPE:-refreshOnly}"
POLL_SECONDS="${POLL_SECONDS:-0.2}"
# SLAPD_CONSUMER_DBNOSYNC=1 adds `dbnosync` to the slapd consumer: no fsync per committed entry
# (slapd's consumer commits each entry in its own txn, so with fsync it runs at the disk's sync
# rate). lmdir's consumer keeps its default durability either way, so a ratio with this set is
# against a slapd that skips the work lmdir still does.
SLAPD_CONSUMER_DBNOSYNC="${SLAPD_CONSUMER_DBNOSYNC:-0}"
# Hang guard: a consumer that has not caught up after this long is reported as failed.
CATCHUP_WAIT_MAX_SECONDS="${CATCHUP_WAIT_MAX_SECONDS:-3600}"
SLAPD_PROVIDER_PORT=3892
SLAPD_CONSUMER_PORT=3893
LMDIR_PROVIDER_PORT=3894
LMDIR_CONSUMER_PORT=3895
ensure_packages
# LMDIR=path runs a binary already built (e.g. to check the script without a release build).
[ -n "${LMDIR:-}" ] || build_lmdir

LDIF=$(generated_ldif "$PEOPLE")
RUN_DIR="$WORK_DIR/catchup"
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"

# The suffix's contextCSN values on the server at port $1, sorted, on one line.
context_csn() {
  ldapsearch -x -LLL -o ldif-wrap=no -H "ldap://127.0.0.1:$1" -D "$ROOTDN" -w "$ROOTPW" \
    -b "$SUFFIX" -s base contextCSN 2>/dev/null | sed -n 's/^contextCSN: //p' | sort | tr '\n' ' '
}

# Seconds from $1 (a `date +%s.%N` start) until the consumer at port $2 holds the provider's
# contextCSN $3; fails after CATCHUP_WAIT_MAX_SECONDS.
wait_caught_up() {
  local start="$1" port="$2" expected="$3" now
  while :; do
    [ "$(context_csn "$port")" = "$expected" ] && break
    now=$(date +%s.%N)
    if awk -v s="$start" -v n="$now" -v max="$CATCHUP_WAIT_MAX_SECONDS" 'BEGIN { exit !(n - s > max) }'; then
      log "consumer on port $port did not catch up within $CATCHUP_WAIT_MAX_SECONDS s"; return 1
    fi
    sleep "$POLL_SECONDS"
  done
  now=$(date +%s.%N)
  awk -v s="$start" -v n="$now" 'BEGIN { printf "%.2f", n - s }'
}

entry_count() {  # $1 port
  ldapsearch -x -LLL -H "ldap://127.0.0.1:$1" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" -z 0 1.1 | grep -c '^dn:'
}

# --- slapd -> slapd -----------------------------------------------------------------------------
slapd_pair() {
  local provider="$RUN_DIR/slapd-provider" consumer="$RUN_DIR/slapd-consumer" conf expected start seconds
  conf=$(write_slapd_config "$provider")
  sed -i 's/^moduleload back_mdb$/moduleload back_mdb\nmoduleload syncprov/' "$conf"
  { echo "index entryCSN,entryUUID eq"; echo "overlay syncprov"; echo "syncprov-checkpoint 100 1"; } >> "$conf"
  log "slapadd -w $PEOPLE people into the slapd provider"
  slapadd -q -w -f "$conf" -l "$LDIF" > "$RUN_DIR/slapadd.out" 2>&1
  start_slapd "$provider" "$SLAPD_PROVIDER_PORT"
  expected=$(context_csn "$SLAPD_PROVIDER_PORT")
  [ -n "$expected" ] || { log "the slapd provider shows no contextCSN"; return 1; }
  conf=$(write_slapd_config "$consumer")
  {
    echo "index entryCSN,entryUUID eq"
    [ "$SLAPD_CONSUMER_DBNOSYNC" = 1 ] && echo "dbnosync"
    echo "syncrepl rid=001 provider=ldap://127.0.0.1:$SLAPD_PROVIDER_PORT searchbase=\"$SUFFIX\"" \
      "type=$SYNC_TYPE interval=00:00:01:00 retry=\"1 +\" bindmethod=simple binddn=\"$ROOTDN\" credentials=$ROOTPW"
  } >> "$conf"
  log "starting the slapd consumer"
  start=$(date +%s.%N)
  slapd -f "$conf" -h "ldap://127.0.0.1:$SLAPD_CONSUMER_PORT/"
  seconds=$(wait_caught_up "$start" "$SLAPD_CONSUMER_PORT" "$expected")
  echo "openldap catchup_seconds $seconds"
  echo "openldap consumer_entries $(entry_count "$SLAPD_CONSUMER_PORT")"
  stop_slapd "$consumer"
  stop_slapd "$provider"
}

# --- lmdir -> lmdir -----------------------------------------------------------------------------
lmdir_pair() {
  local provider="$RUN_DIR/lmdir-provider" consumer="$RUN_DIR/lmdir-consumer" conf expected start seconds
  conf=$(write_lmdir_config "$provider" "$LMDIR_PROVIDER_PORT")
  # The shared index set replaces lmdir's defaults; replication needs entryUUID eq back (slapd
  # gets entryCSN,entryUUID eq above).
  printf 'entryUUID = ["eq"]\n[replication]\nserver_id = 1\nprovider = true\n' >> "$conf"
  log "lmdir load $PEOPLE people into the lmdir provider"
  "$LMDIR" --config "$conf" load --quick "$LDIF" > "$RUN_DIR/lmdir-load.out" 2>&1
  "$LMDIR" --config "$conf" serve --no-demo > "$RUN_DIR/lmdir-provider.log" 2>&1 &
  LMDIR_PROVIDER_PID=$!
  wait_ldap "$LMDIR_PROVIDER_PORT"
  expected=$(context_csn "$LMDIR_PROVIDER_PORT")
  [ -n "$expected" ] || { log "the lmdir provider shows no contextCSN"; return 1; }
  conf=$(write_lmdir_config "$consumer" "$LMDIR_CONSUMER_PORT")
  cat >> "$conf" <<EOF
entryUUID = ["eq"]
[replication]
[[replication.consumer]]
rid = 1
provider = "ldap://127.0.0.1:$LMDIR_PROVIDER_PORT"
search_base = "$SUFFIX"
type = "$SYNC_TYPE"
interval_seconds = 60
retry_seconds = 1
bind_dn = "$ROOTDN"
credentials = "$ROOTPW"
EOF
  log "starting the lmdir consumer"
  start=$(date +%s.%N)
  "$LMDIR" --config "$conf" serve --no-demo > "$RUN_DIR/lmdir-consumer.log" 2>&1 &
  LMDIR_CONSUMER_PID=$!
  seconds=$(wait_caught_up "$start" "$LMDIR_CONSUMER_PORT" "$expected")
  echo "lmdir catchup_seconds $seconds"
  echo "lmdir consumer_entries $(entry_count "$LMDIR_CONSUMER_PORT")"
  kill "$LMDIR_CONSUMER_PID" "$LMDIR_PROVIDER_PID"
  wait "$LMDIR_CONSUMER_PID" "$LMDIR_PROVIDER_PID" 2>/dev/null || true
}

cleanup() {
  kill "${LMDIR_CONSUMER_PID:-}" "${LMDIR_PROVIDER_PID:-}" 2>/dev/null || true
  stop_slapd "$RUN_DIR/slapd-consumer"
  stop_slapd "$RUN_DIR/slapd-provider"
}
trap cleanup EXIT

RESULTS="$RUN_DIR/results.txt"
: > "$RESULTS"
slapd_pair | tee -a "$RESULTS"
lmdir_pair | tee -a "$RESULTS"

printf '\n%s people (profile %s, %s, slapd consumer dbnosync=%s), %s cores, %s; catch-up polled every %s s\n' \
  "$PEOPLE" "$PROFILE" "$SYNC_TYPE" "$SLAPD_CONSUMER_DBNOSYNC" "$(nproc)" "$(date -u +%F)" "$POLL_SECONDS"
awk '{ value[$1, $2] = $3; metrics[$2] = 1; order[++n] = $2 }
     END { printf "%-20s %12s %12s %8s\n", "metric", "OpenLDAP", "lmdir", "ratio";
           for (i = 1; i <= n; i++) { m = order[i]; if (seen[m]++) continue;
             o = value["openldap", m]; l = value["lmdir", m];
             ratio = (m ~ /seconds/) ? (l > 0 ? o / l : 0) : (o > 0 ? l / o : 0);
             printf "%-20s %12s %12s %7.2fx\n", m, o, l, ratio } }' "$RESULTS"
echo "(catchup ratio > 1 means lmdir caught up faster: OpenLDAP seconds / lmdir seconds)"
