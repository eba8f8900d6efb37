#!/usr/bin/env python3
"""module_bench.py: module rows per second through the daemon's docker provider (a module run:
one container, the runner, the worker, one process per row) against the same worker run directly
with `docker run --rm` in the same image, with the same rows, walls (read-only root, no network,
tmpfs) and runtime. Printed, never asserted (bench/README.md).

With runtime `microvm`: rows per second through a microvm daemon (a project VM restored from the
template, the worker and models from its read-only disk; TCG here) against the very same worker
and model binaries run natively on the host from that disk image, loop-mounted read-only (what
the VM costs; needs root, as the microvm provider does).

Usage: bench/module_bench.py [build] [rows] [repeats] [runtime]   (defaults: build 1000 3 runc)
Needs plimsoll/module:latest (scripts/build-images.py --only module) and dockerd; for microvm the
built guest (ninja) and qemu-system-x86.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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
msg = {"protocol": 3, "timeoutMs": 120000,
       "module": {"model": "Lorenz", "rows": [{"values": r} for r in rows], "endTime": END, "step": STEP}}
if runtime == "microvm":
    env = {"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0"}
    disk = os.path.join(HERE, "..", build, "src", "providers", "microvm", "plimsoll-microvm-node.img")
    direct_name = "native, same binaries"
else:
    env = {"SANDBOX_PROVIDER": "docker", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
           "SANDBOX_DOCKER_IMAGE": "plimsoll/snippet:latest", "SANDBOX_DOCKER_PROJECT_IMAGE": "plimsoll/project:latest",
           "SANDBOX_DOCKER_MODULE_IMAGE": IMAGE, "SANDBOX_DOCKER_RUNTIME": runtime}
    direct_name = "docker run --rm"


def direct_docker():
    cmd = ["docker", "run", "--rm", "-i", "--runtime", runtime, "--read-only", "--network", "none",
           "--tmpfs", "/tmp:rw,noexec,mode=1777", "-w", "/tmp", "-u", "61000", IMAGE, "sh", "-c",
           "cat > params.txt && exec /opt/plimsoll/sim-worker --model /models/Lorenz params.txt results.bin "
           "%r %r 8388608" % (END, STEP)]
    r = subprocess.run(cmd, input=params.encode(), capture_output=True)
    assert r.returncode == 0, r.stderr[-300:]


def direct_native(mnt, work):
    """The disk's worker and model on the host (the model's file system is the read-only loop mount)."""
    res = os.path.join(work, "results.bin")
    if os.path.exists(res):
        os.unlink(res)
    r = subprocess.run([os.path.join(mnt, "lib/plimsoll/sim-worker"), "--model",
                        os.path.join(mnt, "lib/plimsoll/models/Lorenz"), os.path.join(work, "params.txt"), res,
                        repr(END), repr(STEP), "8388608"], capture_output=True)
    assert r.returncode == 0, r.stderr[-300:]


daemon_s, direct_s = [], []
work = tempfile.mkdtemp()
mnt = os.path.join(work, "disk")
if runtime == "microvm":
    os.mkdir(mnt)
    with open(os.path.join(work, "params.txt"), "w") as f:
        f.write(params)
    subprocess.run(["mount", "-o", "ro,loop", disk, mnt], check=True)
try:
    with Daemon(env, timeout=900 if runtime == "microvm" else 300) as d:
        for _ in range(repeats):
            t0 = time.monotonic()
            st, _, data, _ = d.call("Run", msg)
            daemon_s.append(time.monotonic() - t0)
            body = json.loads(data)
            assert st == 200 and body["module"]["outcome"] == "PROJECT_OUTCOME_COMPLETED", data[:300]
            t0 = time.monotonic()
            if runtime == "microvm":
                direct_native(mnt, work)
            else:
                direct_docker()
            direct_s.append(time.monotonic() - t0)
finally:
    mounted = runtime == "microvm" and subprocess.run(["umount", mnt]).returncode != 0
    if not mounted:  # never walk a disk that is still mounted
        shutil.rmtree(work, ignore_errors=True)

dm, rm = statistics.median(daemon_s), statistics.median(direct_s)
print("module bench: %d Lorenz rows (end %g, step %g: %d points each), %s, %d alternating pairs"
      % (rows_n, END, STEP, int(END / STEP) + 1, runtime, repeats))
print("  through the daemon:   median %.2f s = %.0f rows/s  (all: %s)" % (dm, rows_n / dm, ", ".join("%.2f" % x for x in daemon_s)))
print("  %-21s median %.2f s = %.0f rows/s  (all: %s)" % (direct_name + ":", rm, rows_n / rm,
                                                      ", ".join("%.2f" % x for x in direct_s)))
print("  daemon / direct wall: %.2f" % (dm / rm))
