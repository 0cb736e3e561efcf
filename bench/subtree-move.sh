#!/usr/bin/env bash
# Moving a whole subtree of group members, as an administrator reorganizing departments does:
# ou=Old holds N people, each a member of one big group (all N) and of one of N/500 groups of
# 500; `ldapmodrdn -s ou=New` moves ou=Old below ou=New, so every member DN in every group must
# be rewritten. OpenLDAP slapd 2.5 (back-mdb, the memberof overlay with memberof-refint, eq
# indexes on member and memberOf) against lmdir (memberof = true, the same indexes), each
# loaded from the same LDIF, both with their default write limits. Prints per server the
# modrdn's result code and wall time, then checks that every group names the moved DNs.
# Usage: [LMDIR=binary] [WRITE_BUDGET_MS=1000] bench/subtree-move.sh [N]
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-20000}"
SLAPD_PORT="${SLAPD_PORT:-3894}"
LMDIR_PORT="${LMDIR_PORT:-3895}"
WRITE_BUDGET_MS="${WRITE_BUDGET_MS:-1000}"
ensure_packages
build_lmdir

# slapd's memberof overlay does not act on slapadd, and follows a moved entry's memberOf to
# its groups: its LDIF carries memberOf as a running slapd would have written it. lmdir
# computes memberOf at load.
LDIF="$WORK_DIR/subtree-move-$PEOPLE.ldif"
SLAPD_LDIF="$WORK_DIR/subtree-move-$PEOPLE-memberof.ldif"
generate() {  # $1: with memberOf (1) or not (0)
python3 - "$PEOPLE" "$SUFFIX" "$1" <<'PY'
import sys
people, suffix, with_memberof = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
out = sys.stdout.write
out(f"dn: {suffix}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n")
for ou in ("Old", "New", "Groups"):
    out(f"dn: ou={ou},{suffix}\nobjectClass: organizationalUnit\nou: {ou}\n\n")
dn = lambda i: f"uid=user{i},ou=Old,{suffix}"
for i in range(people):
    groups = f"memberOf: cn=everyone,ou=Groups,{suffix}\nmemberOf: cn=team{i // 500},ou=Groups,{suffix}\n"
    out(f"dn: {dn(i)}\nobjectClass: inetOrgPerson\nuid: user{i}\ncn: User {i}\nsn: {i}\n")
    out((groups if with_memberof else "") + "\n")
out(f"dn: cn=everyone,ou=Groups,{suffix}\nobjectClass: groupOfNames\ncn: everyone\n")
out("".join(f"member: {dn(i)}\n" for i in range(people)) + "\n")
for g in range((people + 499) // 500):
    out(f"dn: cn=team{g},ou=Groups,{suffix}\nobjectClass: groupOfNames\ncn: team{g}\n")
    out("".join(f"member: {dn(i)}\n" for i in range(g * 500, min(people, g * 500 + 500))) + "\n")
PY
}
generate 0 > "$LDIF"
generate 1 > "$SLAPD_LDIF"

SLAPD_DIR="$WORK_DIR/subtree-move-slapd-$PEOPLE"
LMDIR_DIR="$WORK_DIR/subtree-move-lmdir-$PEOPLE"
rm -rf "$SLAPD_DIR" "$LMDIR_DIR" "$LMDIR_DIR.toml"
write_memberof_slapd_config "$SLAPD_DIR"
echo "memberof-refint TRUE" >> "$SLAPD_DIR/slapd.conf"
cat > "$LMDIR_DIR.toml" <<EOF
[server]
listen = ["ldap://127.0.0.1:$LMDIR_PORT"]
size_limit = 0
log = "warn"
write_budget_milliseconds = $WRITE_BUDGET_MS
[database]
suffix = "$SUFFIX"
directory = "$LMDIR_DIR"
rootdn = "$ROOTDN"
rootpw = "$ROOTPW"
memberof = ${MEMBEROF:-true}
[database.index]
objectClass = ["eq"]
uid = ["eq"]
member = ["eq"]
memberOf = ["eq"]
EOF

log "loading $PEOPLE people into slapd (slapadd -q) and lmdir (lmdir load)"
slapadd -q -f "$SLAPD_DIR/slapd.conf" -l "$SLAPD_LDIF" > "$SLAPD_DIR.slapadd.out" 2>&1
"$LMDIR" --config "$LMDIR_DIR.toml" load "$LDIF" > "$LMDIR_DIR.load.out" 2>&1
slapd -f "$SLAPD_DIR/slapd.conf" -h "ldap://127.0.0.1:$SLAPD_PORT/"
${LMDIR_WRAP:-} "$LMDIR" --config "$LMDIR_DIR.toml" serve --no-demo > "$LMDIR_DIR.serve.log" 2>&1 &
LMDIR_PID=$!
cleanup() { kill "$LMDIR_PID" 2>/dev/null || true; stop_slapd "$SLAPD_DIR"; }
trap cleanup EXIT
wait_ldap "$SLAPD_PORT"
wait_ldap "$LMDIR_PORT"
warm_files "$SLAPD_DIR"/db/data.mdb "$LMDIR_DIR"/data.mdb

for server in "openldap $SLAPD_PORT" "lmdir $LMDIR_PORT"; do
  set -- $server
  start=$(date +%s.%N)
  code=0
  ldapmodrdn -x -H "ldap://127.0.0.1:$2" -D "$ROOTDN" -w "$ROOTPW" -s "ou=New,$SUFFIX" \
    "ou=Old,$SUFFIX" "ou=Old" > "$WORK_DIR/subtree-move-$1.out" 2>&1 || code=$?
  end=$(date +%s.%N)
  sleep "${SETTLE_SECONDS:-0}"  # slapd may finish memberof-refint work after answering
  moved=$(ldapsearch -x -LLL -H "ldap://127.0.0.1:$2" -D "$ROOTDN" -w "$ROOTPW" \
    -b "ou=Groups,$SUFFIX" -s one "(member=uid=user0,ou=Old,ou=New,$SUFFIX)" dn | grep -c '^dn:' || true)
  memberof=$(ldapsearch -x -LLL -H "ldap://127.0.0.1:$2" -D "$ROOTDN" -w "$ROOTPW" \
    -b "uid=user$((PEOPLE - 1)),ou=Old,ou=New,$SUFFIX" -s base memberOf | grep -c '^memberOf:' || true)
  printf '%s people=%s modrdn_exit=%s seconds=%.2f groups_naming_user0_new_dn=%s memberOf_of_last=%s\n' \
    "$1" "$PEOPLE" "$code" "$(echo "$end - $start" | bc)" "$moved" "$memberof"
done
