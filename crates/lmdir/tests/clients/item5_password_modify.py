"""Issue 10 item 5: Password Modify (RFC 3062) by a user on themself without the old password
(ldap3's modify_password, python-ldap's passwd_s, what nslcd and `ldappasswd` without -a send), with
it, with a generated password, and by a helpdesk group given write access to userPassword."""

import ldap
import ldap3

from common import HELPER, done, expect, ldap3_connection, python_ldap_as, user


def can_bind(dn, password):
    try:
        ldap3_connection(dn, password).unbind()
        return True
    except ldap3.core.exceptions.LDAPException:
        return False


def passwd_result(connection, dn, old, new):
    try:
        connection.passwd_s(dn, old, new)
        return "success"
    except ldap.LDAPError as error:
        return type(error).__name__


# ldap3, self, no old password (its documented way to change one's own password).
own = ldap3_connection(user(5), "pw-user0005")
expect(own.extend.standard.modify_password(new_password="new-5"), True, f"ldap3 self change: {own.result}")
expect(can_bind(user(5), "new-5"), True, "bind with the changed password")
expect(can_bind(user(5), "pw-user0005"), False, "bind with the old password")
# ... with the old password, right and wrong.
own = ldap3_connection(user(5), "new-5")
expect(own.extend.standard.modify_password(old_password="new-5", new_password="new-5b"), True, "with the old password")
expect(own.extend.standard.modify_password(old_password="wrong", new_password="x"), False, "with a wrong old password")
# ... and a generated one (no new password: the server answers genPasswd).
generated = ldap3_connection(user(5), "new-5b").extend.standard.modify_password()
expect(isinstance(generated, str) and len(generated) >= 8, True, f"a generated password {generated!r}")
expect(can_bind(user(5), generated if isinstance(generated, str) else ""), True, "bind with the generated password")

# python-ldap, self, no old password.
connection = python_ldap_as(user(6), "pw-user0006")
expect(passwd_result(connection, user(6), None, "new-6"), "success", "python-ldap passwd_s self")
expect(can_bind(user(6), "new-6"), True, "bind after passwd_s")

# A helpdesk member resets another user's password; another user may not.
helpdesk = python_ldap_as(HELPER, "helper-secret")
expect(passwd_result(helpdesk, user(7), None, "reset-7"), "success", "helpdesk reset")
expect(can_bind(user(7), "reset-7"), True, "bind after the helpdesk reset")
stranger = python_ldap_as(user(8), "pw-user0008")
expect(passwd_result(stranger, user(9), None, "stolen"), "INSUFFICIENT_ACCESS", "a user on another user")
expect(can_bind(user(9), "pw-user0009"), True, "the other user's password unchanged")
done(__file__)
