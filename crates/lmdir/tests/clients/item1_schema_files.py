"""Issue 10 item 1: Debian's schema files, loaded through `schema_files`, are what clients see in
cn=Subschema (python-ldap's strict parser, ldap3's schema reader) and can be used in entries."""

import ldap
import ldap.schema
import ldap3

from common import BASE, URL, done, expect, ldap3_connection, python_ldap_root

# One class or attribute from each file loaded on top of the built-in schema.
FROM_FILES = {
    "dyngroup": (ldap.schema.ObjectClass, "groupOfURLs"),
    "msuser": (ldap.schema.ObjectClass, "user"),
    "java": (ldap.schema.ObjectClass, "javaObject"),
    "corba": (ldap.schema.ObjectClass, "corbaObject"),
    "duaconf": (ldap.schema.ObjectClass, "DUAConfigProfile"),
    "openldap": (ldap.schema.ObjectClass, "OpenLDAPperson"),
    "misc": (ldap.schema.ObjectClass, "nisMailAlias"),
    "namedobject": (ldap.schema.ObjectClass, "namedObject"),
    "pmi": (ldap.schema.ObjectClass, "pmiUser"),
    "collective": (ldap.schema.AttributeType, "c-l"),
    "dsee": (ldap.schema.AttributeType, "targetUniqueId"),
    "cosine (built in)": (ldap.schema.ObjectClass, "pilotPerson"),
}

connection = python_ldap_root()
# The way python-ldap clients find and parse the schema: subschemaSubentry, then a strict parse
# (check_uniqueness=2 refuses two definitions with one name or OID).
[(_, root_dse)] = connection.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["subschemaSubentry"])
subschema_dn = root_dse["subschemaSubentry"][0].decode()
[(_, subschema_entry)] = connection.search_s(
    subschema_dn,
    ldap.SCOPE_BASE,
    "(objectClass=subschema)",
    ["objectClasses", "attributeTypes", "ldapSyntaxes", "matchingRules", "matchingRuleUse"],
)
try:
    schema = ldap.schema.SubSchema(subschema_entry, check_uniqueness=2)
except Exception as error:  # what python-ldap raises for a bad or duplicate definition
    expect(repr(error), None, "python-ldap's strict parse of cn=Subschema")
    schema = ldap.schema.SubSchema(subschema_entry, check_uniqueness=0)
for source, (kind, name) in FROM_FILES.items():
    expect(schema.get_obj(kind, name) is not None, True, f"{name} from {source}.schema in cn=Subschema")

# ldap3 reads the same schema when asked for it (get_info=ALL), as its users' code does.
reader = ldap3_connection(get_info=ldap3.ALL)
expect(reader.server.schema is not None, True, "ldap3 read the schema")
if reader.server.schema is not None:
    expect("groupOfURLs" in reader.server.schema.object_classes, True, "ldap3 knows groupOfURLs")
    expect("userAccountControl" in reader.server.schema.attribute_types, True, "ldap3 knows userAccountControl")

# The classes are usable: a dynamic group (dyngroup.schema) and an OpenLDAPperson.
dynamic = f"cn=dynamic,ou=groups,{BASE}"
reader.add(dynamic, ["groupOfURLs"], {"cn": "dynamic", "memberURL": f"ldap:///ou=people,{BASE}??one?(uid=user000*)"})
expect(reader.result["result"], 0, f"add {dynamic}: {reader.result['message']}")
reader.search(dynamic, "(memberURL=*)", search_scope=ldap3.BASE, attributes=["memberURL"])
expect(len(reader.entries), 1, "the dynamic group read back")
person = f"uid=oldap,{BASE}"
reader.add(person, ["OpenLDAPperson"], {"uid": "oldap", "cn": "O Ldap", "sn": "Ldap"})
expect(reader.result["result"], 0, f"add {person}: {reader.result['message']}")
done(__file__)
