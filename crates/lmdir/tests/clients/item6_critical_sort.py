"""Issue 10 item 6: a critical server-side sort (RFC 2891) that cannot be honoured fails the search
with unavailableCriticalExtension (12); a non-critical one returns the entries unsorted; one that
can be honoured sorts. python-ldap's SSSRequestControl and a raw control through ldap3."""

import ldap
from ldap.controls.sss import SSSRequestControl

from common import PEOPLE, done, expect, ldap3_connection, python_ldap_root

SORT_OID = "1.2.840.113556.1.4.473"
FILTER = "(uid=user000*)"
connection = python_ldap_root()


def sorted_search(rules, critical):
    control = SSSRequestControl(criticality=critical, ordering_rules=rules)
    try:
        found = connection.search_ext_s(PEOPLE, ldap.SCOPE_ONELEVEL, FILTER, ["uidNumber"], serverctrls=[control])
        return [int(entry["uidNumber"][0]) for _, entry in found]
    except ldap.LDAPError as error:
        return type(error).__name__


for rules in [["noSuchAttribute"], ["uidNumber:noSuchOrderingRule"]]:
    expect(sorted_search(rules, True), "UNAVAILABLE_CRITICAL_EXTENSION", f"critical sort {rules}")
    unsorted = sorted_search(rules, False)
    expect(sorted(unsorted) if isinstance(unsorted, list) else unsorted, list(range(10000, 10010)),
           f"non-critical sort {rules}: the entries anyway")
expect(sorted_search(["-uidNumber"], True), list(range(10009, 9999, -1)), "critical sort by -uidNumber")


def ber(tag, content):
    assert len(content) < 128
    return bytes([tag, len(content)]) + content


# ldap3 has no sort helper: applications pass the control as (OID, criticality, BER value).
value = ber(0x30, ber(0x30, ber(0x04, b"noSuchAttribute")))
raw = ldap3_connection()
raw.search(PEOPLE, FILTER, controls=[(SORT_OID, True, value)])
expect(raw.result["result"], 12, f"ldap3 critical sort: {raw.result}")
raw.search(PEOPLE, FILTER, controls=[(SORT_OID, False, value)])
expect((raw.result["result"], len(raw.entries)), (0, 10), "ldap3 non-critical sort")
done(__file__)
