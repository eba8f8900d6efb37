#!/bin/bash
# front_cpu.sh: where a request's CPU goes, server against client, on this machine.
#   bench/front_cpu.sh DAEMON [LOADGEN]   (env: SECS per line, default 3)
# Runs DAEMON (quickjs, open mode, as bench/front_bench.sh) and, per line (Describe c=8 and c=1,
# a refusal below the floor at c=8), reads the CPU time (user + system, /proc/PID/stat) the daemon
# and bench/loadgen spent during the line. Prints per line: requests/s, CPU microseconds per
# request of each, and the rate both together would reach if they had every CPU of the machine to
# themselves (nproc / (server + client CPU per request)): a ceiling no server change can lift
# while the client shares the CPUs. Prints figures only; asserts nothing.
set -euo pipefail
DAEMON=$1
LG=${2:-build/bench/loadgen}
SECS=${SECS:-3}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/daemon.sh"
echo '{}' >"$tmp/describe.json"
echo '{"protocol":3,"minimumIsolation":"vm","javascript":{"code":"1"}}' >"$tmp/refuse.json"
P=/plimsoll.v1.SandboxService
start_daemon SANDBOX_PROVIDER=quickjs PLIMSOLL_INSECURE=1 SANDBOX_MAX_CONCURRENT=8 SANDBOX_PER_KEY_CONCURRENT=8
echo "{\"loadavg_before\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"nproc\":$(nproc)}"
python3 - "$DPID" "$LG" "$PORT" "$SECS" "$tmp" <<'PY'
import json, os, resource, subprocess, sys
dpid, lg, port, secs, tmp = sys.argv[1:6]
hz = os.sysconf("SC_CLK_TCK")
def daemon_s():  # user + system seconds of every thread of the daemon so far
    f = open(f"/proc/{dpid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz
P = "/plimsoll.v1.SandboxService"
for name, path, body, conc, expect in (("describe_c8", P + "/Describe", "describe.json", "8", "200"),
                                        ("refusal_c8", P + "/Run", "refuse.json", "8", "400"),
                                        ("describe_c1", P + "/Describe", "describe.json", "1", "200")):
    d0, r0 = daemon_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(subprocess.run([lg, "127.0.0.1", port, path, os.path.join(tmp, body), "application/json",
                                     conc, secs, expect], capture_output=True, text=True, check=True).stdout)
    d1, r1 = daemon_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    n = max(out["requests"], 1)
    srv = (d1 - d0) * 1e6 / n
    cli = ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) * 1e6 / n
    print(json.dumps({"line": name, "rps": out["rps"], "server_cpu_us_per_req": round(srv, 1),
                      "client_cpu_us_per_req": round(cli, 1),
                      "rps_ceiling_both_on_all_cpus": round(os.cpu_count() * 1e6 / (srv + cli))}))
PY
echo "{\"loadavg_after\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
stop_daemon
