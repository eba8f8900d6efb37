"""The paid allowance (issue 23 item 4) through the real daemon on the e2b provider, against the
loopback double of E2B (tests/e2b_double). Only e2b bills by the second, so only there do runs and
sessions draw on SANDBOX_PAID_SECONDS_PER_DAY (the daemon's) and paid_seconds_per_day (a
caller's, in the clients file). The books themselves (reserve, charge, refuse, per caller, the UTC
day rollover with a moved clock) are the C unit test src/core/spend_test.c; this suite shows the
wiring: what a run and a session reserve, the refusals' code, mark and text, the charge on the
audit line, the metrics, and the startup rules. Standard library only.
"""
import base64
import hashlib
import json
import os
import secrets
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase, js  # noqa: E402
from test_e2b import Double  # noqa: E402

ALICE = "alice-" + secrets.token_hex(20)
BOB = "bob-" + secrets.token_hex(20)


def clients_file(tmp, alice_paid=100, bob_paid=None):
    def client(cid, tok, paid):
        c = {"id": cid, "token_sha256": hashlib.sha256(tok.encode()).hexdigest(), "scopes": ["code:run", "metrics"]}
        if paid is not None:
            c["paid_seconds_per_day"] = paid
        return c
    path = os.path.join(tmp, "clients-%s.json" % secrets.token_hex(4))
    with open(path, "w") as f:
        json.dump({"clients": [client("alice", ALICE, alice_paid), client("bob", BOB, bob_paid)]}, f)
    return path


