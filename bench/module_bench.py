#!/usr/bin/env python3
"""module_bench.py: module rows per second through the daemon's docker provider (a module run:
one container, the runner, the worker, one process per row) against the same worker run directly
with `docker run --rm` in the same image, with the same rows, walls (read-only root, no network,
tmpfs) and runtime. Printed, never asserted (bench/README.md).

Usage: bench/module_bench.py [build] [rows] [repeats] [runtime]   (defaults: build 1000 3 runc)
Needs plimsoll/module:latest (scripts/build-images.py --only module) and dockerd.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
build = sys.argv[1] if len(sys.argv) > 1 else "build"
rows_n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
runtime = sys.argv[4] if len(sys.argv) > 4 else "runc"
os.environ.setdefault("PLIMSOLLD", os.path.join(HERE, "..", build, "src", "daemon", "plimsolld"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "blackbox"))
from harness import Daemon  # noqa: E402

IMAGE = "plimsoll/module:latest"
END, STEP = 1, 0.01
rows = [[1 + i / rows_n, 1, 1] for i in range(rows_n)]
params = "".join(" ".join(repr(v) for v in r) + "\n" for r in rows)
env = {"SANDBOX_PROVIDER": "docker", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
       "SANDBOX_DOCKER_IMAGE": "plimsoll/snippet:latest", "SANDBOX_DOCKER_PROJECT_IMAGE": "plimsoll/project:latest",
       "SANDBOX_DOCKER_MODULE_IMAGE": IMAGE, "SANDBOX_DOCKER_RUNTIME": runtime}
msg = {"protocol": 3, "timeoutMs": 120000,
       "module": {"model": "Lorenz", "rows": [{"values": r} for r in rows], "endTime": END, "step": STEP}}

daemon_s, direct_s = [], []
with Daemon(env, timeout=300) as d:
    for _ in range(repeats):
        t0 = time.monotonic()
        st, _, data, _ = d.call("Run", msg)
        daemon_s.append(time.monotonic() - t0)
        body = json.loads(data)
        assert st == 200 and body["module"]["outcome"] == "PROJECT_OUTCOME_COMPLETED", data[:300]
        cmd = ["docker", "run", "--rm", "-i", "--runtime", runtime, "--read-only", "--network", "none",
               "--tmpfs", "/tmp:rw,noexec,mode=1777", "-w", "/tmp", "-u", "61000", IMAGE, "sh", "-c",
               "cat > params.txt && exec /opt/plimsoll/sim-worker --model /models/Lorenz params.txt results.bin "
               "%r %r 8388608" % (END, STEP)]
        t0 = time.monotonic()
        r = subprocess.run(cmd, input=params.encode(), capture_output=True)
        direct_s.append(time.monotonic() - t0)
        assert r.returncode == 0, r.stderr[-300:]

dm, rm = statistics.median(daemon_s), statistics.median(direct_s)
print("module bench: %d Lorenz rows (end %g, step %g: %d points each), %s, %d alternating pairs"
      % (rows_n, END, STEP, int(END / STEP) + 1, runtime, repeats))
print("  through the daemon:   median %.2f s = %.0f rows/s  (all: %s)" % (dm, rows_n / dm, ", ".join("%.2f" % x for x in daemon_s)))
print("  docker run --rm:      median %.2f s = %.0f rows/s  (all: %s)" % (rm, rows_n / rm, ", ".join("%.2f" % x for x in direct_s)))
print("  daemon / direct wall: %.2f" % (dm / rm))
