"""Issue 10 item 4: the AD bitwise matching rules (1.2.840.113556.1.4.803 AND, .804 OR) on
userAccountControl from Debian's msuser.schema, as applications filter disabled accounts."""

import ldap3

from common import BASE, done, expect, ldap3_connection

connection = ldap3_connection()
accounts = {
    "enabled": "512",      # NORMAL_ACCOUNT
    "disabled": "514",     # NORMAL_ACCOUNT | ACCOUNTDISABLE (2)
    "locked": "528",       # NORMAL_ACCOUNT | LOCKOUT (16)
    "nopasswd": "544",     # NORMAL_ACCOUNT | PASSWD_NOTREQD (32)
}
for name, control in accounts.items():
    connection.add(f"cn={name},{BASE}", ["inetOrgPerson", "extensibleObject"],
                   {"cn": name, "sn": name, "userAccountControl": control})
    expect(connection.result["result"], 0, f"add {name}: {connection.result['message']}")


def found(assertion):
    connection.search(BASE, assertion, attributes=["cn"])
    return sorted(str(entry.cn) for entry in connection.entries)


expect(found("(userAccountControl:1.2.840.113556.1.4.803:=2)"), ["disabled"], "AND 2")
expect(found("(userAccountControl:1.2.840.113556.1.4.803:=514)"), ["disabled"], "AND 514")
expect(found("(&(userAccountControl=*)(!(userAccountControl:1.2.840.113556.1.4.803:=2)))"),
       ["enabled", "locked", "nopasswd"], "NOT AND 2")
expect(found("(userAccountControl:1.2.840.113556.1.4.804:=18)"), ["disabled", "locked"], "OR 18")
expect(found("(userAccountControl:1.2.840.113556.1.4.804:=1)"), [], "OR 1")
done(__file__)