class PaidE2B(WireCase):
    """alice has 100 paid seconds a day of her own, bob none; the daemon has 250."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="plimsoll-paid-")
        cls.dbl = Double()
        env = dict(cls.dbl.env(), PLIMSOLL_CLIENTS_FILE=clients_file(cls.tmp), SANDBOX_RATE_PER_MIN="0",
                   SANDBOX_PER_KEY_CONCURRENT="4", SANDBOX_PAID_SECONDS_PER_DAY="250", SANDBOX_MAX_SESSIONS="2",
                   SANDBOX_SESSION_IDLE="60s")
        try:
            cls.d = Daemon(env, timeout=120)
        except Exception:
            cls.dbl.close()
            raise

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        st = cls.dbl.wait_empty(10)
        cls.dbl.close()
        assert rc == 0, "\n".join(cls.d.lines[-30:])
        assert not st["live"], st["live"]

    def run_js(self, token, timeout_ms):
        ans = self.d.call("Run", js("console.log(6 * 7)", timeoutMs=timeout_ms), token=token)
        return ans, json.loads(ans[2])

    def test_runs_reserve_their_timeout_and_are_charged_their_time(self):
        n0 = self.d.settled_count("run")
        ans, body = self.run_js(ALICE, 5000)  # reserves 5 s + the 30 s teardown bound: fits in 100
        self.assertEqual(ans[0], 200, body)
        self.assertEqual(base64.b64decode(body["javascript"]["stdout"]), b"42\n")
        line = self.d.wait_events("run", n=n0 + 1)[-1]
        self.assertEqual(line["caller"], "alice")
        # charged the wall time of the provider call, a fraction of the 35 s reserved
        self.assertGreater(line["paid_seconds"], 0)
        self.assertLess(line["paid_seconds"], 35)

        # 80 s + 30 s reserves 110, more than alice's 100: refused before any sandbox is made
        creates = len(self.dbl.state()["creates"])
        ans, body = self.run_js(ALICE, 80000)
        self.assertRefused(ans, "resource_exhausted", "capacity")
        self.assertTrue(body["message"].startswith("paid budget: "), body["message"])
        self.assertIn("of its 100 paid seconds", body["message"])
        self.assertEqual(len(self.dbl.state()["creates"]), creates)
        # bob has no allowance of his own: only the daemon's 250 bounds him
        ans, body = self.run_js(BOB, 80000)
        self.assertEqual(ans[0], 200, body)
        m = self.d.metrics(token=ALICE)
        self.assertGreaterEqual(m['plimsoll_shed_total{reason="paid_caller"}'], 1)

    def test_a_session_bills_while_it_runs_and_draws_on_the_daemons_allowance(self):
        # alice cannot open one: an open reserves 2 min + the 60 s idle + 30 s = 210 > 100
        ans = self.d.call("OpenSession", {"protocol": 3}, token=ALICE)
        body = self.assertRefused(ans, "resource_exhausted", "capacity")
        self.assertTrue(body["message"].startswith("paid budget: ") and "this session" in body["message"], body)
        # bob can: his session holds 210 of the daemon's 250 while it runs ...
        st, _, data, _ = self.d.call("OpenSession", {"protocol": 3}, token=BOB)
        self.assertEqual(st, 200, data)
        sid = json.loads(data)["sessionId"]
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": sid, "timeoutMs": 10000,
                                                    "cell": {"language": "javascript", "code": "40 + 2"}}, token=BOB)
        self.assertEqual(st, 200, data)
        # ... so a run of 60 s (90 reserved) no longer fits the daemon's allowance, for anyone
        ans, body = self.run_js(BOB, 60000)
        self.assertRefused(ans, "resource_exhausted", "capacity")
        self.assertIn("daemon's paid allowance", body["message"])
        self.assertNotIn("250", body["message"])  # the daemon's figures are not told to a caller
        m = self.d.metrics(token=ALICE)
        self.assertGreaterEqual(m['plimsoll_shed_total{reason="paid_daemon"}'], 1)
        # closing it charges the seconds it ran and gives the rest back: the run fits again
        n0 = self.d.settled_count("session_ended")
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": sid}, token=BOB)
        self.assertEqual(st, 200, data)
        ended = self.d.wait_events("session_ended", n=n0 + 1)[-1]
        self.assertGreater(ended["paid_seconds"], 0)
        self.assertLess(ended["paid_seconds"], 210)
        ans, body = self.run_js(BOB, 60000)
        self.assertEqual(ans[0], 200, body)


class PaidStartup(WireCase):
    def test_the_allowance_is_refused_where_nothing_bills(self):
        d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_PAID_SECONDS_PER_DAY": "60"},
                   expect_start=False)
        self.assertNotEqual(d.wait_exit(30), 0)
        self.assertTrue(any("SANDBOX_PAID_SECONDS_PER_DAY" in l and "bills nothing" in l for l in d.lines), d.lines)

    def test_a_clients_allowance_where_nothing_bills_is_logged_not_ignored(self):
        tmp = tempfile.mkdtemp(prefix="plimsoll-paid-")
        with Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": clients_file(tmp)}) as d:
            ev = d.events("paid_allowance_unused")
            self.assertEqual(len(ev), 1, d.lines)
            self.assertEqual(ev[0]["clients"], 1)
            st, _, data, _ = d.call("Run", js("1", timeoutMs=100000), token=ALICE)  # quickjs bills nothing
            self.assertEqual(st, 200, data)

    def test_hardened_e2b_needs_an_allowance_on_every_client(self):
        tmp = tempfile.mkdtemp(prefix="plimsoll-paid-")
        dbl = Double()
        try:
            d = Daemon(dict(dbl.env(), PLIMSOLL_HARDENED="1", PLIMSOLL_CLIENTS_FILE=clients_file(tmp),
                            E2B_TEMPLATE="base", SANDBOX_MEMORY_MB="512", PLIMSOLL_METRICS_ADDR="off"),
                       expect_start=False)
            self.assertNotEqual(d.wait_exit(60), 0)
            self.assertTrue(any("paid_seconds_per_day on every client" in l and '"bob"' in l for l in d.lines),
                            d.lines)
            self.assertEqual(dbl.state()["creates"], [])  # refused before any billed sandbox
        finally:
            dbl.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
