#!/bin/bash
# front_bench.sh: what the gate's relay costs, side by side in one run (docs/decisions.md).
#   [PRE=PRE_DAEMON] bench/front_bench.sh BASE_DAEMON NEW_DAEMON [LOADGEN]
# (PRE: optionally a third build, e.g. one from before the gate existed, measured the same way)
# For each daemon, alternating BASE/NEW for ROUNDS rounds (default 3) of SECS seconds (default 3):
# Describe at concurrency 1 (disabled provider) and a quickjs snippet Run at concurrency 1 and 8,
# all on keep-alive connections (bench/loadgen reconnects only when the server closes; its
# closed_by_server field counts those). Then NEW with PLIMSOLL_TLS_CERT/_KEY (a certificate made
# here with openssl): the same lines over https, handshake once per connection. One JSON line per
# measurement, labelled; never asserts a time.
set -euo pipefail
BASE=$1 NEW=$2
LG=${3:-build/bench/loadgen}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

. "$(dirname "$0")/daemon.sh" # start_daemon, stop_daemon (on $DAEMON)
label() { sed "s/^{/{\"daemon\":\"$1\",/"; }

echo '{}' >"$tmp/describe.json"
echo '{"protocol":3,"javascript":{"code":"console.log(\"hi\", 6*7)"}}' >"$tmp/run.json"
QJS=(SANDBOX_PROVIDER=quickjs PLIMSOLL_INSECURE=1 SANDBOX_MAX_CONCURRENT=8 SANDBOX_PER_KEY_CONCURRENT=8)

lines() { # label daemon env...
    local l=$1
    DAEMON=$2
    shift 2
    start_daemon "$@"
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Describe "$tmp/describe.json" application/json 1 "$SECS" | label "$l"
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Run "$tmp/run.json" application/json 1 "$SECS" | label "$l"
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Run "$tmp/run.json" application/json 8 "$SECS" | label "$l"
    stop_daemon
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
for r in $(seq 1 "$ROUNDS"); do
    [ -n "${PRE:-}" ] && lines pre "$PRE" "${QJS[@]}"
    lines base "$BASE" "${QJS[@]}"
    lines new "$NEW" "${QJS[@]}"
    LOADGEN_TLS_CA=$tmp/cert.pem lines new-tls "$NEW" "${QJS[@]}" PLIMSOLL_TLS_CERT="$tmp/cert.pem" PLIMSOLL_TLS_KEY="$tmp/key.pem"
done
