"""Grants inside e2b sessions (issue 23 item 1; docs/sessions.md "Grants in sessions") through the
real daemon against the E2B double (tests/e2b_double/), whose emulated egress proxy adds the guard
header outside the guest and forwards to the daemon's guard listener:
- E2B_SESSION_GRANTS=session: the session's sandbox is created with the guard's rule and ONE
  credential for its life; each granted call lends it the call's broker; between calls the guard
  answers it 403; after close it is unknown (401). No network update is made.
- E2B_SESSION_GRANTS=call: the sandbox is created deny-all; each granted call puts the guard's rule
  with a FRESH credential on it (PUT /sandboxes/{id}/network) and takes it off after; each
  credential is dead (401) once its call ended; a failed put-on refuses the call (environment), a
  failed take-off ends the session BOUNDARY_FAILED.
- unset: a granted session call is refused unimplemented, marked unsupported.
Both modes also pass the provider-neutral cases of test_session_grants.py (an allowed route and a
refused one, the shared route budget, max_calls per call, allow_in_sessions). Free lane (loopback
only). Standard library only."""
import json
import os
import shutil
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import test_session_grants as qs  # noqa: E402  (a module, so its quickjs class is not collected here)
from test_e2b import GUARD_HOST, Double, free_port  # noqa: E402

HEADER = "X-Plimsoll-E2B-Guard"
RAW_GUARD = ('(async () => { const r = await fetch("https://%s/v1/e2b/guard", {method: "POST", '
             'body: JSON.stringify({method: "GET", path: "/v1/items/5"})}); '
             'console.log(r.status + " " + (await r.text()).trim()); })().catch(e => console.log("blocked"))'
             % GUARD_HOST)


class _E2BGrants:
    """The e2b setup, mixed in before qs.SessionGrants (so it is not a test case itself)."""
    MODE = None

    @classmethod
    def daemon_env(cls):
        cls.guard_port = free_port()
        cls.dbl = Double({GUARD_HOST: "http://127.0.0.1:%d" % cls.guard_port})
        env = dict(cls.dbl.env(), E2B_GUARD_URL="https://%s/v1/e2b/guard" % GUARD_HOST,
                   PLIMSOLL_GUARD_ADDR="127.0.0.1:%d" % cls.guard_port, SANDBOX_PER_KEY_CONCURRENT="8")
        if cls.MODE:
            env["E2B_SESSION_GRANTS"] = cls.MODE
        return env

    @classmethod
    def setUpClass(cls):
        try:
            super().setUpClass()
        except Exception:
            if getattr(cls, "dbl", None):
                cls.dbl.close()
            raise

    @classmethod
    def tearDownClass(cls):
        lines = list(cls.d.lines)
        super().tearDownClass()
        st = cls.dbl.wait_empty(10)
        cls.dbl.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert not st["live"], "sandboxes left alive: %r" % st["live"]
        assert not any("crg_" in line for line in lines), "a guard token reached the daemon's log"

    def guard_status(self, token):
        req = urllib.request.Request("http://127.0.0.1:%d/v1/e2b/guard" % self.guard_port, method="POST",
                                     data=b'{"method":"GET","path":"/v1/items/2"}', headers={HEADER: token})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def granted_get(self, sid, item):
        code = qs.CALL.format(paths='["/v1/items/%s"]' % item, method="get", body="")
        return self.lines(self.snippet(sid, code))

    def ungranted(self, sid, code):
        msg = {"protocol": 3, "sessionId": sid, "javascript": {"code": code}}
        return self.lines(self.d.call("SessionRun", msg, token="alice-tok"))


class SessionModeE2B(_E2BGrants, qs.SessionGrants):
    MODE = "session"

    def test_one_credential_for_the_sessions_life(self):
        n_creates = len(self.dbl.state()["creates"])
        n_updates = len(self.dbl.state()["network_updates"])
        sid = self.open()
        create = self.dbl.state()["creates"][n_creates]
        net = create["network"]
        self.assertEqual(net["allowOut"], [GUARD_HOST])
        token = net["rules"][GUARD_HOST][0]["transform"]["headers"][HEADER]
        self.assertRegex(token, r"^crg_[0-9a-f]{64}$")
        # between calls the guard knows the credential and refuses it
        st, body = self.guard_status(token)
        self.assertEqual(st, 403, body)
        self.assertIn(b"no call of this session is in progress", body)
        n0 = len(self.up.seen)
        for item in ("1", "2", "3"):
            self.assertEqual(self.granted_get(sid, item)[0], 'OK {"id":"%s","method":"GET"}' % item)
        self.assertEqual([s["path"] for s in self.up.seen[n0:]], ["/v1/items/1", "/v1/items/2", "/v1/items/3"])
        # an ungranted snippet reaches the guard (the rule is on for the session) and is refused
        out = self.ungranted(sid, RAW_GUARD)
        self.assertTrue(out[0].startswith("403 ") and "no call of this session is in progress" in out[0], out)
        self.assertEqual(len(self.up.seen), n0 + 3)
        self.assertEqual(len(self.dbl.state()["network_updates"]), n_updates)  # no update per call
        self.close(sid)
        st, body = self.guard_status(token)  # gone with the session
        self.assertEqual(st, 401, body)


