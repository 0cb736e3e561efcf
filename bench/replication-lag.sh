#!/usr/bin/env bash
# Replication lag under a sustained modify rate, lmdir -> lmdir against slapd -> slapd, both
# refreshAndPersist on loopback, same data: the time from a modify's response on the provider to
# its value being readable on the consumer (bench/lag-client.py), p50/p99.
#
#   PEOPLE=20000 CHANGES=2000 RATE=200 bench/replication-lag.sh
#
# LMDIR=path/to/lmdir skips the release build (e.g. a debug binary to check the script on small
# data: PEOPLE=200 CHANGES=50 RATE=50 LMDIR=target/debug/lmdir bench/replication-lag.sh).
# Wall-clock numbers: run on a quiet machine, and repeat.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PEOPLE="${PEOPLE:-20000}"
CHANGES="${CHANGES:-2000}"
RATE="${RATE:-200}"
# Hang guard for a consumer's initial refresh (slapd's consumer syncs each entry to disk: 20,000
# large entries take minutes).
CONVERGE_WAIT_SECONDS="${CONVERGE_WAIT_SECONDS:-1800}"
ensure_packages
if [ -z "${LMDIR:-}" ]; then build_lmdir; fi
RUN="$WORK_DIR/lag-$$"
mkdir -p "$RUN"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  stop_slapd "$RUN/slapd-provider"; stop_slapd "$RUN/slapd-consumer"
  [ "${KEEP:-}" = 1 ] || rm -rf "$RUN"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
LDIF="$(generated_ldif "$PEOPLE")"
TARGET_DN="$(grep -m1 '^dn: uid=' "$LDIF" | cut -c5-)"

# Waits until the consumer on $2 holds as many entries as the provider on $1.
wait_converged() {
  local count_provider count_consumer i
  count_provider=$(ldapsearch -x -LLL -H "ldap://127.0.0.1:$1" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" 1.1 | grep -c '^dn:')
  for i in $(seq 1 "$CONVERGE_WAIT_SECONDS"); do
    count_consumer=$(ldapsearch -x -LLL -H "ldap://127.0.0.1:$2" -D "$ROOTDN" -w "$ROOTPW" -b "$SUFFIX" 1.1 2>/dev/null | grep -c '^dn:' || true)
    [ "$count_consumer" = "$count_provider" ] && return 0
    sleep 1
  done
  log "consumer on $2 did not converge ($count_consumer of $count_provider)"; return 1
}

lmdir_pair() {
  local p1 p2 c1 c2
  p1=$(free_port); p2=$(free_port)
  c1=$(write_lmdir_config "$RUN/lmdir-provider" "$p1")
  # Replication's indexes (the config ends in [database.index]), as on the slapd side.
  printf 'entryUUID = ["eq"]\nentryCSN = ["eq"]\n[replication]\nserver_id = 1\nprovider = true\n' >> "$c1"
  "$LMDIR" --config "$c1" load "$LDIF" >/dev/null
  c2=$(write_lmdir_config "$RUN/lmdir-consumer" "$p2")
  printf 'entryUUID = ["eq"]\nentryCSN = ["eq"]\n[replication]\n[[replication.consumer]]\nrid = 1\nprovider = "ldap://127.0.0.1:%s"\nsearch_base = "%s"\ntype = "refreshAndPersist"\nretry_seconds = 1\nbind_dn = "%s"\ncredentials = "%s"\n' \
    "$p1" "$SUFFIX" "$ROOTDN" "$ROOTPW" >> "$c2"
  "$LMDIR" --config "$c1" serve --no-demo >"$RUN/lmdir-provider.log" 2>&1 & PIDS+=($!)
  wait_ldap "$p1"
  "$LMDIR" --config "$c2" serve --no-demo >"$RUN/lmdir-consumer.log" 2>&1 & PIDS+=($!)
  wait_ldap "$p2"
  wait_converged "$p1" "$p2"
  log "lmdir -> lmdir: $PEOPLE people, $CHANGES modifies at $RATE/s"
  echo "lmdir->lmdir $("$BENCH_DIR/lag-client.py" "$p1" "$p2" "$TARGET_DN" "$CHANGES" "$RATE" "$ROOTDN" "$ROOTPW")"
}

slapd_pair() {
  local p1 p2 provider consumer
  p1=$(free_port); p2=$(free_port)
  provider=$(write_slapd_config "$RUN/slapd-provider")
  sed -i 's/^moduleload back_mdb$/moduleload back_mdb\nmoduleload syncprov/' "$provider"
  printf 'index entryCSN,entryUUID eq\noverlay syncprov\nsyncprov-checkpoint 100 1\nsyncprov-sessionlog 100000\n' >> "$provider"
  sed -i 's/^database mdb$/serverID 1\ndatabase mdb/' "$provider"
  slapadd -q -f "$provider" -S 1 -l "$LDIF" >/dev/null
  consumer=$(write_slapd_config "$RUN/slapd-consumer")
  printf 'index entryCSN,entryUUID eq\nsyncrepl rid=001 provider=ldap://127.0.0.1:%s bindmethod=simple binddn="%s" credentials=%s searchbase="%s" type=refreshAndPersist retry="1 +"\n' \
    "$p1" "$ROOTDN" "$ROOTPW" "$SUFFIX" >> "$consumer"
  start_slapd "$RUN/slapd-provider" "$p1"
  start_slapd "$RUN/slapd-consumer" "$p2"
  wait_converged "$p1" "$p2"
  log "slapd -> slapd: $PEOPLE people, $CHANGES modifies at $RATE/s"
  echo "slapd->slapd $("$BENCH_DIR/lag-client.py" "$p1" "$p2" "$TARGET_DN" "$CHANGES" "$RATE" "$ROOTDN" "$ROOTPW")"
}

lmdir_pair
slapd_pair
