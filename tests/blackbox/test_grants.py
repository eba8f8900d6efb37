"""Grants through the real daemon (issue 6): profile selection, the quickjs transport, and the
upstream seeing exactly the allowed calls with the host-side credential."""
import hashlib
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, Upstream, WireCase, js  # noqa: E402

TOKEN = "upstream-secret-token-0123456789"


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
                                   {"id": "bob", "token_sha256": sha("bob-tok"), "scopes": ["code:run"]},
                                   {"id": "prom", "token_sha256": sha("prom-tok"), "scopes": ["metrics"]}]}, f)
        with open(cls.grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*", "POST /v1/items/*"],
                "allowed_callers": ["alice"],
                "scopes": ["items:read"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"},
                "max_calls": 5},
                "bulk": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*"],
                "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
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
        audit = self.d.wait_events("run", lambda e: e.get("grant_profile") == "items")
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
        key = 'plimsoll_host_call_verdicts_total{profile="items",verdict="%s"}'
        m0 = self.d.metrics("prom-tok")
        code = ('(async () => { let ok = 0, no = 0; for (let i = 0; i < 8; i++) {'
                ' try { await host.get("/v1/items/" + i); ok++ } catch (e) { no++ } }'
                ' console.log(ok, no) })()')
        st, _, data, _ = self.grant_run(code)
        import base64
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"5 3\n")
        self.assertEqual(len(self.up.seen) - n0, 5)
        m1 = self.d.metrics("prom-tok")
        self.assertEqual(m1[key % "allowed"] - m0[key % "allowed"], 5)
        self.assertEqual(m1[key % "denied"] - m0[key % "denied"], 3)
        self.assertIn('plimsoll_host_call_verdicts_total{profile="bulk",verdict="shed"}', m1)

    def stdout_of(self, data):
        import base64
        return base64.b64decode(json.loads(data).get("javascript", {}).get("stdout", "")).decode()

    def test_attack_targets_never_leave(self):
        """The issue's attacks: each is refused and the upstream sees none of them."""
        n0 = len(self.up.seen)
        targets = ["/v1/items/%2e%2e", "/v1/items/%2E%2E", "/v1/items/%2f", "/v1/items/..;", "/v1/items/..",
                   "/v1//items/1", "//v1/items/1", "/v1/items\\1", "/v1/items/t\u00f6k", "/v1/items/1?x=1",
                   "/v1/items/1#f", "/v1/items", "/v1/items/1/2", "/v1/items/;x", "v1/items/1", ""]
        code = ('(async () => { const t = %s; let refused = 0;'
                ' for (const p of t) { try { await host.get(p) } catch (e) { refused++ } }'
                ' console.log(refused + "/" + t.length) })()' % json.dumps(targets))
        st, _, data, _ = self.grant_run(code)
        self.assertEqual(st, 200, data)
        self.assertEqual(self.stdout_of(data), "%d/%d\n" % (len(targets), len(targets)))
        self.assertEqual(self.up.seen[n0:], [])

    def test_token_never_reaches_the_guest(self):
        """Everything the guest can reach: globals, the client's source, process, its own errors."""
        code = r"""
(async () => {
  const seen = new Set(), visited = new Set();
  const walk = (o, depth) => {
    if (depth > 4 || o === null || (typeof o !== "object" && typeof o !== "function") || visited.has(o)) return;
    visited.add(o);
    for (const k of Reflect.ownKeys(o)) {
      let v; try { v = o[k] } catch (e) { continue }
      seen.add(String(k));
      if (typeof v === "string") seen.add(v);
      if (typeof v === "function") {
        try { const t = Function.prototype.toString.call(v); if (!t.includes("[native code]")) seen.add(t) } catch (e) {}
      }
      walk(v, depth + 1);
    }
  };
  walk(globalThis, 0);
  try { seen.add(JSON.stringify(typeof process === "object" ? process.env : null)) } catch (e) {}
  try { await host.get("/v1/items/7").then(r => seen.add(JSON.stringify(r))) } catch (e) { seen.add(e.message) }
  try { await host.get("/v1/admin") } catch (e) { seen.add(e.message) }
  console.log([...seen].join("\n"));
})()"""
        st, _, data, _ = self.grant_run(code)
        self.assertEqual(st, 200, data)
        out = self.stdout_of(data)
        self.assertFalse(json.loads(data)["javascript"].get("stdoutTruncated"), "the probe's output was cut")
        self.assertIn('"id":"7"', out)  # the probe did run and reach the upstream
        self.assertIn("host api call not permitted", out)
        self.assertNotIn(TOKEN, out)
        self.assertNotIn(TOKEN, data.decode("utf-8", "replace"))

    def test_300_calls_and_64_at_once(self):
        """Default budget 256: 300 calls give 256 answers and 44 refusals; 64 calls at once finish."""
        n0 = len(self.up.seen)
        code = ('(async () => { let ok = 0, no = 0;'
                ' const one = p => host.get(p).then(() => ok++, e => { no++ });'
                ' await Promise.all(Array.from({length: 64}, (_, i) => one("/v1/items/" + i)));'
                ' for (let i = 64; i < 300; i++) await one("/v1/items/" + i);'
                ' console.log(ok + " " + no) })()')
        msg = {"protocol": 3, "timeoutMs": "20000", "javascript": {"code": code, "grantProfile": "bulk"}}
        st, _, data, _ = self.d.call("Run", msg, token="alice-tok")
        self.assertEqual(st, 200, data)
        self.assertEqual(self.stdout_of(data), "256 44\n")
        self.assertEqual(len(self.up.seen) - n0, 256)

    def test_redirect_is_not_followed(self):
        code = 'host.get("/v1/items/redirect").then(() => console.log("ok"), e => console.log(e.message))'
        st, _, data, _ = self.grant_run(code)
        self.assertEqual(st, 200, data)
        self.assertTrue(self.stdout_of(data).startswith("host api 302"), self.stdout_of(data))

    def test_upstream_that_never_answers(self):
        """The run ends at its deadline although its host call hangs; the daemon stays responsive and
        the grant ends (the broker cancels the call)."""
        code = 'host.get("/v1/items/hang").then(() => console.log("answered"))'
        msg = {"protocol": 3, "timeoutMs": "1000", "javascript": {"code": code, "grantProfile": "bulk"}}
        import time
        t0 = time.monotonic()
        st, _, data, _ = self.d.call("Run", msg, token="alice-tok")
        self.assertEqual(st, 200, data)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertTrue(json.loads(data)["javascript"].get("timedOut"), data)
        self.assertEqual(self.d.call("Describe", {}, token="alice-tok")[0], 200)

    def test_no_grant_no_host(self):
        st, _, data, _ = self.d.call("Run", js("console.log(typeof host)"), token="alice-tok")
        import base64
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"undefined\n")


class ReferenceFile(WireCase):
    """Issue 14 §4: a grants file written the reference's way, with every key it accepts, loads
    and behaves: "*" callers, preamble_file, a JWT with ttl_sec and key_id."""

    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        clients = os.path.join(cls.tmp, "clients.json")
        grants = os.path.join(cls.tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "carol", "token_sha256": sha("carol-tok"), "scopes": ["code:run"]}]}, f)
        with open(os.path.join(cls.tmp, "inventory.client.js"), "w") as f:
            f.write("globalThis.items = { one: id => inventory.get('/v1/items/' + id) };\n")
        with open(grants, "w") as f:
            json.dump({"profiles": {"inventory": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*", "GET /v1/items"],
                "catalog": ["GET /v1/items", "GET /v1/items/*", "DELETE /v1/items/*"],
                "batch_of": {"GET /v1/items": ["GET /v1/items/*"]},
                "allowed_callers": ["*"],
                "scopes": ["inventory:read"],
                "token": {"type": "jwt", "secret_env": "INVENTORY_JWT_SECRET", "ttl_sec": 45,
                          "issuer": "plimsoll", "audience": "inventory", "key_id": "k-2026"},
                "global": "inventory",
                "preamble_file": "inventory.client.js",
                "health_check": "GET /v1/items",
                "advice": "caller",
                "advice_retention": "detailed",
                "allow_in_sessions": True}}}, f)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": clients,
                        "PLIMSOLL_GRANTS_FILE": grants, "SANDBOX_RATE_PER_MIN": "0",
                        "INVENTORY_JWT_SECRET": "0123456789abcdef0123456789abcdef-secret"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        cls.up.close()

    def test_loads_and_behaves(self):
        import base64
        n0 = len(self.up.seen)
        code = ('items.one("7").then(r => console.log(JSON.stringify(r)))'
                '.catch(e => console.log("ERR", e.message))')
        msg = {"protocol": 3, "javascript": {"code": code, "grantProfile": "inventory"}}
        st, _, data, _ = self.d.call("Run", msg, token="carol-tok")  # carol is not listed: "*"
        self.assertEqual(st, 200, data)
        r = json.loads(data)
        self.assertEqual(json.loads(base64.b64decode(r["javascript"]["stdout"])), {"id": "7", "method": "GET"})
        self.assertNotIn("advice", r)  # no advisor here (docs/grants.md)
        seen = self.up.seen[n0:]
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0]["path"], "/v1/items/7")
        auth = seen[0]["headers"].get("Authorization", "")
        self.assertTrue(auth.startswith("Bearer "), auth)

        def part(i):
            p = auth[7:].split(".")[i]
            return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
        self.assertEqual(part(0), {"alg": "HS256", "typ": "JWT", "kid": "k-2026"})
        claims = part(1)
        self.assertEqual(claims["sub"], "carol")
        self.assertEqual(claims["aud"], "inventory")
        self.assertEqual(claims["exp"] - claims["iat"], 45)
        # the catalog grants nothing: a route only in the catalog never leaves
        code = 'inventory.del("/v1/items/7").then(() => console.log("sent"), e => console.log("refused"))'
        msg = {"protocol": 3, "javascript": {"code": code, "grantProfile": "inventory"}}
        st, _, data, _ = self.d.call("Run", msg, token="carol-tok")
        self.assertEqual(st, 200, data)
        self.assertEqual(base64.b64decode(json.loads(data)["javascript"]["stdout"]), b"refused\n")
        self.assertEqual(len(self.up.seen), n0 + 1)


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
        self.start_fails(dict(base, advice="loud"), "advice")
        self.start_fails(dict(base, preamble_file="../../etc/hostname"), "preamble_file")


if __name__ == "__main__":
    unittest.main(verbosity=2)
