"""Shared by the client scripts: where the server under test is (the Rust test sets the
environment) and how a check fails (a message naming what differed, exit status 1)."""

import os
import sys

URL = os.environ["LMDIR_URL"]
LDAPI_PATH = os.environ["LMDIR_LDAPI_PATH"]
BASE = os.environ["LMDIR_BASE"]
ROOT_DN = os.environ["LMDIR_ROOT_DN"]
ROOT_PASSWORD = os.environ["LMDIR_ROOT_PASSWORD"]
USERS = int(os.environ["LMDIR_USERS"])
PEOPLE = "ou=people," + BASE
GROUPS = "ou=groups," + BASE
HELPER = "uid=helper," + PEOPLE
SSSD = "uid=sssd,ou=services," + BASE

_failures = []


def expect(actual, expected, what):
    """Records a failed check (all checks of a script run, then `done` reports them)."""
    if actual != expected:
        _failures.append(f"{what}: expected {expected!r}, got {actual!r}")


def user(index):
    return f"uid=user{index:04},{PEOPLE}"


def done(script):
    if _failures:
        print(f"{script}: {len(_failures)} failed checks", file=sys.stderr)
        for failure in _failures:
            print("  " + failure, file=sys.stderr)
        sys.exit(1)
    print(f"{script}: ok")


# Hang guards only (a loaded machine never comes near them): no client call waits forever.
TIMEOUT_SECONDS = 120


def python_ldap_connection(url=URL):
    """An unbound python-ldap connection with the hang guards."""
    import ldap

    connection = ldap.initialize(url)
    connection.set_option(ldap.OPT_NETWORK_TIMEOUT, TIMEOUT_SECONDS)
    connection.set_option(ldap.OPT_TIMEOUT, TIMEOUT_SECONDS)
    connection.protocol_version = 3
    return connection


def python_ldap_as(dn, password):
    connection = python_ldap_connection()
    connection.simple_bind_s(dn, password)
    return connection


def python_ldap_root():
    return python_ldap_as(ROOT_DN, ROOT_PASSWORD)


def ldap3_connection(dn=ROOT_DN, password=ROOT_PASSWORD, **server_options):
    import ldap3

    server = ldap3.Server(URL, connect_timeout=TIMEOUT_SECONDS, **server_options)
    return ldap3.Connection(server, user=dn, password=password, auto_bind=True, raise_exceptions=False,
                            receive_timeout=TIMEOUT_SECONDS)


def dns(connection_results):
    """The lowercased DNs of python-ldap search results (references skipped)."""
    return sorted(dn.lower() for dn, _ in connection_results if dn is not None)
