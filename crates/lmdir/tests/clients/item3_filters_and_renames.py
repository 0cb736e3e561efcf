"""Issue 10 item 3: `:dn:` extensible match with the rule asked for, cn=Subschema matched by OID,
member/memberOf following a subtree rename and a delete, language ranges, an add with no
attributes (protocolError) and LDAPv2 DN values (refused), through python-ldap and ldap3."""

import ldap
import ldap.modlist
import ldap3

from common import BASE, GROUPS, done, dns, expect, ldap3_connection, python_ldap_root

connection = python_ldap_root()
division = f"ou=Research Division,{BASE}"
lab = f"cn=Lab Lead,{division}"
assistant = f"cn=Lab Assistant,{division}"
team = f"cn=lab team,{GROUPS}"
connection.add_s(division, ldap.modlist.addModlist({"objectClass": [b"organizationalUnit"], "ou": [b"Research Division"]}))
for dn, name in [(lab, b"Lab Lead"), (assistant, b"Lab Assistant")]:
    connection.add_s(dn, ldap.modlist.addModlist({
        "objectClass": [b"inetOrgPerson"], "cn": [name], "sn": [b"Lab"],
        "cn;lang-en-us": [name + b" (US)"], "description;lang-en-gb": [b"colour"],
    }))
connection.add_s(team, ldap.modlist.addModlist({
    "objectClass": [b"groupOfNames"], "cn": [b"lab team"], "member": [lab.encode(), assistant.encode()],
}))

# :dn: tests each DN component as written, with the rule asked for. python-ldap sends the
# rule-only forms (ldap3 2.9 cannot parse an extensible filter without an attribute: TypeError).
in_division = sorted(dn.lower() for dn in [division, lab, assistant])
for assertion, expected in [
    ("(:dn:caseExactMatch:=Research Division)", in_division),
    ("(:dn:caseExactMatch:=research division)", []),
    ("(:dn:caseIgnoreMatch:=research division)", in_division),
]:
    expect(dns(connection.search_s(BASE, ldap.SCOPE_SUBTREE, assertion, ["1.1"])), expected, assertion)
reader = ldap3_connection()
for assertion, expected in [
    ("(ou:dn:=RESEARCH DIVISION)", in_division),
    ("(ou:dn:caseExactMatch:=research division)", []),
]:
    reader.search(BASE, assertion, attributes=[ldap3.NO_ATTRIBUTES])
    expect(sorted(entry.entry_dn.lower() for entry in reader.entries), expected, f"ldap3 {assertion}")

# cn=Subschema's values match by OID (objectIdentifierFirstComponentMatch) and by name.
for assertion in ["(objectClasses=2.5.6.0)", "(objectClasses=top)", "(attributeTypes=2.5.4.3)"]:
    found = connection.search_s("cn=Subschema", ldap.SCOPE_BASE, assertion, ["1.1"])
    expect(len(found), 1, f"cn=Subschema {assertion}")

# Language ranges in the attributes asked for.
[(_, entry)] = connection.search_s(lab, ldap.SCOPE_BASE, "(objectClass=*)", ["name;lang-en-", "description;lang-"])
expect(sorted(name.lower() for name in entry), ["cn;lang-en-us", "description;lang-en-gb"], "name;lang-en- and description;lang-")

# Renaming the parent rewrites member and memberOf; a delete removes the stale member value.
connection.rename_s(division, "ou=Applied Research", delold=1)
moved_lab = f"cn=Lab Lead,ou=Applied Research,{BASE}"
moved_assistant = f"cn=Lab Assistant,ou=Applied Research,{BASE}"
[(_, group)] = connection.search_s(team, ldap.SCOPE_BASE, "(objectClass=*)", ["member"])
expect(sorted(value.decode().lower() for value in group["member"]),
       sorted([moved_lab.lower(), moved_assistant.lower()]), "member values after the rename")
# memberOf read, not filtered on: this server loads msuser.schema, whose memberOf has no EQUALITY
# rule and overrides the built-in one (docs/compatibility.md).
for moved in [moved_lab, moved_assistant]:
    [(_, entry)] = connection.search_s(moved, ldap.SCOPE_BASE, "(objectClass=*)", ["memberOf"])
    expect([value.decode().lower() for value in entry.get("memberOf", [])], [team.lower()], f"memberOf of {moved}")
connection.delete_s(moved_assistant)
[(_, group)] = connection.search_s(team, ldap.SCOPE_BASE, "(objectClass=*)", ["member"])
expect([value.decode().lower() for value in group["member"]], [moved_lab.lower()], "member values after the delete")


def add_result(dn, attributes):
    try:
        connection.add_s(dn, attributes)
        return "success"
    except ldap.LDAPError as error:
        return type(error).__name__


expect(add_result(f"cn=empty,{BASE}", []), "PROTOCOL_ERROR", "an add with no attributes")
for value in [b"UID=jsmith;O=example;C=US", b'CN="John Smith",O=example', b"OID.0.9.2342.19200300.100.1.1=jsmith,O=example"]:
    result = add_result(f"cn=v2 {value[:3].decode()},{GROUPS}", [
        ("objectClass", [b"groupOfNames"]), ("cn", [b"v2 " + value[:3]]), ("member", [value]),
    ])
    expect(result, "INVALID_SYNTAX", f"an LDAPv2 DN value {value!r}")
done(__file__)
