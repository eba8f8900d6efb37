#!/bin/bash
# docker_bench.sh: one snippet end to end through plimsolld's docker provider, against
# `docker run --rm` of the same image and code, under runc, under runsc (Debian trixie's gVisor,
# systrap) and under runsc-bookworm (bookworm's gVisor, ptrace), side by side in one run (issue 5:
# goal <= 0.5x the CLI under runc, <= 0.7x under runsc; issue 26: the old and new gVisor).
#   daemon, spaced:        one run at a time with a 1 s pause (an agent's interactive pace; the
#                          warm pool has refilled)
#   daemon, back to back:  one run at a time, no pause (the pool drains; cold starts show)
#   docker run --rm:       the CLI with the same lockdown flags, image and code, on stdin
#   syscall-heavy:         through the daemon, a snippet that writes 10,000 small files in the
#                          sandbox's /tmp tmpfs (open/write/close each: ~30,000 guest syscalls),
#                          under both gVisor; client wall and the snippet's own elapsed time
# Prints one JSON line per measurement (client-side wall time, p50/p90 in ms) and the ratios.
# Usage: bench/docker_bench.sh [build dir, default build]   (N=runs per measurement, default 15)
# Needs: dockerd with runsc and runsc-bookworm registered and the images (scripts/docker-setup.sh),
# the docker CLI. RUNTIMES="runc runsc runsc-bookworm" (the default) chooses which to measure.
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

RUNTIMES=${RUNTIMES:-runc runsc runsc-bookworm}
SYSCALL_CODE='const fs=require("fs"),t=process.hrtime.bigint();for(let i=0;i<10000;i++)fs.writeFileSync("/tmp/f"+(i%64),"x".repeat(16));console.log("w",Number(process.hrtime.bigint()-t)/1e6)'

python3 - "$DAEMON" "$N" "$IMAGE" "$PROJECT_IMAGE" "$CODE" "$RUNTIMES" "$SYSCALL_CODE" <<'PY'
import base64, http.client, json, os, statistics, subprocess, sys, time

daemon, n, image, project_image, code = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runtimes, syscall_code = sys.argv[6].split(), sys.argv[7]
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


def one_run(port, src=None):
    body = json.dumps({"protocol": 3, "timeoutMs": 30000 if src else 5000, "javascript": {"code": src or code}})
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/plimsoll.v1.SandboxService/Run", body,
              {"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
    r = c.getresponse()
    data = r.read()
    c.close()
    ms = (time.perf_counter() - t) * 1000
    if src:  # the syscall-heavy snippet: (client wall, the snippet's own elapsed ms)
        out = base64.b64decode(json.loads(data).get("javascript", {}).get("stdout", "")) if r.status == 200 else b""
        if not out.startswith(b"w "):
            raise SystemExit("docker_bench: bad answer %d %s" % (r.status, data[:300]))
        return ms, float(out.split()[1])
    if r.status != 200 or b'"stdout":"aGkgMwo="' not in data:
        raise SystemExit("docker_bench: bad answer %d %s" % (r.status, data[:200]))
    return ms


def cli_run(runtime):
    args = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--memory", "256m", "--memory-swap", "256m",
            "--pids-limit", "256", "--cpus", "1", "--tmpfs", "/tmp:rw,noexec,nosuid,size=16m",
            "--user", "61000:61000", "--log-driver", "none", "--entrypoint", "/usr/bin/node"]
    if runtime != "runc":
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


# All daemons up at once, and the independent measurements interleaved round by round (one run
# per runtime per round), so a change in the machine's load hits every runtime alike. Back to
# back runs drain a daemon's pool, so they go in one block per runtime, in turn.
daemons = {rt: start(rt) for rt in runtimes}
spaced, b2b, cli, heavy = ({rt: [] for rt in runtimes} for _ in range(4))
try:
    time.sleep(3)  # the warm pools fill after the startup proofs
    for rt in runtimes:
        one_run(daemons[rt][1])
    for _ in range(n):
        for rt in runtimes:
            time.sleep(1.0 / len(runtimes))  # each daemon sees ~1 s between its runs
            spaced[rt].append(one_run(daemons[rt][1]))
    for rt in runtimes:
        time.sleep(2)
        b2b[rt] = [one_run(daemons[rt][1]) for _ in range(n)]
    for _ in range(max(3, n // 3)):
        for rt in runtimes:
            if rt != "runc":
                time.sleep(1)
                heavy[rt].append(one_run(daemons[rt][1], syscall_code))
finally:
    for p, _ in daemons.values():
        p.terminate()
    for p, _ in daemons.values():
        p.wait(120)
for _ in range(n):
    for rt in runtimes:
        cli[rt].append(cli_run(rt))
ratios, p50 = {}, {}
for rt in runtimes:
    m = p50[rt] = {"spaced": report("plimsolld %s, spaced" % rt, spaced[rt]),
                   "back_to_back": report("plimsolld %s, back to back" % rt, b2b[rt]),
                   "cli": report("docker run --rm --runtime=%s" % rt, cli[rt])}
    ratios[rt] = {"spaced": round(m["spaced"] / m["cli"], 3), "back_to_back": round(m["back_to_back"] / m["cli"], 3),
                  "goal": 0.5 if rt == "runc" else 0.7}
    if heavy[rt]:
        m["writes_wall"] = report("plimsolld %s, 10000 file writes (client wall)" % rt, [x[0] for x in heavy[rt]])
        m["writes_inside"] = report("plimsolld %s, 10000 file writes (inside the snippet)" % rt, [x[1] for x in heavy[rt]])
print(json.dumps({"ratio_daemon_to_cli_p50": ratios}))
if "runsc" in p50 and "runsc-bookworm" in p50:
    new, old = p50["runsc"], p50["runsc-bookworm"]
    print(json.dumps({"ratio_runsc_to_runsc_bookworm_p50": {k: round(new[k] / old[k], 3) for k in new}}))
PY
