#!/bin/sh
# check.sh SRC BUILD: the packaging checks (issue 14 §8), run by `meson test packaging`.
# - the man pages lint clean (mandoc -T lint, style level) and render with man -l without warnings;
# - plimsolld(8) describes every variable `plimsolld -h` lists;
# - sysusers.d and tmpfiles.d files apply to an empty root;
# - scripts/install.sh stages a complete tree; the staged daemon finds its helpers beside itself
#   and proves the quickjs provider;
# - systemd-analyze verify accepts the installed unit (and refuses a broken one, so the verify
#   itself is known to work here).
# A missing tool is a failure, never a skip: install-deps.sh installs mandoc, man-db and systemd.
set -eu
src=$1
build=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in mandoc man systemd-analyze systemd-sysusers systemd-tmpfiles python3; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done
tmp=$(mktemp -d /tmp/plimsoll-packaging-XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM

# 1. man pages
out=$(mandoc -T lint -W style "$src/man/plimsolld.8" "$src/man/plimsoll.1" 2>&1) || fail "mandoc -T lint: $out"
[ -z "$out" ] || fail "mandoc -T lint: $out"
long=$(awk 'length > 80 { print FILENAME ":" FNR }' "$src/man/plimsolld.8" "$src/man/plimsoll.1")
[ -z "$long" ] || fail "man page source lines over 80 characters: $long"
for page in "$src/man/plimsolld.8" "$src/man/plimsoll.1"; do
    warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >"$tmp/rendered") || fail "man -l $page failed: $warn"
    [ -z "$warn" ] || fail "man -l $page: $warn"
    [ "$(wc -l <"$tmp/rendered")" -gt 40 ] || fail "man -l $page rendered almost nothing"
    echo "ok man page $(basename "$page"): mandoc lint clean, man -l $(wc -l <"$tmp/rendered") lines"
done
"$build/src/daemon/plimsolld" -h >"$tmp/help" 2>&1 || true
vars=$(awk '/^  [A-Z][A-Z0-9_]+ /{print $1}' "$tmp/help")
[ "$(echo "$vars" | wc -l)" -gt 20 ] || fail "plimsolld -h listed too few variables"
missing=
for v in $vars; do
    grep -q "$v" "$src/man/plimsolld.8" || missing="$missing $v"
done
[ -z "$missing" ] || fail "plimsolld(8) does not describe:$missing"
echo "ok plimsolld(8) describes all $(echo "$vars" | wc -l) variables of plimsolld -h"

# 2. sysusers.d and tmpfiles.d on an empty root
root="$tmp/root"
mkdir -p "$root/etc"
systemd-sysusers --root="$root" - <"$src/contrib/sysusers.d/plimsoll.conf" >/dev/null 2>&1 ||
    fail "systemd-sysusers refused contrib/sysusers.d/plimsoll.conf"
grep -q '^plimsoll:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$root/etc/passwd" || fail "no plimsoll user made"
systemd-tmpfiles --root="$root" --create - <"$src/contrib/tmpfiles.d/plimsoll.conf" >/dev/null 2>&1 ||
    fail "systemd-tmpfiles refused contrib/tmpfiles.d/plimsoll.conf"
gid=$(awk -F: '$1=="plimsoll"{print $3}' "$root/etc/group")
[ "$(stat -c '%a %u %g' "$root/etc/plimsoll")" = "750 0 $gid" ] || fail "/etc/plimsoll is not 0750 root:plimsoll"
echo "ok sysusers.d and tmpfiles.d apply (user plimsoll, /etc/plimsoll 0750 root:plimsoll)"

# 3. the install tree
stage="$tmp/stage"
DESTDIR="$stage" PREFIX=/usr "$src/scripts/install.sh" "$build" >/dev/null
for f in usr/libexec/plimsoll/plimsolld usr/libexec/plimsoll/plimsoll-qjs-worker usr/libexec/plimsoll/plimsoll-guestio \
    usr/bin/plimsoll usr/share/man/man8/plimsolld.8 usr/share/man/man1/plimsoll.1 \
    usr/lib/systemd/system/plimsolld.service usr/lib/sysusers.d/plimsoll.conf usr/lib/tmpfiles.d/plimsoll.conf \
    usr/share/doc/plimsoll/plimsolld.env.example etc/plimsoll/plimsolld.env; do
    [ -e "$stage/$f" ] || fail "install did not produce /$f"
done
[ "$(readlink "$stage/usr/sbin/plimsolld")" = /usr/libexec/plimsoll/plimsolld ] || fail "sbin/plimsolld link is wrong"
echo "keep" >"$stage/etc/plimsoll/plimsolld.env"
DESTDIR="$stage" PREFIX=/usr "$src/scripts/install.sh" "$build" >/dev/null
[ "$(cat "$stage/etc/plimsoll/plimsolld.env")" = keep ] || fail "install overwrote an existing plimsolld.env"
echo "ok install tree complete; an existing environment file is kept"
# the staged daemon, started from its own directory, proves quickjs with the staged helpers
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env -i PATH=/usr/bin:/bin SANDBOX_PROVIDER=quickjs PLIMSOLL_INSECURE=1 PLIMSOLL_ADDR="127.0.0.1:$port" \
    PLIMSOLL_METRICS_ADDR="127.0.0.1:$mport" "$stage/usr/libexec/plimsoll/plimsolld" 2>"$tmp/daemon.log" &
pid=$!
ready=no
for _ in $(seq 1 100); do
    if python3 -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:$port/readyz', timeout=1).status != 200)" 2>/dev/null; then
        ready=yes
        break
    fi
    sleep 0.1
done
[ "$ready" = yes ] || fail "the installed plimsolld did not become ready: $(tail -5 "$tmp/daemon.log")"
kill "$pid"
wait "$pid" || fail "the installed plimsolld did not stop cleanly on SIGTERM"
pid=
echo "ok the installed plimsolld proves quickjs and stops cleanly"

# 4. systemd-analyze verify on the installed unit (ExecStart pointed at the staged binary, since
# the staged sbin link names the final /usr/libexec path,
# the staged man pages on MANPATH for Documentation=)
unit="$tmp/unit/plimsolld.service"
mkdir -p "$tmp/unit"
sed -e "s|^ExecStart=.*|ExecStart=$stage/usr/libexec/plimsoll/plimsolld|" \
    -e "s|^EnvironmentFile=.*|EnvironmentFile=$stage/etc/plimsoll/plimsolld.env|" \
    "$stage/usr/lib/systemd/system/plimsolld.service" >"$unit"
MANPATH="$stage/usr/share/man" systemd-analyze verify "$unit" >"$tmp/verify" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$tmp/verify")"
[ ! -s "$tmp/verify" ] || fail "systemd-analyze verify warned: $(cat "$tmp/verify")"
sed -i "s|^ExecStart=.*|ExecStart=$tmp/nonexistent/plimsolld|" "$unit"
if MANPATH="$stage/usr/share/man" systemd-analyze verify "$unit" >/dev/null 2>&1; then
    fail "systemd-analyze verify accepted a unit whose ExecStart does not exist: the check proves nothing here"
fi
echo "ok systemd-analyze verify accepts plimsolld.service (and refuses a broken copy)"
