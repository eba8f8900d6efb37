#!/usr/bin/env python3
"""session_bench.py: what one cell costs on an open session, against a fresh Run of the same
code on the same provider, side by side in one run (issue 13).

  cell   N sequential SessionRun cells `console.log(1 + 1)` on one open session (quickjs: the
         session's kept worker; docker: the session container's kept node)
  run    N sequential Run calls of the same snippet (quickjs: a fresh single-use worker each;
         docker: a fresh container each, from the warm pool)
  microvm: N cells of each language on one open session (its VM's kept QuickJS and python3
         kernels) against N fresh Runs of the JavaScript snippet, 1.5 s apart (a VM restored
         from the template each, taken from the refilled pool); N defaults to 30 there (TCG).
  docker python: N cells `print(1 + 1)` on the open session against a fresh session opened,
         run once and closed (Run has no python on docker: a fresh sandbox running the same
         code is a fresh session), the latter N/10 times.

Both are measured from this process over HTTP/1.1 on loopback, one connection per call, so the
client's own cost is in both figures alike. Usage: bench/session_bench.py BUILD_DIR [N]
[--docker runc|runsc | --microvm] (docker needs `make images`; take /tmp/plimsoll-docker.lock on a shared
dockerd). Prints one JSON line per figure; never asserts a time.
"""
import json
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
DOCKER = sys.argv[sys.argv.index("--docker") + 1] if "--docker" in sys.argv else None
if DOCKER:
    ARGS = [a for a in ARGS if a != DOCKER]
BUILD = ARGS[0] if ARGS else "build"
MICROVM = "--microvm" in sys.argv
N = int(ARGS[1]) if len(ARGS) > 1 else (30 if MICROVM else 300)
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


def figure(name, xs, provider="quickjs"):
    xs = sorted(xs)
    return {"provider": provider, "what": name, "calls": len(xs), "p50_ms": round(xs[len(xs) // 2], 3),
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


def fresh_session(d, language, code):
    t0 = time.perf_counter()
    st, _, data, _ = d.call("OpenSession", {"protocol": 3, "languages": [language]})
    if st != 200:
        raise SystemExit("bench: OpenSession answered %d: %s" % (st, data[:200]))
    sid = json.loads(data)["sessionId"]
    timed(d, "SessionRun", {"protocol": 3, "sessionId": sid, "cell": {"language": language, "code": code}})
    timed(d, "CloseSession", {"protocol": 3, "sessionId": sid})
    return (time.perf_counter() - t0) * 1000


def main_docker(runtime):
    prov = "docker-" + runtime
    env = {"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": runtime, "PLIMSOLL_INSECURE": "1",
           "SANDBOX_RATE_PER_MIN": "0", "SANDBOX_MAX_SESSIONS": "2", "SANDBOX_MAX_CONCURRENT": "4",
           "SANDBOX_PER_KEY_CONCURRENT": "4"}
    with Daemon(env, timeout=300) as d:
        st, _, data, _ = d.call("OpenSession", {"protocol": 3})
        sid = json.loads(data)["sessionId"]
        jcell = {"protocol": 3, "sessionId": sid, "cell": {"language": "javascript", "code": "console.log(1 + 1)"}}
        pcell = {"protocol": 3, "sessionId": sid, "cell": {"language": "python", "code": "print(1 + 1)"}}
        run = {"protocol": 3, "javascript": {"code": "console.log(1 + 1)"}}
        for _ in range(10):
            timed(d, "SessionRun", jcell)
            timed(d, "SessionRun", pcell)
            timed(d, "Run", run)
        # Not interleaved with the runs: each Run's container is removed in the background
        # afterwards, and that dockerd work would land on whatever call comes next.
        jc, pc, runs = [], [], []
        for _ in range(N):
            jc.append(timed(d, "SessionRun", jcell))
            pc.append(timed(d, "SessionRun", pcell))
        for _ in range(N):
            runs.append(timed(d, "Run", run))
        d.call("CloseSession", {"protocol": 3, "sessionId": sid})
        fresh = [fresh_session(d, "python", "print(1 + 1)") for _ in range(max(3, N // 10))]
    figs = [figure("session_cell_javascript", jc, prov), figure("fresh_run_javascript", runs, prov),
            figure("session_cell_python", pc, prov), figure("fresh_session_python", fresh, prov)]
    for f in figs:
        print(json.dumps(f))
    print(json.dumps({"provider": prov, "what": "js_cell_over_run_p50", "ratio": round(figs[0]["p50_ms"] / figs[1]["p50_ms"], 3)}))
    print(json.dumps({"provider": prov, "what": "python_cell_over_fresh_session_p50",
                      "ratio": round(figs[2]["p50_ms"] / figs[3]["p50_ms"], 3)}))


def main_microvm():
    prov = "microvm"
    env = {"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
           "SANDBOX_MAX_SESSIONS": "2", "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_PER_KEY_CONCURRENT": "4"}
    with Daemon(env, timeout=600) as d:
        st, _, data, _ = d.call("OpenSession", {"protocol": 3})
        sid = json.loads(data)["sessionId"]
        jcell = {"protocol": 3, "sessionId": sid, "cell": {"language": "javascript", "code": "console.log(1 + 1)"}}
        pcell = {"protocol": 3, "sessionId": sid, "cell": {"language": "python", "code": "print(1 + 1)"}}
        run = {"protocol": 3, "javascript": {"code": "console.log(1 + 1)"}}
        for _ in range(5):
            timed(d, "SessionRun", jcell)
            timed(d, "SessionRun", pcell)
        jc, pc, runs = [], [], []
        for _ in range(N):
            jc.append(timed(d, "SessionRun", jcell))
            pc.append(timed(d, "SessionRun", pcell))
        d.call("CloseSession", {"protocol": 3, "sessionId": sid})
        # Not interleaved with the cells: each Run's VM is replaced by a restore in the background,
        # TCG work that would land on whatever call comes next. Spaced 1.5 s apart so the pool has
        # refilled (the fair figure, as microvm_bench.sh's "spaced"); back to back, a Run waits
        # for a restore once the pool of 2 is empty.
        for _ in range(N):
            time.sleep(1.5)
            runs.append(timed(d, "Run", run))
    figs = [figure("session_cell_javascript", jc, prov), figure("session_cell_python", pc, prov),
            figure("fresh_run_javascript", runs, prov)]
    for f in figs:
        print(json.dumps(f))
    print(json.dumps({"provider": prov, "what": "js_cell_over_run_p50", "ratio": round(figs[0]["p50_ms"] / figs[2]["p50_ms"], 3)}))


if __name__ == "__main__":
    if MICROVM:
        main_microvm()
    elif DOCKER:
        main_docker(DOCKER)
    else:
        main()
