#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time: scripts/fuzz.sh [seconds-per-target]
# Installs cargo-fuzz when missing. cargo fuzz needs a nightly compiler (sanitizer flags); without
# one installed, stable is used with RUSTC_BOOTSTRAP=1, which unlocks the same flags.
# Crashes land in fuzz/artifacts/<target>/; the script exits non-zero if any target crashed.
set -euo pipefail

seconds_per_target="${1:-60}"
repository="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repository/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    export RUSTC_BOOTSTRAP=1
    toolchain=(+stable)
fi

# Targets to run: all, or those named in FUZZ_TARGETS (space-separated).
targets=(${FUZZ_TARGETS:-pdu filter dn ldif entry controls control_values sync_control sync_cookie})
cargo "${toolchain[@]}" fuzz build -O

failed=()
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    # Seeds: the regression inputs and, for LDIF, the conformance data.
    if [ -d "seeds/$target" ]; then
        cp -n seeds/"$target"/* "corpus/$target/" 2>/dev/null || true
    fi
    echo "=== fuzzing $target for ${seconds_per_target}s"
    if ! cargo "${toolchain[@]}" fuzz run -O "$target" "corpus/$target" -- \
        -max_total_time="$seconds_per_target" -max_len=65536 -rss_limit_mb=2048 -timeout=10; then
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "all fuzz targets ran ${seconds_per_target}s without a crash"
