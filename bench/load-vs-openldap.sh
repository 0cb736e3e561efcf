#!/usr/bin/env bash
# Bulk load N generated people into OpenLDAP (slapadd -q, tool-threads 1) and lmdir (lmdir load --quick),
# same LDIF, same 19 indexed attributes; prints wall times, the ratio, DB sizes and peak RSS.
# RUNS=k repeats the pair k times (slapadd, then lmdir, each after a `sync`) and prints every
# round's ratio and the median: the host's speed drifts, so one round is one sample.
# Usage: [PROFILE=standard|large|mixed] [RUNS=1] bench/load-vs-openldap.sh N
source "$(dirname "$0")/common.sh"
PEOPLE="${1:-200000}"
RUNS="${RUNS:-1}"
ensure_packages
build_lmdir

LDIF=$(generated_ldif "$PEOPLE")
ENTRIES=$(grep -c '^dn:' "$LDIF")

# One round: both loads from scratch; prints "slapadd_s slapadd_rss_kib lmdir_s lmdir_rss_kib".
round() {
  rm -rf "$WORK_DIR/openldap-load" "$WORK_DIR/lmdir-load" "$WORK_DIR/lmdir-load.toml"
  SLAPD_CONF=$(write_slapd_config "$WORK_DIR/openldap-load")
  LMDIR_CONF=$(write_lmdir_config "$WORK_DIR/lmdir-load")
  sync; log "OpenLDAP slapadd -q: $ENTRIES entries"
  read -r OPENLDAP_SECONDS OPENLDAP_RSS_KIB < <(measure "$WORK_DIR/slapadd.out" slapadd -q -f "$SLAPD_CONF" -l "$LDIF")
  sync; log "lmdir load --quick"
  read -r LMDIR_SECONDS LMDIR_RSS_KIB < <(measure "$WORK_DIR/lmdir-load.out" "$LMDIR" --config "$LMDIR_CONF" load --quick "$LDIF")
  tail -3 "$WORK_DIR/lmdir-load.out" >&2
}

RATIOS=()
for run in $(seq 1 "$RUNS"); do
  round
  RATIOS+=("$(awk -v o="$OPENLDAP_SECONDS" -v l="$LMDIR_SECONDS" 'BEGIN { printf "%.1f", o / l }')")
  [ "$RUNS" = 1 ] || printf 'round %s: slapadd -q %s s, lmdir load --quick %s s, %sx\n' \
    "$run" "$OPENLDAP_SECONDS" "$LMDIR_SECONDS" "${RATIOS[-1]}"
done

OPENLDAP_MIB=$(db_size_mib "$WORK_DIR/openldap-load/db")
LMDIR_MIB=$(db_size_mib "$WORK_DIR/lmdir-load")
"$LMDIR" --config "$LMDIR_CONF" check > "$WORK_DIR/lmdir-check.out" 2>&1 && CHECK=clean || CHECK="FAILED (see $WORK_DIR/lmdir-check.out)"

printf '\nload of %s entries (%s people, profile %s), %s cores, %s\n' "$ENTRIES" "$PEOPLE" "$PROFILE" "$(nproc)" "$(date -u +%F)"
printf '%-22s %10s %10s %12s\n' "" "seconds" "DB MiB" "peak RSS MiB"
printf '%-22s %10s %10s %12s\n' "OpenLDAP slapadd -q" "$OPENLDAP_SECONDS" "$OPENLDAP_MIB" "$((OPENLDAP_RSS_KIB / 1024))"
printf '%-22s %10s %10s %12s\n' "lmdir load --quick" "$LMDIR_SECONDS" "$LMDIR_MIB" "$((LMDIR_RSS_KIB / 1024))"
awk -v o="$OPENLDAP_SECONDS" -v l="$LMDIR_SECONDS" -v os="$OPENLDAP_MIB" -v ls="$LMDIR_MIB" \
  'BEGIN { printf "speed-up %.1fx   DB size ratio %.2f\n", o / l, ls / os }'
if [ "$RUNS" != 1 ]; then
  printf '%s\n' "${RATIOS[@]}" | sort -n | awk '{ r[NR] = $1 } END { printf "speed-up per round: %s rounds, median %.1fx (min %.1fx, max %.1fx)\n", NR, (NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2), r[1], r[NR] }'
fi
echo "lmdir check: $CHECK"