class CallModeE2B(_E2BGrants, qs.SessionGrants):
    MODE = "call"

    def updates_for(self, sandbox, since):
        return [u["network"] for u in self.dbl.state()["network_updates"][since:] if u["sandboxID"] == sandbox]

    def open_with_sandbox(self):
        before = {sb["sandboxID"] for sb in self.dbl.state()["live"]}
        n_creates = len(self.dbl.state()["creates"])
        sid = self.open()
        create = self.dbl.state()["creates"][n_creates]
        self.assertNotIn("allowOut", create["network"])  # deny-all at open
        new = [sb["sandboxID"] for sb in self.dbl.state()["live"] if sb["sandboxID"] not in before]
        self.assertEqual(len(new), 1, new)
        return sid, new[0]

    def test_a_fresh_credential_per_call(self):
        n_updates = len(self.dbl.state()["network_updates"])
        sid, sandbox = self.open_with_sandbox()
        n0 = len(self.up.seen)
        for item in ("1", "2", "3"):
            self.assertEqual(self.granted_get(sid, item)[0], 'OK {"id":"%s","method":"GET"}' % item)
        self.assertEqual(len(self.up.seen), n0 + 3)
        ups = self.updates_for(sandbox, n_updates)
        self.assertEqual(len(ups), 6, ups)  # on and off per call
        on, off = ups[0::2], ups[1::2]
        tokens = [u["rules"][GUARD_HOST][0]["transform"]["headers"][HEADER] for u in on]
        self.assertEqual(len(set(tokens)), 3, "one credential per call")
        for u in on:
            self.assertEqual(u["allowOut"], [GUARD_HOST])
        for u in off:
            self.assertNotIn("allowOut", u)
            self.assertNotIn("rules", u)
        for t in tokens:  # each one died with its call
            self.assertEqual(self.guard_status(t)[0], 401)
        # between calls the guard is unreachable from the sandbox
        self.assertEqual(self.ungranted(sid, RAW_GUARD), ["blocked"])
        self.close(sid)

    def test_a_failed_put_on_refuses_and_a_failed_take_off_ends_the_session(self):
        sid, sandbox = self.open_with_sandbox()
        n0 = len(self.up.seen)
        self.dbl.faults(network_fail=1)
        body = self.assertRefused(self.snippet(sid, qs.CALL.format(paths='["/v1/items/1"]', method="get", body="")),
                                  "failed_precondition", "environment")
        self.assertIn("guard's rule could not be put on", body["message"])
        self.assertEqual(len(self.up.seen), n0)  # nothing ran
        self.assertEqual(self.granted_get(sid, "4")[0], 'OK {"id":"4","method":"GET"}')  # the session goes on
        self.dbl.faults(network_off_fail=1)
        st, _, data, _ = self.snippet(sid, qs.CALL.format(paths='["/v1/items/5"]', method="get", body=""))
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data).get("ended"), "SESSION_END_BOUNDARY_FAILED", data)
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": sid}, token="alice-tok")
        self.assertEqual(st, 200, data)
        self.assertIn("BOUNDARY_FAILED", json.loads(data).get("ended", ""), data)
        self.dbl.faults()


class UnsetE2B(_E2BGrants, qs.SessionGrants):
    """E2B_SESSION_GRANTS unset: the guard serves runs, sessions take no grant."""
    MODE = None

    def test_a_granted_session_call_is_unsupported(self):
        sid = self.open()
        body = self.assertRefused(self.snippet(sid, "1"), "unimplemented", "unsupported", 501)
        self.assertIn("Grants in sessions", body["message"])
        # a profile without allow_in_sessions is still refused for that first
        self.assertRefused(self.snippet(sid, "1", profile="nosess"), "permission_denied", "permission", 403)
        self.close(sid)


# The provider-neutral cases run in both modes; with the mode unset they cannot.
for _name in [n for n in dir(qs.SessionGrants) if n.startswith("test_")]:
    setattr(UnsetE2B, _name, None)
del _name

if __name__ == "__main__":
    unittest.main(verbosity=2)
