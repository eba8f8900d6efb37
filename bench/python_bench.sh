#!/bin/bash
# python_bench.sh: a Python project whose one step is `python3 -c 'import numpy'`, end to end
# through plimsolld, against `docker run --rm <the same project image> python3 -c 'import numpy'`
# with the same walls (no network, read-only root, one CPU, 256 MiB, the run's tmpfs), under runc
# and under runsc, side by side in one run; and the same project through the microvm provider
# (TCG here), against the runsc `docker run` (issue 20). Speed is printed, never asserted.
#   daemon:          one run at a time with a 1 s pause (the warm pool has refilled)
#   docker run --rm: the CLI with the same image, lockdown flags and command
#   step (guest):    the step's own duration_ms as the sandbox reported it (the import alone)
# Prints one JSON line per measurement (client-side wall, p50/p90 in ms) and the ratios.
# Usage: bench/python_bench.sh [build dir, default build]  (N=runs, default 7; MICROVM=0 skips the
# microvm provider, whose startup under TCG takes minutes)
# Needs: dockerd with runsc and the images (scripts/docker-setup.sh), the docker CLI; for
# microvm the built guest (ninja) and qemu-system-x86.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${N:-7}
DAEMON=$BUILD/plimsolld
[ -x "$DAEMON" ] || DAEMON=$BUILD/src/daemon/plimsolld
[ -x "$DAEMON" ] || { echo "python_bench: no plimsolld in $BUILD" >&2; exit 1; }
command -v docker >/dev/null || { echo "python_bench: the docker CLI is needed for the comparison" >&2; exit 1; }
PROJECT_IMAGE=${SANDBOX_DOCKER_PROJECT_IMAGE:-plimsoll/project:latest}

python3 - "$DAEMON" "$N" "$PROJECT_IMAGE" "${MICROVM:-1}" <<'PY'
import http.client, json, os, statistics, subprocess, sys, time

daemon, n, image, microvm = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
seccomp = os.path.abspath("src/providers/docker/seccomp.json")
STEP = "python3 -c 'import numpy'"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def report(name, xs):
    out = {"path": name, "runs": len(xs), "p50_ms": round(pct(xs, 0.5), 1), "p90_ms": round(pct(xs, 0.9), 1),
           "mean_ms": round(statistics.mean(xs), 1)}
    print(json.dumps(out), flush=True)
    return out["p50_ms"]


def start(env_extra, what, wait_s):
    env = {"PATH": os.environ["PATH"], "PLIMSOLL_ADDR": "127.0.0.1:0", "PLIMSOLL_METRICS_ADDR": "off",
           "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0"}
    env.update(env_extra)
    p = subprocess.Popen([daemon], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    for line in p.stderr:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event") == "listening":
            return p, obj["port"]
        if time.monotonic() - t0 > wait_s:
            break
    p.kill()
    raise SystemExit("python_bench: plimsolld did not start (%s)" % what)


def run(port):
    msg = {"protocol": 3, "timeoutMs": 120000, "project": {"steps": [STEP]}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.perf_counter()
    c.request("POST", "/plimsoll.v1.SandboxService/Run", body=json.dumps(msg),
              headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
    r = c.getresponse()
    body = json.loads(r.read())
    ms = (time.perf_counter() - t0) * 1000
    c.close()
    st = (body.get("project") or {}).get("steps") or [{}]
    if r.status != 200 or body["project"].get("outcome") != "PROJECT_OUTCOME_COMPLETED" or st[0].get("exitCode", 0):
        raise SystemExit("python_bench: run failed: %s" % json.dumps(body)[:400])
    return ms, float(st[0].get("durationMs", 0))


def through_daemon(env, name, wait_s):
    p, port = start(env, name, wait_s)
    try:
        run(port)  # warm-up, not counted
        walls, steps = [], []
        for _ in range(n):
            time.sleep(1)
            w, s = run(port)
            walls.append(w)
            steps.append(s)
        return report("daemon " + name, walls), report("step (guest) " + name, steps)
    finally:
        p.terminate()
        p.wait(60)


def docker_cli(runtime):
    cmd = ["docker", "run", "--rm", "--runtime=" + runtime, "--network=none", "--read-only", "--tmpfs",
           "/tmp:rw,nosuid,nodev,noexec,size=64m", "--memory=256m", "--memory-swap=256m", "--cpus=1",
           "--pids-limit=256", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--user=61000:61000"]
    if runtime == "runc":
        cmd.append("--security-opt=seccomp=" + seccomp)
    cmd += [image, "python3", "-c", "import numpy"]
    subprocess.run(cmd, check=True, capture_output=True)  # warm-up
    xs = []
    for _ in range(n):
        time.sleep(1)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        xs.append((time.perf_counter() - t0) * 1000)
    return report("docker run --rm " + runtime, xs)


out = {}
for rt in ("runc", "runsc"):
    d, _ = through_daemon({"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_PROJECT_IMAGE": image,
                           "SANDBOX_DOCKER_RUNTIME": rt}, rt, 300)
    c = docker_cli(rt)
    out[rt] = (d, c)
    print(json.dumps({"ratio": "daemon/docker-run " + rt, "value": round(d / c, 2)}), flush=True)
if microvm:
    d, _ = through_daemon({"SANDBOX_PROVIDER": "microvm"}, "microvm", 900)
    print(json.dumps({"ratio": "microvm daemon/docker-run runsc", "value": round(d / out["runsc"][1], 2)}), flush=True)
PY
