"""Module runs (issue 21, docs/modules.md) through the real daemon on docker, under runc (tier
container) and gVisor's runsc (tier kernel), with the image plimsoll/module:latest that
scripts/build-images.py builds. Also: quickjs refuses modules `unimplemented` (unsupported).

Each model's rows come back as exact doubles whose SHA-256 (per row: the status as i32 LE, then
the outputs as f64 LE; the checksum of docs/modules.md) is pinned here, and is the same under both
runtimes. A missing prerequisite (dockerd, runsc, the image) is a failure, never a skip.
Standard library only.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase  # noqa: E402

MODULE_IMAGE = os.environ.get("PLIMSOLL_TEST_MODULE_IMAGE", "plimsoll/module:latest")
BASE_ENV = {"SANDBOX_PROVIDER": "docker", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
            "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_PER_KEY_CONCURRENT": "8",
            "SANDBOX_DOCKER_IMAGE": os.environ.get("PLIMSOLL_TEST_SNIPPET_IMAGE", "plimsoll/snippet:latest"),
            "SANDBOX_DOCKER_PROJECT_IMAGE": os.environ.get("PLIMSOLL_TEST_PROJECT_IMAGE", "plimsoll/project:latest"),
            "SANDBOX_DOCKER_MODULE_IMAGE": MODULE_IMAGE}

# Values that need care on the way through: -0.0, subnormals, 17 significant digits.
TRICKY = [-0.0, 5e-324, 2.2250738585072009e-308, 0.30000000000000004, 1.0000000000000002, -123.456789012345678]
# model -> (rows, end, step, pinned checksum of the results)
CASES = {
    "VanDerPol": ([[1, 2], [0.5, -3], [-0.0, 5e-324], [0.30000000000000004, 1.0000000000000002]], 10, 0.01,
                  "04be138fe9a5e7019ed504924a2a2de67352dd8b51c081f0d68cdd5fde5590aa"),
    "Lorenz": ([[1, 1, 1], [-0.0, 2.2250738585072009e-308, 25], [0.30000000000000004, -123.456789012345678, 7]],
               20, 0.005, "443d8edb2a3ebf079d5370379886a9dd976e95971d8c2e505b066000e6c2ded0"),
    "BouncingBall": ([[10, 0, 0.8], [1, 5, 1], [0, 0, 0.5], [2.5, -1, 0.30000000000000004]], 10, 0.01,
                     "d9fd39689636055633bab6cc0cdc047750e3f176ae3e388270bfa6bf7ec928e8"),
}


def loads(data):
    """JSON with -0 kept a negative zero (the daemon writes -0.0 as -0)."""
    return json.loads(data, parse_int=lambda s: -0.0 if s == "-0" else int(s))


def checksum(runs):
    h = hashlib.sha256()
    for r in runs:
        h.update(struct.pack("<i", r.get("status", 0)))
        for v in r.get("outputs", []):
            h.update(struct.pack("<d", float(v)))
    return h.hexdigest()


def module(model, rows, end, step, **kw):
    m = {"protocol": 3, "module": {"model": model, "rows": [{"values": r} for r in rows], "endTime": end,
                                   "step": step}}
    m.update(kw)
    return m


def bits(x):
    return struct.pack("<d", float(x))


class _ModuleCase(WireCase):
    RUNTIME = "runc"
    TIER = "container"

    @classmethod
    def setUpClass(cls):
        env = dict(BASE_ENV, SANDBOX_DOCKER_RUNTIME=cls.RUNTIME)
        cls.d = Daemon(env, timeout=300)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_ok(self, msg):
        st, _, data, _ = self.d.call("Run", msg)
        self.assertEqual(st, 200, data[:500])
        body = loads(data)
        self.assertEqual(body["isolation"], self.TIER)
        return body

    def dispatched(self):
        return self.d.metrics()["plimsoll_runs_total"]

    def test_describe(self):
        st, _, data, _ = self.d.call("Describe", {})
        desc = json.loads(data)
        self.assertTrue(desc.get("supportsModule"), desc)
        env = desc["moduleEnvironment"]
        self.assertTrue(env["identity"].startswith("docker-image:sha256:"), env)
        self.assertEqual(sorted(env["languages"]), ["BouncingBall", "Greedy", "Lorenz", "VanDerPol"])
        checks = {c["name"]: c for c in desc["evidence"]["checks"]}
        self.assertTrue(checks["module.row"]["passed"])
        self.assertIn(checks["module.row"]["observed"], checks["module.row"]["expected"])

    def test_models_exact(self):
        for model, (rows, end, step, pin) in CASES.items():
            with self.subTest(model=model):
                body = self.run_ok(module(model, rows, end, step))
                m = body["module"]
                self.assertEqual(m["outcome"], "PROJECT_OUTCOME_COMPLETED", m.get("outcomeDetail"))
                self.assertEqual(len(m["runs"]), len(rows))
                n_points = int(end / step) + 1
                for row, run in zip(rows, m["runs"]):
                    self.assertEqual(run["status"], n_points)
                    self.assertEqual(len(run["outputs"]), n_points * m["width"])
                    # the first point is (t = 0, the initial state): the parameters' exact bits
                    first = run["outputs"][:m["width"]]
                    self.assertEqual(bits(first[0]), bits(0.0))
                    for k, v in enumerate(row[:2]):  # every model's first two parameters are its state
                        self.assertEqual(bits(first[1 + k]), bits(v), (model, row, first))
                self.assertEqual(checksum(m["runs"]), pin, model)

    def test_tricky_values_survive(self):
        rows = [[a, b] for a, b in zip(TRICKY[::2], TRICKY[1::2])]
        m = self.run_ok(module("VanDerPol", rows, 0.5, 0.5))["module"]
        for row, run in zip(rows, m["runs"]):
            self.assertEqual([bits(v) for v in run["outputs"][1:3]], [bits(v) for v in row])

    def test_duration_stated(self):
        # wire.md §12: a module answer states the provider's measured run time, as a snippet's
        # does (a client showing durationMs read 0 here before). It lies within the record's span.
        body = self.run_ok(module("Lorenz", [[1, 1, 1]], 0.1, 0.05))
        rec = body["record"]
        span = int(rec["endedUnixMs"]) - int(rec["startedUnixMs"])
        self.assertIn("durationMs", body)
        self.assertGreater(int(body["durationMs"]), 0)
        self.assertLessEqual(int(body["durationMs"]), span)

    def test_greedy_row_fails_alone(self):
        m = self.run_ok(module("Greedy", [[1], [64], [2]], 1, 0.5))["module"]
        self.assertEqual([r["status"] for r in m["runs"]], [3, -2, 3])
        self.assertEqual(m["runs"][0]["outputs"], [0, 1, 0.5, 1, 1, 1])
        self.assertNotIn("outputs", m["runs"][1])

    def test_invalid_never_dispatched(self):
        before = self.dispatched()
        over = [[1.0]] * 1000
        cases = {
            "ragged": module("VanDerPol", [[1, 2], [1]], 1, 0.1),
            "no rows": module("VanDerPol", [], 1, 0.1),
            "../x": module("../x", [[1, 2]], 1, 0.1),
            "step 0": module("VanDerPol", [[1, 2]], 1, 0),
            "ratio": module("VanDerPol", [[1, 2]], 1000001, 1),
            "budget": module("Greedy", over, 1047, 1),
            "width 65": module("Lorenz", [[1.0] * 65], 1, 0.1),
        }
        for name, msg in cases.items():
            with self.subTest(case=name):
                self.assertRefused(self.d.call("Run", msg), "invalid_argument", "request")
        self.assertEqual(self.dispatched(), before)

    def test_unknown_model_setup_failed(self):
        m = self.run_ok(module("NoSuchModel", [[1]], 1, 0.5))["module"]
        self.assertEqual(m["outcome"], "PROJECT_OUTCOME_SETUP_FAILED")
        self.assertIn("the worker refused the request", m["outcomeDetail"])
        self.assertIn('"NoSuchModel"', m["outcomeDetail"])
        self.assertNotIn("runs", m)

    def test_wrong_width_invalid(self):
        st, _, data, _ = self.d.call("Run", module("Lorenz", [[1, 2]], 1, 0.5))
        body = json.loads(data)
        self.assertEqual(body["code"], "invalid_argument", body)
        self.assertIn("takes 3 parameters", body["message"])

    def test_below_floor_refused(self):
        before = self.dispatched()
        self.assertRefused(self.d.call("Run", module("Lorenz", [[1, 1, 1]], 1, 0.5, minimumIsolation="vm")),
                           "failed_precondition", "isolation")
        self.assertEqual(self.dispatched(), before)

    def test_audit_line_has_no_values(self):
        marker = 987654.123456789
        self.run_ok(module("Lorenz", [[marker, 1, 2], [3, 4, 5]], 1, 0.25))
        ev = self.d.wait_events("run", lambda e: e.get("kind") == "module" and e.get("rows") == 2
                                and e.get("max_steps") == 6)[-1]
        self.assertEqual((ev["model"], ev["row_width"], ev["module_runs"], ev["module_width"]), ("Lorenz", 3, 2, 4))
        for line in self.d.lines:
            self.assertNotIn("987654", line)

    def test_model_in_writable_mount_refused(self):
        """The worker itself, in the same image and runtime: a model copied to a tmpfs does not load."""
        script = ("printf '1 1 1\\n' > p.txt && cp /models/Lorenz /tmp/Lorenz && "
                  "/opt/plimsoll/sim-worker --model /tmp/Lorenz p.txt r.bin 1 0.5 8388608; echo rc=$?")
        r = subprocess.run(["docker", "run", "--rm", "--runtime", self.RUNTIME, "--read-only", "--network", "none",
                            "--tmpfs", "/tmp:rw,noexec,mode=1777", "-w", "/tmp", "-u", "61000", MODULE_IMAGE,
                            "sh", "-c", script], capture_output=True, text=True, timeout=120)
        self.assertIn("rc=2", r.stdout, r.stderr)
        self.assertIn("is on a writable file system", r.stderr)


class ModuleRunc(_ModuleCase):
    RUNTIME = "runc"
    TIER = "container"


class ModuleRunsc(_ModuleCase):
    RUNTIME = "runsc"
    TIER = "kernel"


class NoModules(WireCase):
    def test_quickjs_refuses(self):
        with Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1"}) as d:
            st, _, data, _ = d.call("Describe", {})
            self.assertFalse(json.loads(data).get("supportsModule", False))
            self.assertRefused(d.call("Run", module("Lorenz", [[1, 1, 1]], 1, 0.5)), "unimplemented", "unsupported")
            # validation comes first: an invalid module is invalid_argument on every provider
            self.assertRefused(d.call("Run", module("Lorenz", [[1, 1, 1], [1]], 1, 0.5)), "invalid_argument",
                               "request")


if __name__ == "__main__":
    unittest.main(verbosity=2)
