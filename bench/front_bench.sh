#!/bin/bash
# front_bench.sh: what the gate's relay costs, side by side in one run (docs/decisions.md).
#   bench/front_bench.sh BASE_DAEMON NEW_DAEMON [LOADGEN]
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
DPID=
trap '[ -n "$DPID" ] && kill "$DPID" 2>/dev/null; rm -rf "$tmp"' EXIT

start_daemon() { # daemon env... ; sets PORT, DPID
    local bin=$1
    shift
    env "$@" PLIMSOLL_ADDR=127.0.0.1:0 PLIMSOLL_METRICS_ADDR=off SANDBOX_RATE_PER_MIN=0 "$bin" 2>"$tmp/daemon.log" &
    DPID=$!
    PORT=
    for _ in $(seq 1 300); do
        PORT=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: o=json.loads(l)
    except ValueError: continue
    if o.get("event")=="listening": print(o["port"]); break' "$tmp/daemon.log" 2>/dev/null || true)
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "front_bench: daemon did not start" >&2
    cat "$tmp/daemon.log" >&2
    exit 1
}
stop_daemon() { kill -TERM "$DPID"; wait "$DPID" || true; DPID=; }
label() { sed "s/^{/{\"daemon\":\"$1\",/"; }

echo '{}' >"$tmp/describe.json"
echo '{"protocol":3,"javascript":{"code":"console.log(\"hi\", 6*7)"}}' >"$tmp/run.json"
QJS=(SANDBOX_PROVIDER=quickjs PLIMSOLL_INSECURE=1 SANDBOX_MAX_CONCURRENT=8 SANDBOX_PER_KEY_CONCURRENT=8)

lines() { # label daemon env...
    local l=$1 bin=$2
    shift 2
    start_daemon "$bin" "$@"
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Describe "$tmp/describe.json" application/json 1 "$SECS" | label "$l"
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Run "$tmp/run.json" application/json 1 "$SECS" | label "$l"
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Run "$tmp/run.json" application/json 8 "$SECS" | label "$l"
    stop_daemon
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
for r in $(seq 1 "$ROUNDS"); do
    lines base "$BASE" "${QJS[@]}"
    lines new "$NEW" "${QJS[@]}"
    LOADGEN_TLS_CA=$tmp/cert.pem lines new-tls "$NEW" "${QJS[@]}" PLIMSOLL_TLS_CERT="$tmp/cert.pem" PLIMSOLL_TLS_KEY="$tmp/key.pem"
done
