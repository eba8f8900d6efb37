"""Grants through the real daemon (issue 6): profile selection, the quickjs transport, and the
upstream seeing exactly the allowed calls with the host-side credential."""
import hashlib
import http.server
import json
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase, js  # noqa: E402

TOKEN = "upstream-secret-token-0123456789"


class Upstream:
    """A loopback HTTP API that records every request it receives."""

    def __init__(self):
        self.seen = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                   "body": body})
                if self.path.startswith("/v1/items/"):
                    data = json.dumps({"id": self.path.rsplit("/", 1)[1], "method": self.command}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Set-Cookie", "session=leak")
                else:
                    data = b"nope"
                    self.send_response(404)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


class Grants(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        cls.grants = os.path.join(cls.tmp, "grants.json")
        with open(cls.clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": sha("alice-tok"), "scopes": ["code:run"]},
                                   {"id": "bob", "token_sha256": sha("bob-tok"), "scopes": ["code:run"]}]}, f)
        with open(cls.grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*", "POST /v1/items/*"],
                "allowed_callers": ["alice"],
                "scopes": ["items:read"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"},
                "max_calls": 5}}}, f)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                        "PLIMSOLL_GRANTS_FILE": cls.grants, "ITEMS_TOKEN": TOKEN, "SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        cls.up.close()

    def grant_run(self, code, token="alice-tok", profile="items"):
        msg = {"protocol": 3, "javascript": {"code": code, "grantProfile": profile}}
        return self.d.call("Run", msg, token=token)

    def test_describe_says_javascript_grants(self):
        st, _, data, _ = self.d.call("Describe", {}, token="alice-tok")
        d = json.loads(data)
        self.assertTrue(d.get("supportsJavascriptGrants"))
        self.assertFalse(d.get("supportsProjectGrants", False))

    def test_profile_refusals_use_the_same_words(self):
        a = self.assertRefused(self.grant_run("1", token="bob-tok"), "permission_denied", "permission", 403)
        b = self.assertRefused(self.grant_run("1", profile="nope"), "permission_denied", "permission", 403)
        self.assertEqual(a["message"], 'grant_profile "items" is not available to this caller')
        self.assertEqual(b["message"], 'grant_profile "nope" is not available to this caller')

    def test_allowed_call_reaches_upstream_with_host_credential(self):
        n0 = len(self.up.seen)
        code = ('host.post("/v1/items/42", {"a": 1}).then(r => console.log(JSON.stringify(r)))'
                '.catch(e => console.log("ERR", e.message))')
        st, _, data, _ = self.grant_run(code)
        self.assertEqual(st, 200, data)
        r = json.loads(data)
        import base64
        outp = base64.b64decode(r["javascript"].get("stdout", ""))
        self.assertEqual(json.loads(outp), {"id": "42", "method": "POST"})
        seen = self.up.seen[n0:]
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0]["path"], "/v1/items/42")
        self.assertEqual(seen[0]["headers"].get("Authorization"), "Bearer " + TOKEN)
        self.assertEqual(json.loads(seen[0]["body"]), {"a": 1})
        self.assertNotIn("Cookie", seen[0]["headers"])
        self.assertNotIn(TOKEN.encode(), base64.b64decode(r["javascript"].get("stdout", "")))
        audit = [e for e in self.d.events("run") if e.get("grant_profile") == "items"]
        self.assertTrue(audit)
        self.assertFalse(any(TOKEN in line for line in self.d.lines))

    def test_forbidden_route_never_leaves(self):
        n0 = len(self.up.seen)
        code = ('host.get("/v1/admin/x").then(() => console.log("sent"), e => console.log("refused", e.message));'
                'host.get("/v1/items/%2e%2e").then(() => console.log("sent"), e => console.log("refused"))')
        st, _, data, _ = self.grant_run(code)
        self.assertEqual(st, 200, data)
        self.assertEqual(len(self.up.seen), n0)

    def test_budget(self):
        n0 = len(self.up.seen)
        code = ('(async () => { let ok = 0, no = 0; for (let i = 0; i < 8; i++) {'
                ' try { await host.get("/v1/items/" + i); ok++ } catch (e) { no++ } }'
                ' console.log(ok, no) })()')
        st, _, data, _ = self.grant_run(code)
        import base64
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"5 3\n")
        self.assertEqual(len(self.up.seen) - n0, 5)

    def test_no_grant_no_host(self):
        st, _, data, _ = self.d.call("Run", js("console.log(typeof host)"), token="alice-tok")
        import base64
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"undefined\n")


class BadFiles(unittest.TestCase):
    def start_fails(self, profile, needle):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"profiles": {"p": profile}}, f)
        try:
            d = Daemon({"PLIMSOLL_GRANTS_FILE": f.name}, expect_start=False)
            self.assertNotEqual(d.wait_exit(60), 0)
            text = "\n".join(d.lines)
            self.assertIn('profile "p"', text)
            self.assertIn(needle, text)
        finally:
            os.unlink(f.name)

    def test_bad_profiles_stop_startup(self):
        base = {"base_url": "https://api.example", "allow": ["GET /v1/*"], "allowed_callers": ["alice"]}
        self.start_fails(dict(base, base_url="https://api.example/api"), "base_url")
        self.start_fails(dict(base, scopes=["code:run"]), "scopes")
        self.start_fails(dict(base, base_url="http://api.example"), "base_url")
        self.start_fails(dict(base, extra=1), "extra")


if __name__ == "__main__":
    unittest.main(verbosity=2)
