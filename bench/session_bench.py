#!/usr/bin/env python3
"""session_bench.py: what one cell costs on an open session, against a fresh Run of the same
code on the same provider, side by side in one run (issue 13).

  cell   N sequential SessionRun cells `console.log(1 + 1)` on one open session (quickjs: the
         session's kept worker)
  run    N sequential Run calls of the same snippet (quickjs: a fresh single-use worker each)

Both are measured from this process over HTTP/1.1 on loopback, one connection per call, so the
client's own cost is in both figures alike. Usage: bench/session_bench.py BUILD_DIR [N]. Prints
one JSON line per figure; never asserts a time. Docker sessions do not exist in this build.
"""
import json
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 300
for cand in (os.path.join(ROOT, BUILD, "plimsolld"), os.path.join(ROOT, BUILD, "src/daemon/plimsolld")):
    if os.path.exists(cand):
        os.environ.setdefault("PLIMSOLLD", cand)
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
from harness import Daemon  # noqa: E402


def timed(d, proc, msg):
    t0 = time.perf_counter()
    st, _, data, _ = d.call(proc, msg)
    dt = (time.perf_counter() - t0) * 1000
    if st != 200:
        raise SystemExit("bench: %s answered %d: %s" % (proc, st, data[:200]))
    return dt


def figure(name, xs):
    xs = sorted(xs)
    return {"provider": "quickjs", "what": name, "calls": len(xs), "p50_ms": round(xs[len(xs) // 2], 3),
            "p90_ms": round(xs[int(len(xs) * 0.9)], 3), "mean_ms": round(statistics.mean(xs), 3)}


def main():
    env = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
           "SANDBOX_MAX_SESSIONS": "2", "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_PER_KEY_CONCURRENT": "4"}
    with Daemon(env) as d:
        st, _, data, _ = d.call("OpenSession", {"protocol": 3})
        sid = json.loads(data)["sessionId"]
        cell = {"protocol": 3, "sessionId": sid, "cell": {"language": "javascript", "code": "console.log(1 + 1)"}}
        run = {"protocol": 3, "javascript": {"code": "console.log(1 + 1)"}}
        for _ in range(20):  # warm both paths
            timed(d, "SessionRun", cell)
            timed(d, "Run", run)
        cells, runs = [], []
        for _ in range(N):  # alternate, so drift hits both alike
            cells.append(timed(d, "SessionRun", cell))
            runs.append(timed(d, "Run", run))
        d.call("CloseSession", {"protocol": 3, "sessionId": sid})
    c, r = figure("session_cell", cells), figure("fresh_run", runs)
    print(json.dumps(c))
    print(json.dumps(r))
    print(json.dumps({"provider": "quickjs", "what": "cell_over_run_p50", "ratio": round(c["p50_ms"] / r["p50_ms"], 3)}))


if __name__ == "__main__":
    main()
