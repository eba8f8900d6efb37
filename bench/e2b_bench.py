#!/usr/bin/env python3
"""e2b_bench.py: what the daemon's e2b provider adds to a run, over the E2B double's own time
(issue 11), and what the egress guard adds to one host call. Prints one JSON line per figure;
never asserts a time.

  per snippet   the Run's wall time at the client minus the sum of the double's own handling
                times of the requests that run made (create, files, process stream, delete): the
                daemon's work (JSON, libcurl, parsing, records) plus loopback HTTP hops
  per cell      a JavaScript cell on an open session (one SendInput, the interpreter's stream)
                against a fresh Run of the same code (create, files, stream, delete), both wall
                time at the client against the double, and the daemon's part of the cell (wall
                minus the double's own handling of the cell's requests)
  per host call N sequential POSTs to the guard listener with a live run's guard token (what
                E2B's egress proxy sends), minus N sequential GETs straight to the same upstream
                (fresh connection each, both): the guard's parse, token lookup and the broker

Usage: bench/e2b_bench.py [BUILD_DIR]   (BENCH_E2B_RUNS, default 40; BENCH_E2B_CALLS, default 300)
"""
import hashlib
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
for cand in (os.path.join(ROOT, BUILD, "plimsolld"), os.path.join(ROOT, BUILD, "src", "daemon", "plimsolld")):
    if os.path.exists(cand):
        os.environ.setdefault("PLIMSOLLD", cand)
        break
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
from harness import Daemon, Upstream, js  # noqa: E402
from test_e2b import GUARD_HOST, Double, free_port  # noqa: E402

RUNS = int(os.environ.get("BENCH_E2B_RUNS", "40"))
CALLS = int(os.environ.get("BENCH_E2B_CALLS", "300"))


def pct(v, p):
    v = sorted(v)
    return round(v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))], 3)


