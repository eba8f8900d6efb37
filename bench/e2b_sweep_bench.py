#!/usr/bin/env python3
"""e2b_sweep_bench.py: what the after-call process sweep (item 46, src/providers/e2b/sweep.c) costs
an e2b session call, on the E2B double: the wall time of a JavaScript cell call at the client, and
the double's own time for each call's sweep stream (process.Process/Start of the sweep program,
from the double's request log). Prints one JSON line per figure; never asserts a time.

Usage: bench/e2b_sweep_bench.py [BUILD_DIR]   (BENCH_E2B_CELLS, default 20)
"""
import json
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
os.environ.setdefault("PLIMSOLLD", os.path.join(BUILD, "src/daemon/plimsolld"))
os.environ.setdefault("PLIMSOLL_CLI", os.path.join(BUILD, "src/cli/plimsoll"))
sys.path.insert(0, os.path.join(ROOT, "tests/blackbox"))
from harness import Daemon  # noqa: E402
from test_e2b import Double  # noqa: E402
from test_e2b_sessions import SESSION_ENV  # noqa: E402


def main():
    n = int(os.environ.get("BENCH_E2B_CELLS", "20"))
    dbl = Double()
    try:
        env = dict(dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0", **SESSION_ENV)
        with Daemon(env, timeout=120) as d:
            _, _, data, _ = d.call("OpenSession", {"protocol": 3})
            sid = json.loads(data)["sessionId"]
            cell = {"protocol": 3, "sessionId": sid, "cell": {"language": "javascript", "code": "1"}}
            d.call("SessionRun", cell)  # the interpreter's start is not a figure here
            dbl.reset()
            walls = []
            for _ in range(n):
                t0 = time.monotonic()
                d.call("SessionRun", cell)
                walls.append((time.monotonic() - t0) * 1000)
            sweeps = [e["dur_ms"] for e in dbl.state()["log"]
                      if e["path"].endswith("/process.Process/Start") and "dur_ms" in e]
            d.call("CloseSession", {"protocol": 3, "sessionId": sid})
    finally:
        dbl.close()
    print(json.dumps({"figure": "e2b_session_cell_wall_ms", "n": len(walls),
                      "median": round(statistics.median(walls), 1)}))
    print(json.dumps({"figure": "e2b_session_sweep_double_ms", "n": len(sweeps),
                      "median": round(statistics.median(sweeps), 1), "min": round(min(sweeps), 1),
                      "max": round(max(sweeps), 1)}))


if __name__ == "__main__":
    main()
