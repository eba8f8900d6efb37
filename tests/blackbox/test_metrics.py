"""GET /metrics against the reference's series (wire.md §15, issue 14 item 5), from the outside.

A quickjs daemon with a clients file and a grants file; granted runs call two routes of a loopback
upstream (one slow), then the scrape (with the `metrics` scope) must carry the reference's names
and labels: plimsoll_runs_total, plimsoll_runs_failed_total, plimsoll_inflight,
plimsoll_shed_total{reason}, plimsoll_host_calls_total{profile,method,route} and the histogram
plimsoll_host_call_latency_seconds{profile,method,route}; and ours: plimsoll_refused_total,
plimsoll_host_call_verdicts_total{profile,verdict} and plimsoll_run_duration_seconds{provider,
verdict}. The whole exposition is parsed: every sample has a declared TYPE, histograms are
cumulative and end in +Inf = _count.
"""
import hashlib
import json
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, Upstream, WireCase, js  # noqa: E402

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? '
                    r'(-?[0-9.e+]+|\+Inf)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


def parse(text):
    """{name: {"type": t, "samples": [(labels dict, value)]}}; fails on any malformed line."""
    out, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, t = line.split(" ")
            types[name] = t
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, "malformed sample line: %r" % line
        name, labels, value = m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))
        base = re.sub(r"_(bucket|sum|count)$", "", name) if re.sub(r"_(bucket|sum|count)$", "", name) in types else name
        assert base in types, "sample without a TYPE: %r" % line
        out.setdefault(name, []).append((labels, value))
    return out, types


class Metrics(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        clients = os.path.join(cls.tmp, "clients.json")
        grants = os.path.join(cls.tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": sha("alice-tok"), "scopes": ["code:run"]},
                                   {"id": "prom", "token_sha256": sha("prom-tok"), "scopes": ["metrics"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*", "GET /v1/slow/*"],
                "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": clients,
                        "PLIMSOLL_GRANTS_FILE": grants, "ITEMS_TOKEN": "upstream-secret-token-0123456789",
                        "SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        cls.up.close()

    def scrape(self, token="prom-tok"):
        headers = {"Authorization": "Bearer " + token} if token else None
        return self.d.request("GET", "/metrics", port=self.d.metrics_port, headers=headers)

    def test_scope(self):
        self.assertEqual(self.scrape(None)[0], 401)
        self.assertEqual(self.scrape("alice-tok")[0], 403)
        st, hdrs, _ = self.scrape()
        self.assertEqual(st, 200)
        self.assertEqual(hdrs["content-type"], "text/plain; version=0.0.4")

    def test_reference_series_names_and_labels(self):
        code = ('(async () => { for (let i = 0; i < 3; i++) await host.get("/v1/items/" + i);'
                ' await host.get("/v1/slow/1"); console.log("ok") })()')
        st, _, data, _ = self.d.call("Run", {"protocol": 3, "javascript": {"code": code, "grantProfile": "items"}},
                                     token="alice-tok")
        self.assertEqual(st, 200, data)
        self.assertEqual(self.d.call("Run", js("while(true){}", timeoutMs=300), token="alice-tok")[0], 200)
        self.assertEqual(self.d.call("Run", js("1", minimumIsolation="vm"), token="alice-tok")[0], 400)
        st, _, body = self.scrape()
        self.assertEqual(st, 200)
        m, types = parse(body.decode())

        # the reference's series (wire.md §15)
        for name, t in (("plimsoll_runs_total", "counter"), ("plimsoll_runs_failed_total", "counter"),
                        ("plimsoll_inflight", "gauge"), ("plimsoll_shed_total", "counter"),
                        ("plimsoll_host_calls_total", "counter"),
                        ("plimsoll_host_call_latency_seconds", "histogram")):
            self.assertEqual(types.get(name), t, name)
        self.assertEqual(m["plimsoll_runs_total"][0][1], 2)
        self.assertEqual(m["plimsoll_runs_failed_total"][0][1], 0)
        reasons = {lab["reason"] for lab, _ in m["plimsoll_shed_total"]}
        self.assertTrue({"at_capacity", "per_key", "rate"} <= reasons, reasons)
        calls = {(lab["profile"], lab["method"], lab["route"]): v for lab, v in m["plimsoll_host_calls_total"]}
        self.assertEqual(calls, {("items", "GET", "/v1/items/*"): 3, ("items", "GET", "/v1/slow/*"): 1})
        for route, n in (("/v1/items/*", 3), ("/v1/slow/*", 1)):
            want = {"profile": "items", "method": "GET", "route": route}
            buckets = [(lab["le"], v) for lab, v in m["plimsoll_host_call_latency_seconds_bucket"]
                       if {k: lab[k] for k in want} == want]
            self.assertEqual(buckets[-1][0], "+Inf")
            values = [v for _, v in buckets]
            self.assertEqual(values, sorted(values), "buckets are cumulative")
            self.assertEqual(values[-1], n)
            count = [v for lab, v in m["plimsoll_host_call_latency_seconds_count"] if lab == want]
            self.assertEqual(count, [n])
        # the slow route's call took at least 0.4 s: it is not in the 0.25 s bucket
        slow = {lab["le"]: v for lab, v in m["plimsoll_host_call_latency_seconds_bucket"]
                if lab["route"] == "/v1/slow/*"}
        self.assertEqual(slow["0.25"], 0)
        self.assertEqual(slow["+Inf"], 1)
        sums = [v for lab, v in m["plimsoll_host_call_latency_seconds_sum"] if lab["route"] == "/v1/slow/*"]
        self.assertGreaterEqual(sums[0], 0.4)

        # ours, kept
        self.assertEqual(types.get("plimsoll_refused_total"), "counter")
        self.assertEqual(m["plimsoll_refused_total"][0][1], 1)
        verdicts = {lab["verdict"]: v for lab, v in m["plimsoll_host_call_verdicts_total"] if lab["profile"] == "items"}
        self.assertEqual(verdicts, {"allowed": 4, "denied": 0, "shed": 0})
        self.assertEqual(types.get("plimsoll_run_duration_seconds"), "histogram")
        runs = {lab["verdict"]: v for lab, v in m["plimsoll_run_duration_seconds_count"]}
        self.assertEqual(runs, {"exited": 1, "timed_out": 1, "project": 0, "refused": 1, "error": 0})
        self.assertTrue(all(lab["provider"] == "quickjs" for lab, _ in m["plimsoll_run_duration_seconds_count"]))
        inf = {lab["verdict"]: v for lab, v in m["plimsoll_run_duration_seconds_bucket"] if lab["le"] == "+Inf"}
        self.assertEqual(inf, runs)


if __name__ == "__main__":
    unittest.main(verbosity=2)
