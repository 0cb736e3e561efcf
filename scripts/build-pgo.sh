#!/usr/bin/env bash
# A release build of lmdir laid out by a profile of its own work (profile-guided optimization),
# the way rustc and browsers ship: an instrumented build runs a training workload, LLVM merges
# what it counted, and the final build uses it to place hot code together and choose inlining.
# On a 2-core machine shared with the clients, a request starts with cold instruction caches
# after every context switch; the layout is what PGO changes. Behaviour is the same build's.
#
# Training, for each data shape of `lmdir gen` (standard, large, mixed; 20,000 people each):
# `lmdir load --quick`, then the server under bench/search-client.py: equality, substring and
# full-subtree searches, binds, rootdn lookups asking for `1.1` or one attribute, modifies and
# adds (two clients at once); then ldap-utils over ldaps:// and StartTLS (searches, binds),
# paged and sorted searches, compare, Who am I?, Password Modify, modrdn and delete; then a
# clean stop (the profile is written as the process exits). A path left out of the training
# is laid out as cold code: TLS is in it because most deployments use it. Every step must
# succeed, or the build stops.
#
# Usage: scripts/build-pgo.sh [OUT]   (default: target/pgo/lmdir)
# Needs rustup's llvm-tools (installed here when missing), python3, openssl and ldap-utils.
# Takes about two release builds' time plus a few minutes of training.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "$0")/.." && pwd)"
WORK_DIR="${PGO_WORK_DIR:-$REPO_DIR/target/pgo}"
# write_lmdir_config and set_index_set; it works under $WORK_DIR.
source "$REPO_DIR/bench/common.sh"
OUT="${1:-$WORK_DIR/lmdir}"
PEOPLE="${PGO_PEOPLE:-20000}"
PORT="${PGO_PORT:-3995}"
HOST="$(rustc -vV | sed -n 's/^host: //p')"

profdata_tool() {
  local tool
  tool="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata"
  if [ ! -x "$tool" ]; then
    log "installing rustup's llvm-tools (llvm-profdata matching rustc's LLVM)"
    rustup component add llvm-tools >&2
  fi
  [ -x "$tool" ] || { log "no llvm-profdata at $tool"; exit 1; }
  echo "$tool"
}

# $1 target dir, $2 RUSTFLAGS: a release build of the lmdir binary. `--target` keeps the flags
# off build scripts and proc macros.
build() {
  (cd "$REPO_DIR" && CARGO_TARGET_DIR="$1" RUSTFLAGS="$2" \
    cargo build --release -q -p lmdir --target "$HOST")
  echo "$1/$HOST/release/lmdir"
}

# $1 data directory, $2 profile: the benchmarks' config of that shape (bench/common.sh: its
# index set, memberof on as by default), with an ldaps:// listener beside the plain one.
write_config() {
  local config
  set_index_set "$2"
  config=$(LMDIR_LOG=warn MEMBEROF=true write_lmdir_config "$1" "$PORT")
  sed -i -e "s|^listen = \[\(.*\)\]$|listen = [\1, \"ldaps://127.0.0.1:$((PORT + 1))\"]|" \
    -e "/^listen = /a tls_certificate = \"$WORK_DIR/train.crt\"\ntls_key = \"$WORK_DIR/train.key\"" \
    "$config"
  echo "$config"
}

