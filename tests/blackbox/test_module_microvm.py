"""Module runs at the vm tier (issue 21, docs/modules.md "microvm") through the real daemon on
microvm: the worker and models on the project VMs' read-only disk (/usr/lib/plimsoll), the same
PLSM contract as docker, results decoded on the host.

The cases mirror tests/blackbox/test_module.py, with its pinned per-model checksums: the same
sources give the same bits in a TCG (or KVM) guest as in a runc or runsc container. One daemon
serves every case; each module run restores one project VM from the template (~0.3 s under TCG),
the refusals start none. A missing prerequisite is a failure, never a skip. Standard library only.
"""
import base64
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase  # noqa: E402
from test_module import CASES, TRICKY, bits, checksum, loads, module  # noqa: E402

STARTUP = 600  # seconds: template boots and the proofs (python, module) under a loaded TCG host
MODELS = "/usr/lib/plimsoll/models"
WORKER = "/usr/lib/plimsoll/sim-worker"


class ModuleMicrovm(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
                        "SANDBOX_MAX_CONCURRENT": "2", "SANDBOX_PER_KEY_CONCURRENT": "2"}, timeout=STARTUP)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "\n".join(cls.d.lines[-30:])

    def run_ok(self, msg):
        st, _, data, _ = self.d.call("Run", msg)
        self.assertEqual(st, 200, data[:500])
        body = loads(data)
        self.assertEqual(body["isolation"], "vm")
        self.assertEqual(body["sandbox"], "microvm")
        return body

    def dispatched(self):
        return self.d.metrics()["plimsoll_runs_total"]

    def test_describe(self):
        st, _, data, _ = self.d.call("Describe", {})
        desc = json.loads(data)
        self.assertTrue(desc.get("supportsModule"), desc)
        env = desc["moduleEnvironment"]
        # the models are disk content: the module environment is the project VMs' (kernel,
        # initramfs and disk hashed together)
        self.assertEqual(env["identity"], desc["projectEnvironment"]["identity"])
        self.assertRegex(env["identity"], r"^microvm:sha256:[0-9a-f]{64}$")
        self.assertEqual(sorted(env["languages"]), ["BouncingBall", "Greedy", "Lorenz", "VanDerPol"])
        checks = {c["name"]: c for c in desc["evidence"]["checks"]}
        self.assertTrue(checks["module.models"]["passed"])
        self.assertTrue(checks["module.row"]["passed"])
        self.assertIn(checks["module.row"]["observed"].split()[0], checks["module.row"]["expected"])

    def test_models_exact(self):
        for model, (rows, end, step, pin) in CASES.items():
            with self.subTest(model=model):
                body = self.run_ok(module(model, rows, end, step))
                self.assertEqual(body["environment"], json.loads(self.d.call("Describe", {})[2])
                                 ["moduleEnvironment"]["identity"])
                m = body["module"]
                self.assertEqual(m["outcome"], "PROJECT_OUTCOME_COMPLETED", m.get("outcomeDetail"))
                self.assertEqual(len(m["runs"]), len(rows))
                n_points = int(end / step) + 1
                for row, run in zip(rows, m["runs"]):
                    self.assertEqual(run["status"], n_points)
                    self.assertEqual(len(run["outputs"]), n_points * m["width"])
                    first = run["outputs"][:m["width"]]
                    self.assertEqual(bits(first[0]), bits(0.0))
                    for k, v in enumerate(row[:2]):
                        self.assertEqual(bits(first[1 + k]), bits(v), (model, row, first))
                # the same checksum as under runc and runsc (test_module.py)
                self.assertEqual(checksum(m["runs"]), pin, model)

    def test_tricky_values_survive(self):
        rows = [[a, b] for a, b in zip(TRICKY[::2], TRICKY[1::2])]
        m = self.run_ok(module("VanDerPol", rows, 0.5, 0.5, minimumIsolation="vm"))["module"]
        for row, run in zip(rows, m["runs"]):
            self.assertEqual([bits(v) for v in run["outputs"][1:3]], [bits(v) for v in row])

    def test_greedy_row_fails_alone(self):
        m = self.run_ok(module("Greedy", [[1], [64], [2]], 1, 0.5))["module"]
        self.assertEqual([r["status"] for r in m["runs"]], [3, -2, 3])
        self.assertEqual(m["runs"][0]["outputs"], [0, 1, 0.5, 1, 1, 1])
        self.assertNotIn("outputs", m["runs"][1])

    def test_invalid_never_dispatched(self):
        before = self.dispatched()
        over = [[1.0]] * 1000
        # params.txt over the guest's plan share (4 MiB: 68 bytes a row here, 4.4 MB): within
        # docker's limits, not the VM's
        long = [[-1.2345678901234567e-300, 2.2250738585072014e-308, 1.0000000000000002]] * 65000
        cases = {
            "ragged": (module("VanDerPol", [[1, 2], [1]], 1, 0.1), "request"),
            "no rows": (module("VanDerPol", [], 1, 0.1), "request"),
            "../x": (module("../x", [[1, 2]], 1, 0.1), "request"),
            "step 0": (module("VanDerPol", [[1, 2]], 1, 0), "request"),
            "ratio": (module("VanDerPol", [[1, 2]], 1000001, 1), "request"),
            "budget": (module("Greedy", over, 1047, 1), "request"),
            "width 65": (module("Lorenz", [[1.0] * 65], 1, 0.1), "request"),
            "params text": (module("Lorenz", long, 1, 1), "request"),
            "floor word": (module("Lorenz", [[1, 1, 1]], 1, 0.5, minimumIsolation="hypervisor"), "request"),
        }
        for name, (msg, reason) in cases.items():
            with self.subTest(case=name):
                body = self.assertRefused(self.d.call("Run", msg), "invalid_argument", reason)
                if name == "params text":
                    self.assertIn("a microvm module run takes at most 4194304", body["message"])
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
        self.assertFalse(body.get("details"), body)  # the worker ran: no NotDispatched mark

    def test_audit_line_has_no_values(self):
        marker = 987654.123456789
        self.run_ok(module("Lorenz", [[marker, 1, 2], [3, 4, 5]], 1, 0.25))
        ev = self.d.wait_events("run", lambda e: e.get("kind") == "module" and e.get("rows") == 2
                                and e.get("max_steps") == 6, timeout=30)[-1]
        self.assertEqual((ev["model"], ev["row_width"], ev["module_runs"], ev["module_width"]), ("Lorenz", 3, 2, 4))
        for line in self.d.lines:
            self.assertNotIn("987654", line)

    def test_model_in_writable_mount_refused(self):
        """In a project VM, as the run user: the worker loads a model only from the read-only disk.
        A copy on the writable /work (tmpfs) or /tmp (tmpfs, noexec) is refused; the original loads."""
        script = ("printf '1 1 1\\n' > p.txt && cp %s/Lorenz /work/Lorenz && cp %s/Lorenz /tmp/Lorenz && "
                  "for m in /work/Lorenz /tmp/Lorenz; do rm -f r.bin; %s --model $m p.txt r.bin 1 0.5 8388608; "
                  "echo rc=$?; done; %s --model %s/Lorenz p.txt ok.bin 1 0.5 8388608; echo rc=$?"
                  % (MODELS, MODELS, WORKER, WORKER, MODELS))
        msg = {"protocol": 3, "project": {"steps": [script]}}
        st, _, data, _ = self.d.call("Run", msg)
        self.assertEqual(st, 200, data[:500])
        step = json.loads(data)["project"]["steps"][0]
        out = base64.b64decode(step.get("stdout", "")).decode()
        err = base64.b64decode(step.get("stderr", "")).decode()
        self.assertEqual(out.split(), ["rc=2", "rc=2", "rows=1", "rc=0"], (out, err))
        self.assertEqual(err.count("is on a writable file system; models load only from the image's read-only root"),
                         2, err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
