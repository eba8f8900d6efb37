# bench/daemon.sh: sourced by scripts/bench.sh and bench/front_bench.sh. Needs $tmp (a scratch
# directory) and $DAEMON (the plimsolld binary to start).
start_daemon() { # env... ; sets PORT and DPID
    env "$@" PLIMSOLL_ADDR=127.0.0.1:0 PLIMSOLL_METRICS_ADDR=off SANDBOX_RATE_PER_MIN=0 \
        "$DAEMON" 2>"$tmp/daemon.log" &
    DPID=$!
    for _ in $(seq 1 300); do
        PORT=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: o=json.loads(l)
    except ValueError: continue
    if o.get("event")=="listening": print(o["port"]); break' "$tmp/daemon.log" 2>/dev/null || true)
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "bench: daemon did not start" >&2; cat "$tmp/daemon.log" >&2; exit 1
}

stop_daemon() { kill -TERM "$DPID"; wait "$DPID" || true; }
