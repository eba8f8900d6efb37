"""SANDBOX_TOTAL_MEMORY_MB (issue 14 item 3): a memory budget across runs in flight.

Each run reserves the provider's per-run memory (SANDBOX_MEMORY_MB, as Describe states it) for as
long as it holds its slot. With 64 MB runs and a 128 MB budget two runs fit; a third, sent while
both run, is shed resource_exhausted with the capacity mark before any provider work, and the
memory comes back on every path (a timed-out run, a shed run), so runs fit again afterwards.
"""
import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase, js  # noqa: E402

ENV = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_MEMORY_MB": "64",
       "SANDBOX_TOTAL_MEMORY_MB": "128", "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_PER_KEY_CONCURRENT": "8",
       "SANDBOX_RATE_PER_MIN": "0"}


class MemoryBudget(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(ENV)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def wait_inflight(self, n, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.d.metrics().get("plimsoll_inflight") == n:
                return
            time.sleep(0.02)
        self.fail("inflight never reached %d" % n)

    def test_third_run_is_shed_and_memory_comes_back(self):
        st, _, data, _ = self.d.call("Describe", {})
        self.assertEqual(json.loads(data)["resources"]["memoryMb"], 64)
        shed_before = self.d.metrics().get('plimsoll_shed_total{reason="memory"}', 0)
        answers = []
        busy = [threading.Thread(target=lambda: answers.append(self.d.call("Run", js("while(true){}", timeoutMs=3000))))
                for _ in range(2)]
        for t in busy:
            t.start()
        self.wait_inflight(2)
        dispatched = self.d.metrics()["plimsoll_runs_total"]
        body = self.assertRefused(self.d.call("Run", js("console.log(1)")), "resource_exhausted", "capacity", 429)
        self.assertIn("memory budget exhausted: 128 of 128 MB reserved and a run needs 64 MB", body["message"])
        m = self.d.metrics()
        self.assertEqual(m["plimsoll_runs_total"], dispatched, "the shed run reached the provider")
        self.assertEqual(m['plimsoll_shed_total{reason="memory"}'], shed_before + 1)
        self.assertEqual(m['plimsoll_shed_total{reason="at_capacity"}'], 0)
        for t in busy:
            t.join(30)
        for st, _, data, _ in answers:
            self.assertEqual(st, 200, data)
            self.assertTrue(json.loads(data)["javascript"].get("timedOut"), data)
        # the timed-out runs and the shed one gave their memory back: two runs fit again at once
        self.wait_inflight(0)
        again = []
        pair = [threading.Thread(target=lambda: again.append(self.d.call("Run", js("console.log(2)"))))
                for _ in range(2)]
        for t in pair:
            t.start()
        for t in pair:
            t.join(30)
        self.assertEqual([a[0] for a in again], [200, 200], again)
        ev = self.d.wait_events("run", lambda e: e.get("reason") == "capacity")
        self.assertEqual(len(ev), 1)



class SessionsReserveToo(WireCase):
    """An open session holds its slot, so it holds its memory: two 64 MB sessions fill a 128 MB
    budget, a Run and a third open are shed, and closing one gives its memory back."""

    def test_sessions_hold_memory_until_closed(self):
        with Daemon(dict(ENV, SANDBOX_MAX_SESSIONS="4")) as d:
            ids = []
            for _ in range(2):
                st, _, data, _ = d.call("OpenSession", {"protocol": 3})
                self.assertEqual(st, 200, data)
                ids.append(json.loads(data)["sessionId"])
            self.assertEqual(d.metrics()["plimsoll_inflight"], 2)
            body = self.assertRefused(d.call("Run", js("1")), "resource_exhausted", "capacity", 429)
            self.assertIn("memory budget exhausted", body["message"])
            body = self.assertRefused(d.call("OpenSession", {"protocol": 3}), "resource_exhausted", "capacity", 429)
            self.assertIn("memory budget exhausted", body["message"])
            st, _, data, _ = d.call("CloseSession", {"protocol": 3, "sessionId": ids.pop()})
            self.assertEqual(st, 200, data)
            st, _, data, _ = d.call("Run", js("console.log(3)"))
            self.assertEqual(st, 200, data)
            self.assertEqual(d.metrics()['plimsoll_shed_total{reason="memory"}'], 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
