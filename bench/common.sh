# Shared helpers for the benchmarks: install the anchors, build lmdir, set up OpenLDAP side by side.
# Sourced, not run. Every benchmark works under bench/work/ (git-ignored).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$BENCH_DIR/.." && pwd)"
WORK_DIR="${WORK_DIR:-$BENCH_DIR/work}"
SUFFIX="dc=example,dc=com"
ROOTDN="cn=admin,dc=example,dc=com"
ROOTPW="secret"
mkdir -p "$WORK_DIR"

# The data shape: PROFILE=standard (default), large or mixed (`lmdir gen --profile ...`).
PROFILE="${PROFILE:-standard}"

# The index set of profile $1, shared by both servers: INDEX_SET, attribute -> kinds. standard
# and large use the loader issue's set; mixed has its own (issue 21: three shapes with different
# index sets): sub on displayName, eq on mobile and ipHostNumber, description eq only.
set_index_set() {
case "$1" in
  mixed)
    INDEX_SET=(
      "objectClass eq"
      "cn eq,sub" "sn eq,sub" "givenName eq,sub" "displayName eq,sub" "mail eq,sub" "uid eq,sub"
      "title eq,sub" "telephoneNumber eq,sub"
      "mobile eq" "description eq" "uidNumber eq" "gidNumber eq" "employeeNumber eq"
      "departmentNumber eq" "postalCode eq" "l eq" "member eq" "manager eq" "ipHostNumber eq" "ou eq"
    ) ;;
  *)
    INDEX_SET=(
      "objectClass eq"
      "cn eq,sub" "sn eq,sub" "givenName eq,sub" "mail eq,sub" "uid eq,sub" "title eq,sub" "description eq,sub"
      "telephoneNumber eq,sub"
      "uidNumber eq" "gidNumber eq" "employeeNumber eq" "departmentNumber eq" "postalCode eq" "l eq"
      "member eq" "manager eq" "ou eq"
    ) ;;
esac
}
set_index_set "$PROFILE"

# Prints the path of the generated LDIF of $1 people in $PROFILE, generating it once.
generated_ldif() {
  local people="$1" ldif="$WORK_DIR/people-$1-$PROFILE.ldif"
  [ -f "$ldif" ] || { log "generating $ldif"; "$LMDIR" gen "$people" --seed 1 --profile "$PROFILE" > "$ldif"; }
  echo "$ldif"
}

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ensure_packages() {
  local missing=()
  command -v slapadd >/dev/null || missing+=(slapd)
  command -v ldapsearch >/dev/null || missing+=(ldap-utils)
  [ -x /usr/bin/time ] || missing+=(time)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

ensure_unboundid() {
  UNBOUNDID_JAR="$HOME/.m2/repository/com/unboundid/unboundid-ldapsdk/7.0.1/unboundid-ldapsdk-7.0.1.jar"
  if [ ! -f "$UNBOUNDID_JAR" ]; then
    command -v java >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless maven >/dev/null; }
    command -v mvn >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
    mvn -q dependency:get -Dartifact=com.unboundid:unboundid-ldapsdk:7.0.1 >/dev/null
  fi
  export UNBOUNDID_JAR
}

# Runs a tool of the UnboundID LDAP SDK (searchrate, authrate, modrate, ...).
unboundid() { java -cp "$UNBOUNDID_JAR" com.unboundid.ldap.sdk.unboundidds.Launcher "$@"; }

# The uid workload of every searchrate and authrate benchmark, defined once so that their
# figures stay comparable: subtree searches under ou=People for uid=uNNNNNNN drawn from $1
# people, 8 client threads. Sets the array UID_WORKLOAD.
uid_workload() {  # $1 people
  UID_WORKLOAD=(--baseDN "ou=People,$SUFFIX" --scope sub --filter "(uid=u[0-$(($1 - 1))%0000000])"
    --numThreads 8)
}

# Reads an UnboundID rate tool's --csv output on stdin and prints the "overall" figure of its
# last row: column $1 (searchrate's 5, authrate's and modrate's 4).
overall_rate() {  # $1 column
  awk -F, -v column="$1" 'NF > 3 && $1 ~ /^[0-9"]/ { last = $column } END { gsub(/"/, "", last); print last }'
}

build_lmdir() {
  # LMDIR=path measures a binary built earlier (a before/after pair) instead of building this tree.
  if [ -n "${LMDIR:-}" ]; then
    [ -x "$LMDIR" ] || { echo "LMDIR=$LMDIR is not an executable" >&2; exit 2; }
    export LMDIR
    return
  fi
  # PGO=1: the profile-guided release build (scripts/build-pgo.sh), as deployments build it.
  if [ "${PGO:-0}" = 1 ]; then
    log "building lmdir (release, profile-guided)"
    bash "$REPO_DIR/scripts/build-pgo.sh" >&2
    LMDIR="$REPO_DIR/target/pgo/lmdir"
    export LMDIR
    return
  fi
  log "building lmdir (release)"
  (cd "$REPO_DIR" && cargo build --release -q -p lmdir)
  LMDIR="${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/lmdir"
  export LMDIR
}

