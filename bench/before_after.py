#!/usr/bin/env python3
"""make bench, before against after: scripts/bench.sh on two builds, side by side in one run.

    python3 bench/before_after.py PRE_BUILD NEW_BUILD [ROUNDS]

PRE_BUILD is an earlier build of this tree (docs/testing.md says how to make one in a git
worktree); the harness is this checkout's scripts/bench.sh for both, so the two builds are measured
the same way. Rounds alternate PRE, NEW, PRE, NEW ... (ROUNDS each, default 2) so that a busy
machine weighs on both alike. Every figure line of bench.sh is matched across builds by its text
fields (path, bench, mode, what, provider ...) and its concurrency; for each number that is a
throughput (rps) or a latency (p50/p99, us or ms) the medians are printed with the ratio
"new_over_pre" and which way is better. Prints JSON lines; never asserts a time.
"""
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LATENCY = ("p50_us", "p99_us", "p50_ms", "p99_ms", "added_p50_us", "added_p50_ms", "cell_p50_ms",
           "direct_us", "checked_us")


def figures(line):
    """(key, {metric: value}) of one bench.sh line, or None for a line that is no figure."""
    try:
        o = json.loads(line)
    except ValueError:
        return None
    if not isinstance(o, dict):
        return None
    key = tuple(sorted((k, v) for k, v in o.items() if isinstance(v, str) or k in ("concurrency", "backends")))
    nums = {k: float(v) for k, v in o.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (k == "rps" or k in LATENCY)}
    return (key, nums) if nums else None


def run(build, env):
    out = subprocess.run([os.path.join(ROOT, "scripts", "bench.sh"), build], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit("bench.sh %s failed (%d): %s" % (build, out.returncode, out.stderr[-2000:]))
    seen = {}
    for line in out.stdout.splitlines():
        f = figures(line)
        if f:
            key, nums = f
            n = seen.get(key, 0)  # the same line twice in one run (a repeated figure) stays apart
            seen[key] = n + 1
            yield key + (("#", n),), nums


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pre, new = (os.path.abspath(p) for p in sys.argv[1:3])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    env = dict(os.environ, BENCH_SECONDS=os.environ.get("BENCH_SECONDS", "3"))
    got = {"pre": {}, "new": {}}
    for r in range(rounds):
        for name, build in (("pre", pre), ("new", new)):
            for key, nums in run(build, env):
                for metric, v in nums.items():
                    got[name].setdefault((key, metric), []).append(v)
            print(json.dumps({"round": r + 1, "build": name, "done": True}), flush=True)
    for (key, metric), pre_v in sorted(got["pre"].items()):
        new_v = got["new"].get((key, metric))
        if not new_v:
            continue
        a, b = statistics.median(pre_v), statistics.median(new_v)
        line = {k: v for k, v in key if k != "#"}
        line.update({"metric": metric, "pre": a, "new": b,
                     "new_over_pre": round(b / a, 3) if a else None,
                     "better": "higher" if metric == "rps" else "lower"})
        print(json.dumps(line))
    print(json.dumps({"loadavg": open("/proc/loadavg").read().split()[:3]}))


if __name__ == "__main__":
    main()
