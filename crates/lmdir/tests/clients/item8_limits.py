"""Issue 10 item 8: `[[limits]]` lifts the size limit (500) for SSSD's service account, which
enumerates all users in pages of 1000 (SSSD's default ldap_page_size); anonymous and other users
keep the limit, paged or not."""

import ldap
from ldap.controls.libldap import SimplePagedResultsControl

from common import PEOPLE, SSSD, USERS, done, expect, ldap3_connection, python_ldap_as, user

FILTER = "(&(objectClass=posixAccount)(uid=*))"
PAGE = 1000


def ldap3_paged(dn, password):
    """ldap3's paged search, as SSSD pages: the entries it got and the final result code."""
    connection = ldap3_connection(dn, password)
    entries = list(connection.extend.standard.paged_search(
        PEOPLE, FILTER, attributes=["uid", "uidNumber"], paged_size=PAGE, generator=True))
    return len([entry for entry in entries if entry["type"] == "searchResEntry"]), connection.result["result"]


def python_ldap_paged(dn, password):
    """python-ldap's page loop with SimplePagedResultsControl: entries, pages, final result."""
    connection = python_ldap_as(dn, password)
    control = SimplePagedResultsControl(True, size=PAGE, cookie=b"")
    count = pages = 0
    while True:
        try:
            message = connection.search_ext(PEOPLE, ldap.SCOPE_ONELEVEL, FILTER, ["uid"], serverctrls=[control])
            _, found, _, response_controls = connection.result3(message)
        except ldap.SIZELIMIT_EXCEEDED:
            return count, pages, "SIZELIMIT_EXCEEDED"
        count += len(found)
        pages += 1
        cookies = [c.cookie for c in response_controls if c.controlType == SimplePagedResultsControl.controlType]
        if not cookies or not cookies[0]:
            return count, pages, "success"
        control.cookie = cookies[0]


expect(ldap3_paged(SSSD, "sssd-secret"), (USERS, 0), "the service account's paged enumeration (ldap3)")
expect(python_ldap_paged(SSSD, "sssd-secret"), (USERS, USERS // PAGE, "success"),
       "the service account's paged enumeration (python-ldap)")
expect(ldap3_paged(None, None), (500, 4), "anonymous paged enumeration stops at the size limit")
counted, _, outcome = python_ldap_paged(user(3), "pw-user0003")
expect((counted <= 500, outcome), (True, "SIZELIMIT_EXCEEDED"), f"another user's paged enumeration ({counted})")

# Without paging too.
service = ldap3_connection(SSSD, "sssd-secret")
service.search(PEOPLE, FILTER, attributes=["uid"])
expect((len(service.entries), service.result["result"]), (USERS, 0), "the service account's plain search")
other = ldap3_connection(user(3), "pw-user0003")
other.search(PEOPLE, FILTER, attributes=["uid"])
expect((len(other.entries), other.result["result"]), (500, 4), "another user's plain search")
done(__file__)
