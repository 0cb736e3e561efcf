"""Issue 10 item 2: with an rfc2307bis schema file in `schema_files`, posixGroup is AUXILIARY and
sits on groupOfNames entries, the layout SSSD and nslcd expect (member DNs plus gidNumber)."""

import ldap
import ldap.modlist

from common import GROUPS, done, expect, python_ldap_root, user, dns

connection = python_ldap_root()
group = f"cn=developers,{GROUPS}"
members = [user(1).encode(), user(2).encode()]
try:
    connection.add_s(
        group,
        ldap.modlist.addModlist(
            {
                "objectClass": [b"groupOfNames", b"posixGroup"],
                "cn": [b"developers"],
                "gidNumber": [b"20001"],
                "member": members,
            }
        ),
    )
    added = "success"
except ldap.LDAPError as error:
    added = repr(error)
expect(added, "success", "add a groupOfNames + posixGroup entry")

# SSSD's rfc2307bis group lookup by gidNumber, and nslcd's group-by-member query.
found = connection.search_s(GROUPS, ldap.SCOPE_SUBTREE, "(&(objectClass=posixGroup)(gidNumber=20001))", ["member"])
expect(dns(found), [group.lower()], "posixGroup by gidNumber")
if found:
    expect(sorted(found[0][1].get("member", [])), sorted(members), "the group's member DNs")
found = connection.search_s(GROUPS, ldap.SCOPE_SUBTREE, f"(&(objectClass=posixGroup)(member={user(2)}))", ["cn"])
expect(dns(found), [group.lower()], "posixGroup by member")

# The schema clients read says so too.
schema_dn = "cn=Subschema"
[(_, entry)] = connection.search_s(schema_dn, ldap.SCOPE_BASE, "(objectClass=*)", ["objectClasses"])
posix_group = [value for value in entry["objectClasses"] if b"'posixGroup'" in value]
expect(len(posix_group), 1, "one posixGroup definition in cn=Subschema")
expect(bool(posix_group) and b"AUXILIARY" in posix_group[0], True, "posixGroup is AUXILIARY")
done(__file__)
