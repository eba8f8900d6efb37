#!/bin/bash
# make bench: loopback figures for bench/README.md, measured side by side in one run.
#  1. Describe and a below-floor refusal (disabled provider) at concurrency 1 and 8;
#  2. quickjs snippet runs at concurrency 1 and 8, against spawning `node -e` with the same snippet;
#  3. one brokered host call against a direct call (grants); 4. with BENCH_DOCKER=1, the docker
#     provider against `docker run --rm` (bench/docker_bench.sh).
# Prints one JSON line per measurement; never asserts a time.
set -euo pipefail
BUILD=${1:-build}
SECS=${BENCH_SECONDS:-5}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

DAEMON=$BUILD/plimsolld
. bench/daemon.sh # start_daemon, stop_daemon

daemon_p50() { # daemon-side duration_us of audit lines with the given outcome
    python3 - "$tmp/daemon.log" "$1" <<'PY'
import json, sys
d = sorted(o["duration_us"] for o in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{"))
           if o.get("event") == "run" and o.get("outcome") == sys.argv[2])
print(json.dumps({"daemon_side": sys.argv[2], "runs": len(d),
                  "p50_us": d[len(d)//2] if d else None, "p99_us": d[int((len(d)-1)*0.99)] if d else None}))
PY
}

LG="$BUILD/bench/loadgen"
echo '{}' >"$tmp/describe.json"
echo '{"protocol":3,"minimumIsolation":"vm","javascript":{"code":"console.log(1)"}}' >"$tmp/refuse.json"

start_daemon
for c in 1 8; do
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Describe "$tmp/describe.json" application/json "$c" "$SECS" 200
done
: >"$tmp/daemon.log.keep"
for c in 1 8; do
    "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Run "$tmp/refuse.json" application/json "$c" "$SECS" 400
done
daemon_p50 refused
stop_daemon

if [ -x "$BUILD/src/providers/quickjs/plimsoll-qjs-worker" ] || grep -q quickjs "$BUILD/build.ninja" 2>/dev/null; then
    SNIPPET='console.log("hi", 6*7)'
    printf '{"protocol":3,"javascript":{"code":%s}}' "$(python3 -c 'import json,sys;print(json.dumps(sys.argv[1]))' "$SNIPPET")" >"$tmp/run.json"
    start_daemon SANDBOX_PROVIDER=quickjs PLIMSOLL_INSECURE=1 SANDBOX_MAX_CONCURRENT=8 SANDBOX_PER_KEY_CONCURRENT=8
    for c in 1 8; do
        "$LG" 127.0.0.1 "$PORT" /plimsoll.v1.SandboxService/Run "$tmp/run.json" application/json "$c" "$SECS" 200
    done
    daemon_p50 exited
    stop_daemon
    if command -v node >/dev/null; then
        python3 - "$SNIPPET" <<'PY'
import json, subprocess, sys, time, concurrent.futures as cf
code = sys.argv[1]
def one(_):
    t = time.perf_counter(); subprocess.run(["node", "-e", code], stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1e6
for c in (1, 8):
    n = 40 if c == 1 else 80
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(c) as ex:
        lat = sorted(ex.map(one, range(n)))
    el = time.perf_counter() - t0
    print(json.dumps({"path": "node -e", "concurrency": c, "requests": n, "rps": round(n / el),
                      "p50_us": round(lat[n // 2]), "p99_us": round(lat[int((n - 1) * 0.99)])}))
PY
    else
        echo '{"path":"node -e","skipped":"node is not installed"}'
    fi
fi

# 3. Grants: the latency the broker adds to one host call, against a direct call to the same
#    loopback upstream (broker core in-process, then end to end through the daemon).
"$BUILD/bench/broker_bench" 3000
# The grant socket's privilege separation (docs/privsep.md): start/stop and one call, in-process.
"$BUILD/bench/guestio_bench" 200 2000
providers=quickjs
[ "${BENCH_DOCKER:-0}" = 1 ] && providers="quickjs docker"
# shellcheck disable=SC2086
python3 bench/grant_bench.py "$BUILD" $providers

# 4. Docker (BENCH_DOCKER=1; needs `make images`): daemon against `docker run --rm`, runc and runsc.
if [ "${BENCH_DOCKER:-0}" = 1 ]; then
    bench/docker_bench.sh "$BUILD"
fi

# 5. e2b (issue 11): the daemon's added latency per snippet over the E2B double's own time, and
#    the egress guard's added latency per host call (bench/e2b_bench.py; needs node and unshare).
python3 bench/e2b_bench.py "$BUILD"
# 6. Sessions (issue 13): a cell on an open quickjs session against a fresh Run of the same code.
python3 bench/session_bench.py "$BUILD" 300
if [ "${BENCH_DOCKER:-0}" = 1 ]; then  # the same on docker sessions (needs `make images`)
    for rt in runc runsc; do
        flock /tmp/plimsoll-docker.lock python3 bench/session_bench.py "$BUILD" 200 --docker "$rt"
    done
fi
# 7. microvm (BENCH_MICROVM=1; root, qemu-system-x86): daemon against `docker run --rm --runtime=runsc`.
if [ "${BENCH_MICROVM:-0}" = 1 ]; then
    bench/microvm_bench.sh "$BUILD"
fi
