#!/usr/bin/python3
"""python-ldap's ldap.controls.ppolicy reading lmdir's password policy response control.

Driven by crates/lmdir/tests/ppolicy_python.rs, which prepares the server and the accounts and
checks what this prints: one JSON object, per step the result code and the control's fields as
python-ldap decoded them (null when the server sent no control).

Usage: ppolicy.py LDAP_URL PEOPLE_BASE
"""

import json
import sys

import ldap
from ldap.controls import DecodeControlTuples
from ldap.controls.ppolicy import PasswordPolicyControl

PASSWORD = "first-password"


def decoded(controls):
    for control in controls:
        if control.controlType == PasswordPolicyControl.controlType:
            return {
                "error": control.error,
                "timeBeforeExpiration": control.timeBeforeExpiration,
                "graceAuthNsRemaining": control.graceAuthNsRemaining,
            }
    return None


def bind(url, dn, password):
    """A simple bind with the request control: (connection, result code, decoded control)."""
    connection = ldap.initialize(url)
    connection.protocol_version = 3
    try:
        _, _, _, controls = connection.simple_bind_s(
            dn, password, serverctrls=[PasswordPolicyControl()]
        )
        return connection, 0, decoded(controls)
    except ldap.LDAPError as error:
        info = error.args[0]
        return connection, info["result"], decoded(DecodeControlTuples(info.get("ctrls") or []))


def step(results, name, url, dn, password):
    connection, code, control = bind(url, dn, password)
    results[name] = {"result": code, "control": control}
    return connection


def main():
    url, people = sys.argv[1], sys.argv[2]
    dn = lambda uid: "uid=%s,%s" % (uid, people)
    results = {}
    for attempt in range(3):
        step(results, "wrong password %d" % (attempt + 1), url, dn("locked"), "wrong")
    step(results, "locked", url, dn("locked"), PASSWORD)
    step(results, "expiry warning", url, dn("warned"), PASSWORD)
    step(results, "grace login", url, dn("graced"), PASSWORD)
    connection = step(results, "change after reset", url, dn("reset"), "given-by-admin")
    try:
        connection.search_s(dn("reset"), ldap.SCOPE_BASE, "(objectClass=*)", ["cn"])
        results["restricted search"] = {"result": 0}
    except ldap.LDAPError as error:
        results["restricted search"] = {"result": error.args[0]["result"]}
    json.dump(results, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
