"""Runs scim2-tester (PyPI, by Yaal Coop) against a running lmdir SCIM endpoint.

Usage: python run_scim2_tester.py BASE_URL CA_FILE AUTHORIZATION_HEADER
Prints one line per check; exits 1 if any check ends ERROR or CRITICAL.
"""

import sys

import httpx2
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

base_url, ca_file, authorization = sys.argv[1:4]
http = httpx2.Client(
    base_url=base_url,
    headers={"Authorization": authorization},
    verify=ca_file,
    timeout=60,
)
client = SyncSCIMClient(http)
# Checks that cannot apply to a directory, each with the reason (docs/scim.md repeats them).
NOT_APPLICABLE = {
    ("check_remove_attribute", "'active'"): "active is the password policy's lock state "
    "(pwdAccountLockedTime): it always has a value, and removing it leaves the lock as it is",
}


def not_applicable(result):
    for (title, marker), why in NOT_APPLICABLE.items():
        if result.title == title and marker in (result.reason or ""):
            return why
    return None


results = check_server(client)
counts = {}
failed = 0
for result in results:
    counts[result.status.name] = counts.get(result.status.name, 0) + 1
    status = result.status.name
    why = not_applicable(result) if result.status == Status.ERROR else None
    if why:
        status = "N/A"
        counts["ERROR"] -= 1
        counts["N/A"] = counts.get("N/A", 0) + 1
    line = f"{status:10} {result.resource_type or '-':6} {result.title}: {result.reason}"
    print(line.replace("\n", " | ")[:600] + (f" (not applicable: {why})" if why else ""))
    if result.status in (Status.ERROR, Status.CRITICAL) and not why:
        failed += 1
print("scim2-tester totals:", " ".join(f"{name}={count}" for name, count in sorted(counts.items()) if count))
sys.exit(1 if failed else 0)
