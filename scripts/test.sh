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
# python-ldap decodes the password policy control (crates/lmdir/tests/ppolicy_python.rs).
/usr/bin/python3 -c 'import ldap' 2>/dev/null || need_packages+=(python3-ldap)
if [ ${#need_packages[@]} -gt 0 ]; then
  echo "installing ${need_packages[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_packages[@]}" >/dev/null
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
