#!/usr/bin/env python3
"""The microvm channel behind the guestio helper (docs/privsep.md, stream mode), through the real
daemon with real (TCG) VMs: every VM's channel is read by its own confined plimsoll-guestio; a
helper killed while a run is in flight is an unmarked error (code may have run), never a hang; the
next run gets a fresh helper; and no helper outlives a SIGKILLed daemon."""
import base64
import os
import signal
import sys
import threading
import time
import json
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, descendants, js  # noqa: E402
from test_microvm import settle  # noqa: E402

STARTUP = 300  # seconds: template boot + proof under a loaded TCG host
HELPER = "plimsoll-guestio"  # its argv[0] (its comm is "plm-guestio")


def status(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return {}


def is_helper(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0] == HELPER.encode()
    except OSError:
        return False


def helpers(pid):
    """The daemon's live guestio helpers (not zombies)."""
    return [p for p in descendants(pid) if is_helper(p) and status(p).get("State", "")[:1] != "Z"]


def all_helpers():
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and is_helper(int(d))]


class GuestioMicroVM(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
                        "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_PER_KEY_CONCURRENT": "4"}, timeout=STARTUP)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def run_js(self, code, **kw):
        return self.d.call("Run", js(code, **kw))

    def test_a_each_vm_has_a_confined_helper(self):
        st, _, data, _ = self.run_js("console.log(6*7)")
        self.assertEqual(st, 200, data)
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"42\n")
        pid = self.d.proc.pid
        self.assertTrue(settle(lambda: len(helpers(pid)) >= 1, 60), descendants(pid))
        for h in helpers(pid):
            s = status(h)
            self.assertEqual(s.get("Seccomp"), "2", s)
            self.assertEqual(s.get("NoNewPrivs"), "1", s)
            self.assertEqual(s.get("CapEff"), "0000000000000000", s)
            self.assertEqual(s.get("PPid"), str(pid), s)
            if os.geteuid() == 0:
                self.assertEqual(s.get("Uid", "").split()[0], "61010", s)

    def test_b_helper_killed_mid_run_is_an_unmarked_error_then_a_fresh_helper(self):
        got = {}

        def go():
            got["a"] = self.run_js("const t=Date.now();while(Date.now()-t<8000){}", timeoutMs=20000)

        pid = self.d.proc.pid
        t = threading.Thread(target=go)
        t.start()
        time.sleep(2)
        # Every helper of the daemon: the running VM's and the pooled VMs'.
        killed = helpers(pid)
        self.assertTrue(killed)
        for p in killed:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        t.join(60)
        self.assertFalse(t.is_alive())
        st, hdrs, data, _ = got["a"]
        body = json.loads(data)
        self.assertNotEqual(st, 200, body)
        self.assertEqual(body["code"], "unavailable", body)
        self.assertNotIn("details", body)  # no NotDispatched: code may have run
        self.assertNotIn("plimsoll-not-dispatched", {k.lower() for k in hdrs})
        # The next run: a pooled VM whose helper died while nothing was asked of it gets a fresh one.
        st, _, data, _ = self.run_js("console.log('again')")
        self.assertEqual(st, 200, (data, self.d.lines[-3:]))
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"again\n")
        self.assertFalse(set(helpers(pid)) & set(killed))


class GuestioMicroVMLifecycle(unittest.TestCase):
    def test_daemon_killed_leaves_no_helper(self):
        before = set(all_helpers())
        d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_MICROVM_ACCEL": "tcg"},
                   timeout=STARTUP)
        pid = d.proc.pid
        try:
            self.assertTrue(settle(lambda: len(helpers(pid)) >= 1, 60))
            mine = set(helpers(pid))
        finally:
            d.kill()  # SIGKILL: the helpers' parent-death signal takes them
        self.assertTrue(settle(lambda: not (set(all_helpers()) - before) & mine, 10), mine)


if __name__ == "__main__":
    unittest.main(verbosity=2)
