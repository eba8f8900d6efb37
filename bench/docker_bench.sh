#!/bin/bash
# docker_bench.sh: one snippet end to end through plimsolld's docker provider, against
# `docker run --rm` of the same image and code, under runc and under runsc, side by side in one
# run (issue 5: goal <= 0.5x the CLI under runc, <= 0.7x under runsc).
#   daemon, spaced:        one run at a time with a 1 s pause (an agent's interactive pace; the
#                          warm pool has refilled)
#   daemon, back to back:  one run at a time, no pause (the pool drains; cold starts show)
#   docker run --rm:       the CLI with the same lockdown flags, image and code, on stdin
# Prints one JSON line per measurement (client-side wall time, p50/p90 in ms) and the ratios.
# Usage: bench/docker_bench.sh [build dir, default build]   (N=runs per measurement, default 15)
# Needs: dockerd with runsc registered and the images (scripts/docker-setup.sh), the docker CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${N:-15}
DAEMON=$BUILD/plimsolld
[ -x "$DAEMON" ] || DAEMON=$BUILD/src/daemon/plimsolld
[ -x "$DAEMON" ] || { echo "docker_bench: no plimsolld in $BUILD" >&2; exit 1; }
command -v docker >/dev/null || { echo "docker_bench: the docker CLI is needed for the comparison" >&2; exit 1; }
IMAGE=${SANDBOX_DOCKER_IMAGE:-plimsoll/snippet:latest}
PROJECT_IMAGE=${SANDBOX_DOCKER_PROJECT_IMAGE:-plimsoll/project:latest}
CODE='console.log("hi",1+2)'

python3 - "$DAEMON" "$N" "$IMAGE" "$PROJECT_IMAGE" "$CODE" <<'PY'
import http.client, json, os, statistics, subprocess, sys, time

daemon, n, image, project_image, code = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
seccomp = os.path.abspath("src/providers/docker/seccomp.json")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def report(name, xs):
    out = {"path": name, "runs": len(xs), "p50_ms": round(pct(xs, 0.5), 1), "p90_ms": round(pct(xs, 0.9), 1),
           "mean_ms": round(statistics.mean(xs), 1)}
    print(json.dumps(out), flush=True)
    return out["p50_ms"]


def start(runtime):
    env = {"PATH": os.environ["PATH"], "PLIMSOLL_ADDR": "127.0.0.1:0", "PLIMSOLL_METRICS_ADDR": "off",
           "SANDBOX_PROVIDER": "docker", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
           "SANDBOX_DOCKER_IMAGE": image, "SANDBOX_DOCKER_PROJECT_IMAGE": project_image}
    if runtime:
        env["SANDBOX_DOCKER_RUNTIME"] = runtime
    p = subprocess.Popen([daemon], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event") == "listening":
            return p, obj["port"]
    raise SystemExit("docker_bench: plimsolld did not start (%s)" % (runtime or "runc"))


def one_run(port):
    body = json.dumps({"protocol": 3, "javascript": {"code": code}})
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/plimsoll.v1.SandboxService/Run", body,
              {"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
    r = c.getresponse()
    data = r.read()
    c.close()
    ms = (time.perf_counter() - t) * 1000
    if r.status != 200 or b'"stdout":"aGkgMwo="' not in data:
        raise SystemExit("docker_bench: bad answer %d %s" % (r.status, data[:200]))
    return ms


def cli_run(runtime):
    args = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--memory", "256m", "--memory-swap", "256m",
            "--pids-limit", "256", "--cpus", "1", "--tmpfs", "/tmp:rw,noexec,nosuid,size=16m",
            "--user", "61000:61000", "--log-driver", "none", "--entrypoint", "/usr/bin/node"]
    if runtime:
        args += ["--runtime", runtime]
    else:
        args += ["--security-opt", "seccomp=" + seccomp]
    args += [image, "-"]
    t = time.perf_counter()
    r = subprocess.run(args, input=code.encode(), capture_output=True)
    ms = (time.perf_counter() - t) * 1000
    if r.returncode != 0 or r.stdout != b"hi 3\n":
        raise SystemExit("docker_bench: docker run failed: %s" % r.stderr[:300])
    return ms


ratios = {}
for runtime in ("", "runsc"):
    label = runtime or "runc"
    p, port = start(runtime)
    try:
        time.sleep(3)  # the warm pool fills after the startup proof
        one_run(port)
        spaced = []
        for _ in range(n):
            time.sleep(1)
            spaced.append(one_run(port))
        b2b = [one_run(port) for _ in range(n)]
    finally:
        p.terminate()
        p.wait(120)
    cli = [cli_run(runtime) for _ in range(n)]
    d1 = report("plimsolld %s, spaced" % label, spaced)
    d2 = report("plimsolld %s, back to back" % label, b2b)
    c = report("docker run --rm%s" % (" --runtime=runsc" if runtime else ""), cli)
    ratios[label] = {"spaced": round(d1 / c, 3), "back_to_back": round(d2 / c, 3),
                     "goal": 0.7 if runtime else 0.5}
print(json.dumps({"ratio_daemon_to_cli_p50": ratios}))
PY
