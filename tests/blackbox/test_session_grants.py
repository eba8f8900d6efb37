"""Grants inside sessions (issue 23 item 1) through the real daemon on quickjs, whose session
snippets carry a grant the way its runs do: a profile with allow_in_sessions is accepted on
SessionRun, one without is refused permission_denied (marked permission); the session's calls share
one route_max_calls budget while max_calls stays per call; an allowed route reaches the upstream
with the host-side credential and a route outside the profile is refused by the broker. The same
cases run on docker (test_session_grants_docker.py) and the e2b modes on the E2B double
(test_e2b_session_grants.py). Standard library only."""
import base64
import hashlib
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, Upstream, WireCase  # noqa: E402

TOKEN = "upstream-secret-token-0123456789"

CALL = ('(async () => {{ for (const p of {paths}) {{ try {{ const r = await host.{method}(p{body}); '
        'console.log("OK " + JSON.stringify(r)); }} catch (e) {{ console.log("ERR " + e.message); }} }} }})()')


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


class SessionGrants(WireCase):
    """The cases every provider that carries session grants must pass; test_session_grants_docker.py
    runs them on docker by overriding daemon_env."""
    STARTUP = 240  # seconds to a serving daemon (a microvm daemon boots and proves VMs first)

    @classmethod
    def daemon_env(cls):
        return {"SANDBOX_PROVIDER": "quickjs"}

    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        clients = os.path.join(cls.tmp, "clients.json")
        grants = os.path.join(cls.tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": sha("alice-tok"), "scopes": ["code:run"]}]}, f)
        base = "http://127.0.0.1:%d" % cls.up.port
        with open(grants, "w") as f:
            json.dump({"profiles": {
                "sess": {"base_url": base, "allow": ["GET /v1/items/*", "POST /v1/items/*"],
                         "route_max_calls": {"POST /v1/items/*": 3}, "max_calls": 2, "allowed_callers": ["alice"],
                         "token": {"type": "static", "env": "ITEMS_TOKEN"}, "allow_in_sessions": True},
                "nosess": {"base_url": base, "allow": ["GET /v1/items/*"], "allowed_callers": ["alice"],
                           "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        cls.d = Daemon(dict(cls.daemon_env(), PLIMSOLL_CLIENTS_FILE=clients, PLIMSOLL_GRANTS_FILE=grants,
                            ITEMS_TOKEN=TOKEN, SANDBOX_RATE_PER_MIN="0", SANDBOX_MAX_SESSIONS="4"), timeout=cls.STARTUP)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        cls.up.close()

    def open(self):
        st, _, data, _ = self.d.call("OpenSession", {"protocol": 3}, token="alice-tok")
        self.assertEqual(st, 200, data)
        return json.loads(data)["sessionId"]

    def snippet(self, sid, code, profile="sess"):
        msg = {"protocol": 3, "sessionId": sid, "javascript": {"code": code, "grantProfile": profile}}
        return self.d.call("SessionRun", msg, token="alice-tok")

    def lines(self, answer):
        st, _, data, _ = answer
        self.assertEqual(st, 200, data)
        return base64.b64decode(json.loads(data)["run"]["javascript"].get("stdout", "")).decode().splitlines()

    def close(self, sid):
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": sid}, token="alice-tok")
        self.assertEqual(st, 200, data)

    def test_an_allowed_route_is_called_and_another_refused(self):
        sid = self.open()
        n0 = len(self.up.seen)
        out = self.lines(self.snippet(sid, CALL.format(paths='["/v1/items/7", "/v2/other"]', method="get", body="")))
        self.assertEqual(out[0], 'OK {"id":"7","method":"GET"}', out)
        self.assertTrue(out[1].startswith("ERR") and "not permitted by sandbox capability" in out[1], out)
        seen = self.up.seen[n0:]
        self.assertEqual([s["path"] for s in seen], ["/v1/items/7"])  # the refused route never left
        headers = {k.lower(): v for k, v in seen[0]["headers"].items()}
        self.assertEqual(headers.get("authorization"), "Bearer " + TOKEN)
        audit = self.d.wait_events("run", lambda e: e.get("session_call") and e.get("grant_profile") == "sess")
        self.assertTrue(audit and audit[-1]["host_calls_allowed"] >= 1, audit)
        self.close(sid)

    def test_the_route_budget_is_shared_by_the_sessions_calls(self):
        sid = self.open()
        post = CALL.format(paths='["/v1/items/1"]', method="post", body=", {}")
        for _ in range(3):  # route_max_calls 3 for POST, across calls
            self.assertTrue(self.lines(self.snippet(sid, post))[0].startswith("OK"))
        out = self.lines(self.snippet(sid, post))
        self.assertIn("call budget for this route is exhausted", out[0])
        # GET has no route cap: the session goes on
        self.assertTrue(self.lines(self.snippet(sid, CALL.format(paths='["/v1/items/2"]', method="get", body="")))[0]
                        .startswith("OK"))
        self.close(sid)
        # another session starts with its own budget
        sid = self.open()
        self.assertTrue(self.lines(self.snippet(sid, post))[0].startswith("OK"))
        self.close(sid)

    def test_max_calls_is_per_call(self):
        sid = self.open()
        three = CALL.format(paths='["/v1/items/1", "/v1/items/2", "/v1/items/3"]', method="get", body="")
        out = self.lines(self.snippet(sid, three))
        self.assertEqual([l[:2] for l in out[:2]], ["OK", "OK"], out)
        self.assertIn("call budget for this run is exhausted", out[2])
        out = self.lines(self.snippet(sid, three))  # the next call has its own max_calls
        self.assertEqual([l[:2] for l in out[:2]], ["OK", "OK"], out)
        self.close(sid)

    def test_a_profile_without_allow_in_sessions_is_refused(self):
        sid = self.open()
        body = self.assertRefused(self.snippet(sid, "1", profile="nosess"), "permission_denied", "permission", 403)
        self.assertIn("allow_in_sessions", body["message"])
        # an unknown profile gets Run's words, as for any caller without it
        body = self.assertRefused(self.snippet(sid, "1", profile="nope"), "permission_denied", "permission", 403)
        self.assertEqual(body["message"], 'grant_profile "nope" is not available to this caller')
        self.close(sid)


if __name__ == "__main__":
    unittest.main(verbosity=2)