# $1 instrumented binary, $2 profile: load, serve, drive, stop.
train_profile() {
  local lmdir="$1" profile="$2" data="$WORK_DIR/train-$2" ldif config pid
  ldif="$WORK_DIR/train-$2.ldif"
  rm -rf "$data" && mkdir -p "$data"
  "$lmdir" gen "$PEOPLE" --seed 1 --profile "$profile" > "$ldif"
  config=$(write_config "$data" "$profile")
  "$lmdir" --config "$config" load --quick "$ldif" > "$WORK_DIR/train-$2-load.out" 2>&1
  "$lmdir" --config "$config" serve --no-demo > "$WORK_DIR/train-$2-serve.out" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    python3 "$REPO_DIR/bench/search-client.py" "$PORT" 1 eq "$PEOPLE" > /dev/null 2>&1 && break
    sleep 0.2
  done
  local client="$REPO_DIR/bench/search-client.py" kind count kind_count
  for kind_count in eq:3000 eqrate:3000 authsearch:3000 bind:3000 subinit:2000 sub:200 \
    scan:2 modify:300 add:300; do
    kind="${kind_count%%:*}" count="${kind_count#*:}"
    # Two clients at once: the connection tasks, the reader gate and group commit run as
    # they do under load.
    python3 "$client" "$PORT" "$count" "$kind" "$PEOPLE" > /dev/null &
    local other=$!
    python3 "$client" "$PORT" "$count" "$kind" "$PEOPLE" > /dev/null
    wait "$other"
  done
  train_ldap_utils
  kill -TERM "$pid"
  wait "$pid" || { log "the instrumented server did not stop cleanly ($profile)"; exit 1; }
}

# The rest of what clients send, through ldap-utils (the server of train_profile is up).
train_ldap_utils() {
  local plain="ldap://127.0.0.1:$PORT" tls="ldaps://127.0.0.1:$((PORT + 1))"
  local root=(-x -D "cn=admin,dc=example,dc=com" -w secret) people="ou=People,dc=example,dc=com"
  local user="uid=u0000001,$people" uids="$WORK_DIR/train-uids"
  seq -f 'u%07g' 0 17 "$((PEOPLE - 1))" > "$uids"
  export LDAPTLS_CACERT="$WORK_DIR/train.crt"
  # One TLS connection, a search per line of the file; then one bind per connection.
  ldapsearch -H "$tls" "${root[@]}" -b "$people" -f "$uids" "(uid=%s)" cn mail > /dev/null
  ldapsearch -H "$plain" -ZZ "${root[@]}" -b "$people" -f "$uids" "(uid=%s)" 1.1 > /dev/null
  for _ in $(seq 1 100); do
    ldapwhoami -H "$tls" -x -D "$user" -w password > /dev/null
  done
  ldapsearch -H "$plain" "${root[@]}" -b "$people" -E pr=500/noprompt "(objectClass=person)" \
    uid > /dev/null
  ldapsearch -H "$plain" "${root[@]}" -b "$people" -E sss=sn/cn "(uid=u00001*)" sn cn > /dev/null
  ldapcompare -H "$plain" "${root[@]}" "$user" uid:u0000001 > /dev/null || [ $? = 6 ]
  ldappasswd -H "$tls" -x -D "$user" -w password -s password > /dev/null
  ldapmodify -H "$plain" "${root[@]}" > /dev/null <<LDIF
dn: uid=pgo-train,$people
changetype: add
objectClass: inetOrgPerson
uid: pgo-train
cn: PGO Train
sn: Train

dn: uid=pgo-train,$people
changetype: modrdn
newrdn: uid=pgo-trained
deleteoldrdn: 1
LDIF
  ldapdelete -H "$plain" "${root[@]}" "uid=pgo-trained,$people"
}

mkdir -p "$WORK_DIR"
PROFDATA=$(profdata_tool)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$WORK_DIR/train.key" -out "$WORK_DIR/train.crt" 2> /dev/null
rm -rf "$WORK_DIR/raw" && mkdir -p "$WORK_DIR/raw"
log "instrumented build"
INSTRUMENTED=$(build "$WORK_DIR/instrumented" "-Cprofile-generate=$WORK_DIR/raw")
for profile in standard large mixed; do
  log "training on the $profile shape ($PEOPLE people)"
  train_profile "$INSTRUMENTED" "$profile"
done
ls "$WORK_DIR"/raw/*.profraw > /dev/null || { log "training wrote no profile"; exit 1; }
"$PROFDATA" merge -o "$WORK_DIR/lmdir.profdata" "$WORK_DIR"/raw/*.profraw
log "optimized build"
OPTIMIZED=$(build "$WORK_DIR/optimized" \
  "-Cprofile-use=$WORK_DIR/lmdir.profdata -Cllvm-args=-pgo-warn-missing-function=false")
[ "$OPTIMIZED" = "$OUT" ] || cp "$OPTIMIZED" "$OUT"
log "done: $OUT"
