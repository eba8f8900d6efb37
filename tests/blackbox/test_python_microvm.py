"""Python at the vm tier (issue 20; docs/python.md): project VMs read python3 and its data
libraries from the read-only disk on /usr; the startup proof imports numpy, pandas and matplotlib
in a real project VM and states the versions on the card; Describe lists python; a pandas/NumPy/
Matplotlib project completes under TCG within the default project timeout, its PNG comes back,
with no network and no pip. Standard library only."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase  # noqa: E402
from pydata import judge, request  # noqa: E402

STARTUP = 600  # seconds: template boot, the proofs and the python probe under a loaded TCG host


class A_Microvm(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0"},
                       timeout=STARTUP)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "\n".join(cls.d.lines[-30:])

    def test_describe_and_card(self):
        st, _, data, _ = self.d.call("Describe", {})
        self.assertEqual(st, 200)
        d = json.loads(data)
        self.assertEqual(d["isolation"], "vm")
        why = [x for x in d["evidence"]["confinement"] if x.startswith("python")]
        self.assertIn("python", d["projectEnvironment"]["languages"], why)
        checks = {c["name"]: c for c in d["evidence"]["checks"]}
        self.assertTrue(checks["guest.project_python"]["passed"])
        self.assertRegex(checks["guest.project_python"]["observed"],
                         r"^Python 3\.\d+\.\d+, numpy \S+, pandas \S+, matplotlib \S+ \(\d+ ms\)$")
        print("\nmicrovm python probe:", checks["guest.project_python"]["observed"], file=sys.stderr)

    def test_data_project(self):
        t0 = time.monotonic()
        st, _, data, _ = self.d.call("Run", request(minimumIsolation="vm"))
        body = json.loads(data)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["isolation"], "vm")
        judge(self, body)
        print("\nmicrovm data project: %.1f s (default timeout)" % (time.monotonic() - t0), file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