# lmdir config with the shared index set. $1 = data directory, $2 = listen port (optional).
write_lmdir_config() {
  local dir="$1" port="${2:-3389}" config="$1.toml"
  {
    echo "[server]"
    echo "listen = [\"ldap://127.0.0.1:$port\"]"
    echo "size_limit = 0"
    # LMDIR_LOG=warn drops the per-operation lines (default: lmdir's default level, info).
    [ -z "${LMDIR_LOG:-}" ] || echo "log = \"$LMDIR_LOG\""
    echo "[database]"
    echo "suffix = \"$SUFFIX\""
    echo "directory = \"$dir\""
    echo "rootdn = \"$ROOTDN\""
    echo "rootpw = \"$ROOTPW\""
    # The reference runs without the memberof overlay; same work on both sides (MEMBEROF=true to measure ours).
    echo "memberof = ${MEMBEROF:-false}"
    echo "[database.index]"
    local line attr kinds
    for line in "${INDEX_SET[@]}"; do
      attr="${line%% *}"; kinds="${line#* }"
      echo "$attr = [$(echo "$kinds" | sed 's/eq/"eq"/; s/sub/"sub"/; s/,/, /')]"
    done
  } > "$config"
  echo "$config"
}

# OpenLDAP slapd.conf with the same index set. $1 = instance directory.
write_slapd_config() {
  local dir="$1" config="$1/slapd.conf" line
  mkdir -p "$dir/db"
  {
    for schema in core cosine inetorgperson nis; do echo "include /etc/ldap/schema/$schema.schema"; done
    echo "modulepath /usr/lib/ldap"
    echo "moduleload back_mdb"
    echo "pidfile $dir/slapd.pid"
    echo "tool-threads 1"
    # SLAPD_LOGLEVEL=0 drops slapd's per-operation stats lines (default: slapd's own default).
    [ -z "${SLAPD_LOGLEVEL:-}" ] || echo "loglevel $SLAPD_LOGLEVEL"
    echo "sizelimit unlimited"
    echo "database mdb"
    echo "suffix \"$SUFFIX\""
    echo "rootdn \"$ROOTDN\""
    echo "rootpw $ROOTPW"
    echo "directory $dir/db"
    echo "maxsize 34359738368"
    for line in "${INDEX_SET[@]}"; do echo "index ${line%% *} ${line#* }"; done
  } > "$config"
  echo "$config"
}

# slapd.conf for the group benchmarks: back-mdb tuned as its documentation advises for large
# groups (`sortvals member`), the memberof overlay, eq on objectClass, uid, member, memberOf.
# $1 = instance directory (db/ is made in it); callers append their own lines.
write_memberof_slapd_config() {
  local dir="$1"
  mkdir -p "$dir/db"
  cat > "$dir/slapd.conf" <<EOF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile $dir/slapd.pid
loglevel 0
sizelimit unlimited
sortvals member
database mdb
suffix "$SUFFIX"
rootdn "$ROOTDN"
rootpw $ROOTPW
directory $dir/db
maxsize 68719476736
index objectClass eq
index uid eq
index member eq
index memberOf eq
overlay memberof
EOF
}

# Runs a command, prints "seconds peak_rss_kib" of it on stdout; its own output goes to $1.
measure() {
  local output="$1"; shift
  /usr/bin/time -f '%e %M' -o "$output.time" "$@" > "$output" 2>&1
  cat "$output.time"
}

start_slapd() {  # $1 instance dir, $2 port
  slapd -f "$1/slapd.conf" -h "ldap://127.0.0.1:$2/"
  wait_ldap "$2"
}

stop_slapd() {
  [ -f "$1/slapd.pid" ] && kill "$(cat "$1/slapd.pid")" 2>/dev/null || true
  sleep 1
}

# Reads the data segments of each file (holes skipped: slapd's data.mdb is as large as its
# maxsize) so that timed operations find the database in the page cache, as a running server's
# would be, whatever evicted it since the load (other work on a shared machine does).
warm_files() {  # files...
  python3 - "$@" <<'PY'
import os, sys
for path in sys.argv[1:]:
    fd, offset = os.open(path, os.O_RDONLY), 0
    size = os.fstat(fd).st_size
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        os.lseek(fd, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            left -= len(chunk)
        offset = end
    os.close(fd)
PY
}

# Sets CONFIG to the lmdir config serve-vs-openldap.sh left in $WORK_DIR (its stores, lmdir's
# and slapd's, beside it); stops the calling benchmark when that script has not run there.
require_served_stores() {  # $1 people
  CONFIG="$WORK_DIR/lmdir-serve.toml"
  [ -f "$CONFIG" ] || { log "no $CONFIG: run bench/serve-vs-openldap.sh $1 first"; exit 1; }
}

wait_ldap() {  # $1 port
  local i
  for i in $(seq 1 100); do
    ldapsearch -x -H "ldap://127.0.0.1:$1" -b "" -s base >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "server on port $1 did not come up"; return 1
}

db_size_mib() { du -sm "$1" | cut -f1; }
