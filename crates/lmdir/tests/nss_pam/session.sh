#!/bin/sh
# Runs inside `unshare --mount --pid --fork --kill-child` (crates/lmdir/tests/nss_pam.rs): the
# mounts below are private to this namespace, so the host's /etc/nsswitch.conf, /etc/pam.d,
# /etc/nslcd.conf, /etc/sssd, /var/lib/sss and /run are never touched, and the daemon dies with
# the namespace's first process (this script) on every exit path.
#
# $1 is the daemon, nslcd or sssd; $2 the test's directory: nsswitch.conf, pam.d/, nslcd.conf or
# sssd.conf, and `steps`, one step a line: NAME|STANDARD INPUT|COMMAND (`|`, not a tab: read
# merges consecutive tabs, so an empty input would vanish; `\n` in the input separates the answers
# to several prompts). Each step's output goes to out/NAME,
# its exit code to out/NAME.rc; the daemon's debug log to daemon.log.
set -eu
daemon=$1
dir=$2
# A private /run: nslcd's fixed socket directory, and no host nscd socket for getent to ask
# instead of the daemon under test.
mount -t tmpfs -o mode=0755 tmpfs /run
mount --bind "$dir/nsswitch.conf" /etc/nsswitch.conf
mount --bind "$dir/pam.d" /etc/pam.d

case "$daemon" in
nslcd)
  # nslcd drops to the nslcd user before it creates its socket.
  mkdir -m 0755 /run/nslcd
  chown nslcd:nslcd /run/nslcd
  mount --bind "$dir/nslcd.conf" /etc/nslcd.conf
  /usr/sbin/nslcd -d > "$dir/daemon.log" 2>&1 &
  sockets=/run/nslcd/socket
  ;;
sssd)
  # SSSD's fixed places: its config directory (sssd.conf must be root's, mode 0600), its cache
  # and the clients' pipes, its logs.
  mkdir -p "$dir/sssd/etc/conf.d" "$dir/sssd/lib/db" "$dir/sssd/lib/pipes/private" \
    "$dir/sssd/lib/mc" "$dir/sssd/lib/pubconf" "$dir/sssd/lib/gpo_cache" "$dir/sssd/log"
  chmod 0700 "$dir/sssd/lib/pipes/private"
  cp "$dir/sssd.conf" "$dir/sssd/etc/sssd.conf"
  chmod 0600 "$dir/sssd/etc/sssd.conf"
  mount --bind "$dir/sssd/etc" /etc/sssd
  mount --bind "$dir/sssd/lib" /var/lib/sss
  mount --bind "$dir/sssd/log" /var/log/sssd
  /usr/sbin/sssd -i -d 3 --logger=stderr > "$dir/daemon.log" 2>&1 &
  sockets="/var/lib/sss/pipes/nss /var/lib/sss/pipes/pam"
  ;;
*)
  echo "unknown daemon $daemon" >&2
  exit 2
  ;;
esac
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT

# The daemon is ready once its sockets exist; 30 s is a hang guard.
waited=0
for socket in $sockets; do
  while [ ! -S "$socket" ]; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge 300 ]; then
      echo "$daemon did not start:" >&2
      cat "$dir/daemon.log" >&2
      exit 1
    fi
    waited=$((waited + 1))
    sleep 0.1
  done
done

mkdir -p "$dir/out"
while IFS='|' read -r name input command; do
  set +e
  printf '%b\n' "$input" | sh -c "$command" > "$dir/out/$name" 2>&1
  echo $? > "$dir/out/$name.rc"
  set -e
done < "$dir/steps"
