#!/bin/bash
# microvm_bench.sh: one snippet end to end through plimsolld's microvm provider, against
# `docker run --rm --runtime=runsc` of the same code, side by side in one run (issue 10: goals
# spaced p50 <= 0.25x that CLI; >= 2 snippet runs/s sustained on 2 cores under TCG).
#   daemon, spaced:        one run at a time with a 1 s pause (the pool has refilled)
#   daemon, back to back:  one run at a time, no pause (the pool drains; restores show)
#   daemon, sustained:     back-to-back runs for BENCH_SECONDS, as runs/s
#   daemon, project:       a project whose one step is `node -e 1` (node from the project VMs'
#                          read-only disk), spaced: wall and the step's own time in the guest
#   docker run --rm --runtime=runsc: the docker provider's lockdown flags, snippet image, same code
# Also prints the startup figures the card was proven with (template boot, save, one restore).
# Prints one JSON line per measurement; never asserts a time.
# Usage: bench/microvm_bench.sh [build dir, default build]   (N=runs per measurement, default 15)
# Needs: root, qemu-system-x86; for the comparison dockerd with runsc and the snippet image
# (scripts/docker-setup.sh). Without docker the comparison line says why and is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${N:-15}
SECS=${BENCH_SECONDS:-20}
DAEMON=$BUILD/plimsolld
[ -x "$DAEMON" ] || DAEMON=$BUILD/src/daemon/plimsolld
[ -x "$DAEMON" ] || { echo "microvm_bench: no plimsolld in $BUILD" >&2; exit 1; }
IMAGE=${SANDBOX_DOCKER_IMAGE:-plimsoll/snippet:latest}
CODE='console.log("hi",1+2)'

python3 - "$DAEMON" "$N" "$SECS" "$IMAGE" "$CODE" <<'PY'
import http.client, json, os, statistics, subprocess, sys, time

daemon, n, secs, image, code = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def report(name, xs):
    out = {"path": name, "runs": len(xs), "p50_ms": round(pct(xs, 0.5), 1), "p90_ms": round(pct(xs, 0.9), 1),
           "mean_ms": round(statistics.mean(xs), 1)}
    print(json.dumps(out), flush=True)
    return out["p50_ms"]


def start():
    env = {"PATH": os.environ["PATH"], "PLIMSOLL_ADDR": "127.0.0.1:0", "PLIMSOLL_METRICS_ADDR": "off",
           "SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0"}
    t = time.perf_counter()
    p = subprocess.Popen([daemon], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event") == "listening":
            print(json.dumps({"path": "plimsolld microvm startup (accelerator choice, template, proof)",
                              "ms": round((time.perf_counter() - t) * 1000)}), flush=True)
            return p, obj["port"]
    raise SystemExit("microvm_bench: plimsolld did not start")


def call(port, proc, msg):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/plimsoll.v1.SandboxService/" + proc, json.dumps(msg),
              {"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def one_run(port):
    t = time.perf_counter()
    st, data = call(port, "Run", {"protocol": 3, "javascript": {"code": code}})
    ms = (time.perf_counter() - t) * 1000
    if st != 200 or b'"stdout":"aGkgMwo="' not in data:
        raise SystemExit("microvm_bench: bad answer %d %s" % (st, data[:200]))
    return ms


def cli_run():
    args = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--memory", "256m", "--memory-swap", "256m",
            "--pids-limit", "256", "--cpus", "1", "--tmpfs", "/tmp:rw,noexec,nosuid,size=16m",
            "--user", "61000:61000", "--log-driver", "none", "--runtime", "runsc",
            "--entrypoint", "/usr/bin/node", image, "-"]
    t = time.perf_counter()
    r = subprocess.run(args, input=code.encode(), capture_output=True)
    ms = (time.perf_counter() - t) * 1000
    if r.returncode != 0 or r.stdout != b"hi 3\n":
        raise SystemExit("microvm_bench: docker run failed: %s" % r.stderr[:300])
    return ms


p, port = start()
try:
    st, data = call(port, "Describe", {})
    ev = json.loads(data).get("evidence", {})
    print(json.dumps({"path": "card", "runtime": ev.get("runtime"),
                      "accelerator": [c for c in ev.get("confinement", []) if c.startswith("accelerator")]}),
          flush=True)
    time.sleep(5)  # the pool fills after the startup proof
    one_run(port)
    spaced = []
    for _ in range(n):
        time.sleep(1)
        spaced.append(one_run(port))
    b2b = [one_run(port) for _ in range(n)]
    t0 = time.perf_counter()
    k = 0
    while time.perf_counter() - t0 < secs:
        one_run(port)
        k += 1
    rate = k / (time.perf_counter() - t0)
    proj_wall, proj_step = [], []
    for _ in range(max(3, n // 3)):
        time.sleep(1)
        t = time.perf_counter()
        st, data = call(port, "Run", {"protocol": 3, "project": {"files": [], "steps": ["node -e 1"]}})
        proj_wall.append((time.perf_counter() - t) * 1000)
        steps = json.loads(data).get("project", {}).get("steps", []) if st == 200 else []
        if st != 200 or len(steps) != 1 or steps[0].get("exitCode", 0) != 0:
            raise SystemExit("microvm_bench: bad project answer %d %s" % (st, data[:300]))
        proj_step.append(float(steps[0].get("durationMs", 0)))
finally:
    p.terminate()
    p.wait(120)
d1 = report("plimsolld microvm, spaced", spaced)
d2 = report("plimsolld microvm, back to back", b2b)
print(json.dumps({"path": "plimsolld microvm, sustained back to back", "seconds": secs, "runs": k,
                  "runs_per_s": round(rate, 2), "goal_runs_per_s": 2}), flush=True)
report("plimsolld microvm project `node -e 1`, spaced, wall", proj_wall)
report("plimsolld microvm project `node -e 1`, the step in the guest", proj_step)
have_docker = subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0
if not have_docker:
    print(json.dumps({"path": "docker run --rm --runtime=runsc", "skipped": "no docker or no %s image" % image}))
    sys.exit(0)
cli = [cli_run() for _ in range(n)]
c = report("docker run --rm --runtime=runsc", cli)
print(json.dumps({"ratio_daemon_to_runsc_cli_p50": {"spaced": round(d1 / c, 3), "back_to_back": round(d2 / c, 3),
                                                    "goal_spaced": 0.25}}))
PY
