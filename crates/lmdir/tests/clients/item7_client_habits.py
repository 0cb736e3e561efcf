"""Issue 10 item 7: what real clients trip over. The ldapi socket accepts users other than the
server's (mode 0777 as slapd); python-ldap's strict schema check of the root DSE's objectClass;
cn=Subschema's createTimestamp/modifyTimestamp (admin UIs refresh cached schema by them); the
assertion and pre/post-read controls (the Rust test checks the log has no "Unsupported control");
error texts name DNs as the client sent them."""

import os
import stat
import subprocess
import sys
import urllib.parse

import ldap
import ldap.schema
from ldap.controls.libldap import AssertionControl
from ldap.controls.readentry import PostReadControl, PreReadControl

from common import BASE, LDAPI_PATH, done, expect, python_ldap_connection, python_ldap_root, user

LDAPI_URL = "ldapi://" + urllib.parse.quote(LDAPI_PATH, safe="")

expect(stat.S_IMODE(os.stat(LDAPI_PATH).st_mode), 0o777, "ldapi socket mode")
local = python_ldap_connection(LDAPI_URL)
expect(len(local.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["namingContexts"])), 1, "root DSE over ldapi")
if os.geteuid() == 0:
    # Connect as nobody, as a non-root local client would (setpriv drops the identity).
    probe = (
        "import ldap, sys; c = ldap.initialize(sys.argv[1]); "
        "print(len(c.search_s('', ldap.SCOPE_BASE, '(objectClass=*)', ['namingContexts'])))"
    )
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", probe, LDAPI_URL],
        capture_output=True, text=True,
    )
    expect((result.returncode, result.stdout.strip()), (0, "1"), f"ldapi as nobody: {result.stderr.strip()}")

connection = python_ldap_root()
[(_, root_dse)] = connection.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["objectClass", "subschemaSubentry"])
subschema_dn = root_dse["subschemaSubentry"][0].decode()
[(_, subschema)] = connection.search_s(subschema_dn, ldap.SCOPE_BASE, "(objectClass=subschema)", ["*", "+"])
schema = ldap.schema.SubSchema(subschema, check_uniqueness=2)
classes = [value.decode() for value in root_dse["objectClass"]]
try:
    # raise_keyerror=1: every objectClass value must be defined in cn=Subschema.
    schema.attribute_types(classes, raise_keyerror=1)
    strict = "success"
except KeyError as error:
    strict = f"KeyError {error}"
expect(strict, "success", f"strict check of the root DSE's objectClass {classes}")
for name in ["createTimestamp", "modifyTimestamp"]:
    values = subschema.get(name, [])
    expect(len(values) == 1 and values[0].endswith(b"Z"), True, f"cn=Subschema {name} {values}")

# Controls every client library sends: assertion, pre-read and post-read.
target = user(11)
connection.modify_ext_s(
    target,
    [(ldap.MOD_REPLACE, "description", [b"asserted"])],
    serverctrls=[AssertionControl(True, "(uid=user0011)"), PreReadControl(True, ["description"]), PostReadControl(True, ["description"])],
)
try:
    connection.modify_ext_s(target, [(ldap.MOD_REPLACE, "description", [b"no"])], serverctrls=[AssertionControl(True, "(uid=other)")])
    asserted = "success"
except ldap.LDAPError as error:
    asserted = type(error).__name__
expect(asserted, "ASSERTION_FAILED", "a failing assertion control")

# An error names the DN as sent, not its normalized form.
try:
    connection.add_s(f"cn=Someone,ou=Missing Unit,{BASE}", [("objectClass", [b"person"]), ("cn", [b"Someone"]), ("sn", [b"One"])])
    message = "added"
except ldap.NO_SUCH_OBJECT as error:
    message = error.args[0].get("info", "") + error.args[0].get("matched", "")
expect("ou=missing unit" in message, False, f"the error text echoes the normalized DN: {message!r}")
done(__file__)
