#!/bin/sh
# Runs inside `unshare --mount --pid --fork --kill-child` (crates/lmdir/tests/nss_pam.rs): the
# mounts below are private to this namespace, so the host's /etc/nslcd.conf, /etc/nsswitch.conf,
# /etc/pam.d and /run are never touched, and nslcd dies with the namespace's first process (this
# script) on every exit path.
#
# $1 is the test's directory: nslcd.conf, nsswitch.conf, pam.d/ and `steps`, one step a line:
# NAME|STANDARD INPUT|COMMAND (`|`, not a tab: read merges consecutive tabs, so an empty input
# would vanish). Each step's output goes to out/NAME, its exit code to out/NAME.rc; nslcd's debug
# log to nslcd.log.
set -eu
dir=$1
# A private /run: nslcd's fixed socket directory /run/nslcd (owned by nslcd, which it runs as),
# and no host nscd socket for getent to ask instead of nslcd.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -m 0755 /run/nslcd
chown nslcd:nslcd /run/nslcd
mount --bind "$dir/nslcd.conf" /etc/nslcd.conf
mount --bind "$dir/nsswitch.conf" /etc/nsswitch.conf
mount --bind "$dir/pam.d" /etc/pam.d

/usr/sbin/nslcd -d > "$dir/nslcd.log" 2>&1 &
nslcd=$!
trap 'kill "$nslcd" 2>/dev/null || true' EXIT
# nslcd listens once it has read its config and dropped privileges; 30 s is a hang guard.
waited=0
while [ ! -S /run/nslcd/socket ]; do
  if ! kill -0 "$nslcd" 2>/dev/null || [ "$waited" -ge 300 ]; then
    echo "nslcd did not start:" >&2
    cat "$dir/nslcd.log" >&2
    exit 1
  fi
  waited=$((waited + 1))
  sleep 0.1
done

mkdir -p "$dir/out"
while IFS='|' read -r name input command; do
  set +e
  printf '%s\n' "$input" | sh -c "$command" > "$dir/out/$name" 2>&1
  echo $? > "$dir/out/$name.rc"
  set -e
done < "$dir/steps"
