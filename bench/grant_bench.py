#!/usr/bin/env python3
"""grant_bench.py: what one brokered host call costs a guest, end to end through the real daemon,
against a direct call to the same loopback upstream (issue 6), side by side in one run.

  direct     N sequential GETs from this process on one keep-alive connection
  brokered   one Run whose code makes N sequential host.get() calls, minus the same Run making
             none; the difference over N is the per-call cost the guest sees (its transport to
             the daemon, the broker's checks and the upstream round trip)

Usage: bench/grant_bench.py BUILD_DIR [quickjs|docker ...]   (prints one JSON line per figure;
never asserts a time). docker needs dockerd and the images (make images).
"""
import base64
import hashlib
import http.client
import http.server
import json
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
os.environ.setdefault("PLIMSOLLD", os.path.join(ROOT, BUILD, "plimsolld"))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
from harness import Daemon  # noqa: E402

TOKEN = "bench-upstream-token-0123456789abcdef"
CALLS = int(os.environ.get("GRANT_BENCH_CALLS", "200"))
REPEATS = int(os.environ.get("GRANT_BENCH_REPEATS", "5"))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for both the direct client and the broker
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def do_GET(self):
        data = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def direct(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    per = []
    for i in range(CALLS):
        t0 = time.perf_counter()
        conn.request("GET", "/v1/items/%d" % i, headers={"Authorization": "Bearer " + TOKEN})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
        per.append(time.perf_counter() - t0)
    conn.close()
    return per


def run_ms(d, n):
    """Wall time of one granted Run making n calls, as the caller sees it."""
    code = ("(async () => { for (let i = 0; i < %d; i++) await host.get('/v1/items/' + i); "
            "console.log('done %d') })()" % (n, n))
    t0 = time.perf_counter()
    st, _, data, _ = d.call("Run", {"protocol": 3, "javascript": {"code": code, "grantProfile": "bench"}},
                            token="bench-caller-tok")
    el = (time.perf_counter() - t0) * 1000
    body = json.loads(data)
    out = base64.b64decode(body.get("javascript", body.get("project", {})).get("stdout", "")).decode()
    assert st == 200 and ("done %d" % n) in out, (st, body)
    return el


def main():
    providers = sys.argv[2:] or ["quickjs"]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    tmp = tempfile.mkdtemp()
    clients, grants = os.path.join(tmp, "clients.json"), os.path.join(tmp, "grants.json")
    with open(clients, "w") as f:
        json.dump({"clients": [{"id": "bench", "scopes": ["code:run"],
                                "token_sha256": hashlib.sha256(b"bench-caller-tok").hexdigest()}]}, f)
    with open(grants, "w") as f:
        json.dump({"profiles": {"bench": {"base_url": "http://127.0.0.1:%d" % port, "allow": ["GET /v1/items/*"],
                                          "allowed_callers": ["bench"], "max_calls": 100000,
                                          "token": {"type": "static", "env": "BENCH_TOKEN"}}}}, f)
    d_per = []
    for _ in range(REPEATS):
        d_per += direct(port)
    print(json.dumps({"bench": "grant_e2e", "mode": "direct", "calls": len(d_per),
                      "mean_us": round(statistics.mean(d_per) * 1e6), "p50_us": round(statistics.median(d_per) * 1e6)}))
    for prov in providers:
        env = {"SANDBOX_PROVIDER": prov, "PLIMSOLL_CLIENTS_FILE": clients, "PLIMSOLL_GRANTS_FILE": grants,
               "BENCH_TOKEN": TOKEN, "SANDBOX_RATE_PER_MIN": "0", "PLIMSOLL_METRICS_ADDR": "off"}
        with Daemon(env) as d:
            base, full = [], []
            for _ in range(REPEATS):  # interleaved, so drift hits both alike
                base.append(run_ms(d, 0))
                full.append(run_ms(d, CALLS))
        per_call_us = (statistics.median(full) - statistics.median(base)) * 1000 / CALLS
        print(json.dumps({"bench": "grant_e2e", "mode": "brokered", "provider": prov, "calls_per_run": CALLS,
                          "run_ms_without_calls_p50": round(statistics.median(base), 2),
                          "run_ms_with_calls_p50": round(statistics.median(full), 2),
                          "per_call_us": round(per_call_us),
                          "added_over_direct_mean_us": round(per_call_us - statistics.mean(d_per) * 1e6)}))
    httpd.shutdown()


if __name__ == "__main__":
    main()
