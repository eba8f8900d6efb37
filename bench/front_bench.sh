#!/bin/bash
# front_bench.sh: the HTTP front (src/server/gate.h) against an earlier build, side by side in
# one run (docs/decisions.md, "One HTTP layer").
#   PRE=PRE_DAEMON bench/front_bench.sh NEW_DAEMON [LOADGEN]
# PRE is the build to compare with (issue 22: commit 73e76a3, before the gate existed). For
# ROUNDS rounds (default 3) of SECS seconds per line (default 3), alternating PRE, NEW and NEW
# over TLS (a certificate made here with openssl), each daemon runs quickjs and is measured on
# keep-alive connections (bench/loadgen; closed_by_server counts reconnections) for:
#   Describe at c=8 and c=1, a Run refused below its floor (minimumIsolation vm) at c=8, and a
#   quickjs snippet Run at c=1 and c=8.
# Prints one JSON line per measurement, then the medians and the ratios NEW/PRE and TLS/NEW,
# and the load average before and after (the machine is shared). Never asserts a time.
set -euo pipefail
NEW=$1
LG=${2:-build/bench/loadgen}
PRE=${PRE:?set PRE to the plimsolld of the build to compare with}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

. "$(dirname "$0")/daemon.sh" # start_daemon, stop_daemon (on $DAEMON)
label() { sed "s/^{/{\"daemon\":\"$1\",\"line\":\"$2\",/" | tee -a "$tmp/all.jsonl"; }

echo '{}' >"$tmp/describe.json"
echo '{"protocol":3,"javascript":{"code":"console.log(\"hi\", 6*7)"}}' >"$tmp/run.json"
echo '{"protocol":3,"minimumIsolation":"vm","javascript":{"code":"1"}}' >"$tmp/refuse.json"
QJS=(SANDBOX_PROVIDER=quickjs PLIMSOLL_INSECURE=1 SANDBOX_MAX_CONCURRENT=8 SANDBOX_PER_KEY_CONCURRENT=8)
P=/plimsoll.v1.SandboxService

lines() { # label daemon env...
    local l=$1
    DAEMON=$2
    shift 2
    start_daemon "$@"
    "$LG" 127.0.0.1 "$PORT" $P/Describe "$tmp/describe.json" application/json 8 "$SECS" | label "$l" describe_c8
    "$LG" 127.0.0.1 "$PORT" $P/Run "$tmp/refuse.json" application/json 8 "$SECS" 400 | label "$l" refusal_c8
    "$LG" 127.0.0.1 "$PORT" $P/Describe "$tmp/describe.json" application/json 1 "$SECS" | label "$l" describe_c1
    "$LG" 127.0.0.1 "$PORT" $P/Run "$tmp/run.json" application/json 1 "$SECS" | label "$l" run_c1
    "$LG" 127.0.0.1 "$PORT" $P/Run "$tmp/run.json" application/json 8 "$SECS" | label "$l" run_c8
    stop_daemon
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
echo "{\"loadavg_before\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"nproc\":$(nproc)}"
for _ in $(seq 1 "$ROUNDS"); do
    lines pre "$PRE" "${QJS[@]}"
    lines new "$NEW" "${QJS[@]}"
    LOADGEN_TLS_CA=$tmp/cert.pem lines new-tls "$NEW" "${QJS[@]}" PLIMSOLL_TLS_CERT="$tmp/cert.pem" \
        PLIMSOLL_TLS_KEY="$tmp/key.pem"
done
echo "{\"loadavg_after\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
python3 - "$tmp/all.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for d in ("pre", "new", "new-tls"):
    for line in ("describe_c8", "refusal_c8", "describe_c1", "run_c1", "run_c8"):
        rs = [r for r in rows if r["daemon"] == d and r["line"] == line]
        if rs:
            med[d, line] = (statistics.median(r["rps"] for r in rs), statistics.median(r["p50_us"] for r in rs)
                            if "p50_us" in rs[0] else None)
goal = {"describe_c8": 2.0, "refusal_c8": 2.0, "describe_c1": 1.0, "run_c1": 1.0, "run_c8": 1.0}
for line in goal:
    pre, new, tls = med.get(("pre", line)), med.get(("new", line)), med.get(("new-tls", line))
    if not (pre and new and tls):
        continue
    print(json.dumps({"line": line, "pre_rps": pre[0], "new_rps": new[0], "tls_rps": tls[0],
                      "new_over_pre": round(new[0] / pre[0], 2), "goal_new_over_pre": goal[line],
                      "tls_over_new": round(tls[0] / new[0], 2), "goal_tls_over_new": 0.85}))
EOF
