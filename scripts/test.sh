#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then format, lint, unit,
# property and integration tests (including the ones that drive ldap-utils and OpenLDAP slapd).
set -euo pipefail
cd "$(dirname "$0")/.."

need_packages=()
command -v ldapsearch >/dev/null || need_packages+=(ldap-utils)
command -v slapd >/dev/null || [ -x /usr/sbin/slapd ] || need_packages+=(slapd)
# promtool checks the metrics endpoint's exposition (crates/server/tests/monitoring.rs).
command -v promtool >/dev/null || need_packages+=(prometheus)
# python-ldap and ldap3 drive lmdir as real clients (crates/lmdir/tests/clients.rs).
/usr/bin/python3 -c "import ldap" 2>/dev/null || need_packages+=(python3-ldap)
/usr/bin/python3 -c "import ldap3" 2>/dev/null || need_packages+=(python3-ldap3)
# nslcd, its NSS module and pam_ldap, driven by getent and pamtester in a private mount namespace
# (crates/lmdir/tests/nss_pam.rs).
nss_pam_packages=(nslcd libnss-ldapd libpam-ldapd pamtester)
for package in "${nss_pam_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || need_packages+=("$package")
done
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if [ ${#need_packages[@]} -gt 0 ]; then
  echo "installing ${need_packages[*]}"
  # No daemon a package brings (slapd, nslcd) is started by its install: the tests start their
  # own. A policy-rc.d already there is the machine's and stays.
  policy=/usr/sbin/policy-rc.d
  made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    made_policy=yes
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_packages[@]}" >/dev/null
  [ -z "$made_policy" ] || $SUDO rm -f "$policy"
fi
# Leave the host's logins alone: libpam-ldapd's install adds pam_ldap to /etc/pam.d/common-*
# (pam-auth-update); the test uses a PAM service of its own. libnss-ldapd's debconf question
# (which nsswitch.conf lines get ldap) has no default, so a noninteractive install leaves
# /etc/nsswitch.conf as it was. nslcd is not a boot-time service here.
if [ -e /usr/share/pam-configs/ldap ] && grep -qs pam_ldap /etc/pam.d/common-auth; then
  $SUDO pam-auth-update --package --remove ldap
fi
if [ -e /etc/init.d/nslcd ]; then
  $SUDO update-rc.d nslcd disable >/dev/null 2>&1 || true
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust with rustup (https://rustup.rs) first" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
mkdir -p target
set +e
cargo test --workspace --no-fail-fast > target/test-output.txt 2>&1
status=$?
set -e
grep -E '^(running|test result|error|failures:|---- )' target/test-output.txt || true
if [ "$status" != 0 ]; then
  grep -B2 -A40 '^failures:' target/test-output.txt | head -300 || tail -100 target/test-output.txt
fi
# One closing line for CI: the totals over every test binary.
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) passed += $i; if ($(i+1) ~ /^failed/) failed += $i } }
     END { printf "%d passed, %d failed\n", passed, failed }' target/test-output.txt
exit "$status"
