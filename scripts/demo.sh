#!/bin/bash
# make demo: the main job on the embedded default. Starts plimsolld with the quickjs provider on a
# free loopback port behind a fresh random token, runs one snippet (output and run card), then the
# same snippet demanding the vm tier (refused before dispatch: no code ran), then stops the daemon.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
DPID=
cleanup() {
    [ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
# The log exists before the daemon does: the background job opens its redirection in its own
# time, and the wait loop below must never read a file that is not there yet.
: >"$tmp/daemon.log"
PLIMSOLL_TOKEN=$(cat "$tmp/token") SANDBOX_PROVIDER=quickjs PLIMSOLL_ADDR=127.0.0.1:0 PLIMSOLL_METRICS_ADDR=off \
    "$BUILD/plimsolld" 2>>"$tmp/daemon.log" &
DPID=$!
PORT=
for _ in $(seq 1 300); do
    PORT=$(sed -n 's/.*"event":"listening","port":\([0-9]*\).*/\1/p' "$tmp/daemon.log" | head -1)
    [ -n "$PORT" ] && break
    kill -0 "$DPID" 2>/dev/null || { echo "demo: plimsolld did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$PORT" ] || { echo "demo: plimsolld did not start in time" >&2; cat "$tmp/daemon.log" >&2; exit 1; }
URL="http://127.0.0.1:$PORT"
SNIPPET='const xs = [1, 2, 3].map(n => n * n); console.log("squares", xs, "sum", xs.reduce((a, b) => a + b));'

echo "== plimsolld is up on $URL (provider quickjs, tier process) =="
"$BUILD/plimsoll" describe --url "$URL" --token-file "$tmp/token"
echo
echo "== plimsoll run: the snippet =="
"$BUILD/plimsoll" run --url "$URL" --token-file "$tmp/token" -e "$SNIPPET"
echo
echo "== plimsoll run --min-isolation vm: the same snippet, demanding a microVM =="
set +e
"$BUILD/plimsoll" run --url "$URL" --token-file "$tmp/token" --min-isolation vm -e "$SNIPPET"
rc=$?
set -e
echo "(exit status $rc: refused before dispatch)"
[ "$rc" -eq 200 ] || { echo "demo: expected the refusal exit status 200" >&2; exit 1; }
echo
echo "== audit lines the daemon wrote =="
grep '"event":"run"' "$tmp/daemon.log" || true
