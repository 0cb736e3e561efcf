#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then format, lint, unit,
# property and integration tests (including the ones that drive ldap-utils and OpenLDAP slapd).
set -euo pipefail
cd "$(dirname "$0")/.."

need_packages=()
command -v ldapsearch >/dev/null || need_packages+=(ldap-utils)
command -v slapd >/dev/null || [ -x /usr/sbin/slapd ] || need_packages+=(slapd)
# mkpasswd (whois) makes every crypt(3) format libxcrypt has (crates/access/tests/password.rs,
# crates/lmdir/tests/differential_crypt.rs).
command -v mkpasswd >/dev/null || need_packages+=(whois)
# promtool checks the metrics endpoint's exposition (crates/server/tests/monitoring.rs).
command -v promtool >/dev/null || need_packages+=(prometheus)
# HAProxy balances lmdir nodes by their /readyz health check (crates/lmdir/tests/scale_out.rs).
[ -x /usr/sbin/haproxy ] || need_packages+=(haproxy)
# python-ldap and ldap3 drive lmdir as real clients (crates/lmdir/tests/clients.rs).
/usr/bin/python3 -c "import ldap" 2>/dev/null || need_packages+=(python3-ldap)
/usr/bin/python3 -c "import ldap3" 2>/dev/null || need_packages+=(python3-ldap3)
# nslcd with its NSS module and pam_ldap, and SSSD's LDAP provider, driven by getent and pamtester
# in a private mount namespace (crates/lmdir/tests/nss_pam.rs).
for package in nslcd libnss-ldapd libpam-ldapd pamtester sssd-ldap; do
  dpkg -s "$package" >/dev/null 2>&1 || need_packages+=("$package")
done
# Headless Chromium over WebDriver drives the web console (crates/server/tests/console.rs).
command -v chromium >/dev/null || need_packages+=(chromium)
command -v chromedriver >/dev/null || need_packages+=(chromium-driver)
# The UnboundID LDAP SDK's own tools (ldapmodify --useTransaction, --permissiveModify, ldapsearch
# --virtualListView: crates/lmdir/tests/unboundid_tools.rs) run on Java; Maven fetches the SDK.
command -v java >/dev/null || need_packages+=(default-jre-headless)
command -v mvn >/dev/null || need_packages+=(maven)
installed() { dpkg -s "$1" >/dev/null 2>&1; }
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if [ ${#need_packages[@]} -gt 0 ]; then
  echo "installing ${need_packages[*]}"
  # Installing the NSS/PAM clients edits the host's logins. Only the edits of packages new here
  # are undone, so a machine that already uses nslcd or SSSD keeps its setup: libpam-ldapd,
  # libpam-sss and libpam-pwquality add their modules to /etc/pam.d/common-* (pam-auth-update);
  # libnss-sss appends sss to nsswitch.conf's passwd, group, shadow, services and netgroup lines.
  # (libnss-ldapd asks which lines get ldap, with no default: unattended, it changes nothing.)
  new_profiles=()
  installed libpam-ldapd || new_profiles+=(ldap)
  installed libpam-sss || new_profiles+=(sss)
  installed libpam-pwquality || new_profiles+=(pwquality)
  new_daemons=()
  installed nslcd || new_daemons+=(nslcd)
  installed sssd-common || new_daemons+=(sssd)
  nsswitch_before=""
  if ! installed libnss-sss; then
    nsswitch_before=$(mktemp)
    cp /etc/nsswitch.conf "$nsswitch_before"
  fi
  # No daemon a package brings (slapd, nslcd, sssd) is started by its install: the tests start
  # their own. A policy-rc.d already there is the machine's and stays.
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
  if [ ${#new_profiles[@]} -gt 0 ]; then
    $SUDO pam-auth-update --package --remove "${new_profiles[@]}"
  fi
  if [ -n "$nsswitch_before" ]; then
    $SUDO cp "$nsswitch_before" /etc/nsswitch.conf
    rm -f "$nsswitch_before"
  fi
  # Nor do they start at boot.
  for daemon in ${new_daemons[@]+"${new_daemons[@]}"}; do
    $SUDO update-rc.d "$daemon" disable >/dev/null 2>&1 || true
    $SUDO systemctl disable --quiet "$daemon.service" >/dev/null 2>&1 || true
  done
fi
# scim2-tester (PyPI) checks the SCIM endpoint's conformance (crates/server/tests/scim_conformance.rs),
# from a venv of its own under target/ (Debian's python3 needs python3-venv for it).
scim_venv=target/scim-venv
if ! "$scim_venv/bin/python" -c "import scim2_tester, httpx2" 2>/dev/null; then
  /usr/bin/python3 -c "import ensurepip, venv" >/dev/null 2>&1 || {
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  }
  rm -rf "$scim_venv"
  /usr/bin/python3 -m venv "$scim_venv"
  "$scim_venv/bin/pip" install -q 'scim2-tester[httpx2]==0.5.2'
fi
unboundid_jar="$HOME/.m2/repository/com/unboundid/unboundid-ldapsdk/7.0.1/unboundid-ldapsdk-7.0.1.jar"
if [ ! -f "$unboundid_jar" ]; then
  echo "fetching the UnboundID LDAP SDK 7.0.1 from Maven Central"
  mvn -q dependency:get -Dartifact=com.unboundid:unboundid-ldapsdk:7.0.1 >/dev/null
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust with rustup (https://rustup.rs) first" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Disk: a clean clone has had as little as a few hundred MB spare. Incremental caches (2.5 GB
# here) buy nothing on a one-shot build, and each crate's integration tests link into one or
# two binaries (see ARCHITECTURE.md, "Tests"), not one per file.
export CARGO_INCREMENTAL=0

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