def per_snippet():
    dbl = Double()
    try:
        env = dict(dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0", PLIMSOLL_METRICS_ADDR="off")
        with Daemon(env, timeout=120) as d:
            added, wall, own = [], [], []
            for i in range(RUNS + 3):
                dbl.reset()
                t0 = time.perf_counter()
                st, _, data, _ = d.call("Run", js("console.log(1)"))
                w = (time.perf_counter() - t0) * 1000.0
                if st != 200:
                    raise SystemExit("bench: run failed: %s" % data[:200])
                o = sum(r.get("dur_ms", 0.0) for r in dbl.state()["log"] if not r["path"].startswith("/_double"))
                if i >= 3:  # warm-up
                    added.append(w - o), wall.append(w), own.append(o)
        print(json.dumps({"bench": "e2b_snippet_added_ms", "runs": RUNS, "added_p50_ms": pct(added, 0.5),
                          "added_p90_ms": pct(added, 0.9), "wall_p50_ms": pct(wall, 0.5),
                          "double_own_p50_ms": pct(own, 0.5), "goal_p50_ms": 5}))
    finally:
        dbl.close()


def per_cell():
    dbl = Double()
    try:
        env = dict(dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0", PLIMSOLL_METRICS_ADDR="off",
                   SANDBOX_MAX_SESSIONS="2")
        with Daemon(env, timeout=120) as d:
            st, _, data, _ = d.call("OpenSession", {"protocol": 3})
            sid = json.loads(data)["sessionId"]
            cell, added, run = [], [], []
            for i in range(RUNS + 3):
                dbl.reset()
                t0 = time.perf_counter()
                st, _, data, _ = d.call("SessionRun", {"protocol": 3, "sessionId": sid,
                                                       "cell": {"language": "javascript", "code": "console.log(1)"}})
                w = (time.perf_counter() - t0) * 1000.0
                if st != 200:
                    raise SystemExit("bench: cell failed: %s" % data[:200])
                o = sum(r.get("dur_ms", 0.0) for r in dbl.state()["log"] if not r["path"].startswith("/_double"))
                t0 = time.perf_counter()
                st, _, data, _ = d.call("Run", js("console.log(1)"))
                r = (time.perf_counter() - t0) * 1000.0
                if st != 200:
                    raise SystemExit("bench: run failed: %s" % data[:200])
                if i >= 3:  # warm-up (the first cell starts the interpreter)
                    cell.append(w), added.append(w - o), run.append(r)
            d.call("CloseSession", {"protocol": 3, "sessionId": sid})
        print(json.dumps({"bench": "e2b_session_cell_ms", "cells": RUNS, "cell_p50_ms": pct(cell, 0.5),
                          "cell_p90_ms": pct(cell, 0.9), "fresh_run_p50_ms": pct(run, 0.5),
                          "cell_added_p50_ms": pct(added, 0.5)}))
    finally:
        dbl.close()


def timed_calls(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def per_host_call():
    up = Upstream()
    tmp = tempfile.mkdtemp(prefix="plimsoll-e2b-bench-")
    guard_port = free_port()
    dbl = Double({GUARD_HOST: "http://127.0.0.1:%d" % guard_port})
    caller = "bench-e2b-caller-token-0123456789abcdef"
    try:
        clients, grants = os.path.join(tmp, "clients.json"), os.path.join(tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "b", "token_sha256": hashlib.sha256(caller.encode()).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {"base_url": "http://127.0.0.1:%d" % up.port,
                                              "allow": ["GET /v1/items/*"], "allowed_callers": ["b"],
                                              "token": {"type": "static", "env": "ITEMS_TOKEN"},
                                              "max_calls": 100000}}}, f)
        env = dict(dbl.env(), PLIMSOLL_CLIENTS_FILE=clients, PLIMSOLL_GRANTS_FILE=grants, ITEMS_TOKEN="t" * 40,
                   E2B_GUARD_URL="https://%s/v1/e2b/guard" % GUARD_HOST,
                   PLIMSOLL_GUARD_ADDR="127.0.0.1:%d" % guard_port, PLIMSOLL_METRICS_ADDR="off")
        with Daemon(env, timeout=120) as d:
            dbl.reset()
            # a live granted run holds its token while this process drives the guard
            t = threading.Thread(target=lambda: d.call("Run", {"protocol": 3, "timeoutMs": 60000, "javascript": {
                "code": "setTimeout(() => {}, 8000)", "grantProfile": "items"}}, token=caller), daemon=True)
            t.start()
            token = None
            for _ in range(200):
                cr = dbl.state()["creates"]
                if cr:
                    token = cr[0]["network"]["rules"][GUARD_HOST][0]["transform"]["headers"]["X-Plimsoll-E2B-Guard"]
                    break
                time.sleep(0.05)
            body = json.dumps({"method": "GET", "path": "/v1/items/1"})

            def via_guard():
                c = http.client.HTTPConnection("127.0.0.1", guard_port, timeout=30)
                c.request("POST", "/v1/e2b/guard", body, {"X-Plimsoll-E2B-Guard": token,
                                                           "Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                c.close()
                if r.status != 200:
                    raise SystemExit("bench: guard answered %d" % r.status)

            def direct():
                c = http.client.HTTPConnection("127.0.0.1", up.port, timeout=30)
                c.request("GET", "/v1/items/1")
                c.getresponse().read()
                c.close()
            timed_calls(via_guard, 20), timed_calls(direct, 20)
            g, dd = [], []
            for _ in range(CALLS // 50):  # interleaved blocks, so drift hits both sides alike
                g += timed_calls(via_guard, 50)
                dd += timed_calls(direct, 50)
            print(json.dumps({"bench": "e2b_guard_added_per_call_ms", "calls": len(g),
                              "guard_p50_ms": pct(g, 0.5), "direct_p50_ms": pct(dd, 0.5),
                              "added_p50_ms": round(pct(g, 0.5) - pct(dd, 0.5), 3),
                              "guard_p90_ms": pct(g, 0.9), "direct_p90_ms": pct(dd, 0.9)}))
    finally:
        dbl.close()
        up.close()


if __name__ == "__main__":
    per_snippet()
    per_cell()
    per_host_call()
