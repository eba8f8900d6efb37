"""The foundation over real HTTP: wire.md §7, §9, §10, §11 with the disabled provider."""
import json
import os
import subprocess
import sys
import tempfile
import hashlib
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, DAEMON, PROC, Daemon, WireCase, js  # noqa: E402


def pb_run(code, protocol=3, floor=b""):
    inner = b"\x0a" + bytes([len(code)]) + code
    msg = b"\x08" + bytes([protocol])
    if floor:
        msg += b"\x12" + bytes([len(floor)]) + floor
    return msg + b"\x52" + bytes([len(inner)]) + inner


class Foundation(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon({"SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_describe_disabled(self):
        st, hdrs, data, rid = self.d.call("Describe", {})
        self.assertEqual(st, 200)
        self.assertEqual(hdrs["plimsoll-request-id"], rid)
        self.assertEqual(hdrs["content-type"], "application/json")
        self.assertNotIn("plimsoll-not-dispatched", hdrs)
        body = json.loads(data)
        self.assertEqual(body["sandbox"], "disabled")
        self.assertEqual(body["isolation"], "none")
        self.assertEqual(body["protocol"], 3)

    def test_describe_binary(self):
        st, hdrs, data, _ = self.d.call("Describe", b"", ctype="application/proto")
        self.assertEqual(st, 200)
        self.assertEqual(hdrs["content-type"], "application/proto")
        self.assertIn(b"\x0a\x08disabled", data)  # field 1, "disabled"
        self.assertIn(b"\x48\x03", data)  # field 9 = 3

    def test_run_disabled_is_unsupported(self):
        self.assertRefused(self.d.call("Run", js("console.log(1)")), "failed_precondition", "unsupported", 400)

    def test_floor_refused_before_admission_and_dispatch(self):
        before = self.d.metrics()
        ans = self.d.call("Run", js("console.log(1)", minimumIsolation="process"))
        body = self.assertRefused(ans, "failed_precondition", "isolation", 400)
        self.assertEqual(body["message"], "provider isolation none is below requested minimum process")
        self.assertNotIn("plimsoll-not-dispatched", ans[1])  # written by the handler, not before it
        after = self.d.metrics()
        self.assertEqual(after["plimsoll_runs_total"], before["plimsoll_runs_total"])
        self.assertEqual(after["plimsoll_refused_total"], before["plimsoll_refused_total"] + 1)

    def test_protocol_checked_first(self):
        body = self.assertRefused(self.d.call("Run", js("x", protocol=0, minimumIsolation="none")),
                                  "invalid_argument", "protocol", 400)
        self.assertEqual(body["message"], "protocol must be stated; this daemon serves protocol 3")
        body = self.assertRefused(self.d.call("Run", {"protocol": 2, "minimumIsolation": "bogus"}),
                                  "unimplemented", "protocol", 501)
        self.assertEqual(body["message"], "this daemon serves protocol 3 and the request states 2; nothing ran")

    def test_floor_parse(self):
        for floor in ("none", "VM ", "unknown", "Process"):
            self.assertRefused(self.d.call("Run", js("x", minimumIsolation=floor)), "invalid_argument", "request")

    def test_payload_kind(self):
        body = self.assertRefused(self.d.call("Run", {"protocol": 3}), "invalid_argument", "request")
        self.assertEqual(body["message"], "payload must be exactly one of javascript, project, or module")
        body = self.assertRefused(self.d.call("Run", {"protocol": 3, "cell": {"language": "python", "code": "1"}}),
                                  "invalid_argument", "request")
        self.assertTrue(body["message"].endswith("a cell runs only in a session (SessionRun)"))

    def test_validation(self):
        for msg in (js(""), js("a" * (256 * 1024 + 1)),
                    {"protocol": 3, "project": {"steps": []}},
                    {"protocol": 3, "project": {"steps": ["x"], "files": [{"path": "../escape.ts", "content": ""}]}},
                    {"protocol": 3, "module": {"model": "VanDerPol", "rows": [{"values": [1]}], "endTime": 0, "step": 1}}):
            self.assertRefused(self.d.call("Run", msg), "invalid_argument", "request")

    def test_negative_timeout_is_clamped_not_refused(self):
        self.assertRefused(self.d.call("Run", js("1", timeoutMs=-5)), "failed_precondition", "unsupported")

    def test_grant_profile_refused(self):
        body = self.assertRefused(self.d.call("Run", {"protocol": 3, "javascript": {"code": "1", "grantProfile": "tickets"}}),
                                  "permission_denied", "permission", 403)
        self.assertEqual(body["message"], 'grant_profile "tickets" is not available to this caller')

    def test_software_rule_unmet(self):
        msg = js("1", softwareRule={"mode": "exact", "identities": ["oci-manifest:x"]})
        self.assertRefused(self.d.call("Run", msg), "failed_precondition", "environment")
        msg = js("1", softwareRule={"mode": "sometimes", "identities": ["x"]})
        self.assertRefused(self.d.call("Run", msg), "invalid_argument", "request")

    def decode_error(self, ans, status=400):
        st, hdrs, data, rid = ans
        self.assertEqual(st, status, data)
        self.assertEqual(hdrs.get("plimsoll-not-dispatched"), "request")
        self.assertEqual(hdrs.get("plimsoll-request-id"), rid)
        body = json.loads(data)
        self.assertNotIn("details", body)
        return body

    def test_malformed_bodies(self):
        self.assertEqual(self.decode_error(self.d.call("Run", b"{not json"))["code"], "invalid_argument")
        self.decode_error(self.d.call("Run", b'{"protocol":3,"protocol":3}'))
        self.decode_error(self.d.call("Run", b'{"protocol":3,"javascript":{"code":"\xff"}}'))
        self.decode_error(self.d.call("Run", b'{"protocol":3,"javascript":{"code":"a\\u0000b"}}'))
        self.decode_error(self.d.call("Run", b'{"protocol":3,"javascript":{"code":"1"},"project":{"steps":["x"]}}'))
        self.decode_error(self.d.call("Run", b'{"protocol":-1}'))
        self.decode_error(self.d.call("Run", b'[]'))
        self.decode_error(self.d.call("Run", b"\xff\xff\xff", ctype="application/proto"))
        self.decode_error(self.d.call("Run", b"", ctype="text/plain"), 415)

    def test_binary_run(self):
        ans = self.d.call("Run", pb_run(b"1"), ctype="application/proto")
        self.assertRefused(ans, "failed_precondition", "unsupported")
        ans = self.d.call("Run", pb_run(b"1", floor=b"vm"), ctype="application/proto")
        self.assertRefused(ans, "failed_precondition", "isolation")
        # a NUL inside a string would be truncated by the C decoder: refused as malformed
        self.decode_error(self.d.call("Run", pb_run(b"a\x00b"), ctype="application/proto"))

    def test_oversize_body(self):
        rid = "e" * 32
        st, hdrs, data = self.d.headers_only(PROC + "Run", {"Content-Type": "application/json",
                                                            "Content-Length": str(8 * 1024 * 1024 + 1),
                                                            "Plimsoll-Request-Id": rid})
        self.assertEqual(st, 400)
        self.assertEqual(hdrs.get("plimsoll-request-id"), rid)
        self.assertEqual(hdrs.get("plimsoll-not-dispatched"), "request")
        self.assertEqual(json.loads(data)["details"][0]["value"], "CAE")

    def test_unknown_procedure_and_paths(self):
        st, hdrs, data, rid = self.d.call("Nope", {})
        self.assertEqual(st, 404)
        self.assertEqual(hdrs["plimsoll-not-dispatched"], "unsupported")
        self.assertEqual(hdrs["plimsoll-request-id"], rid)
        st, hdrs, _ = self.d.request("GET", "/", headers={"Plimsoll-Request-Id": "a" * 32})
        self.assertEqual(st, 404)
        self.assertEqual(hdrs["plimsoll-request-id"], "a" * 32)
        st, hdrs, _ = self.d.request("GET", PROC + "Run")
        self.assertEqual(st, 405)
        self.assertEqual(hdrs["plimsoll-not-dispatched"], "request")

    def test_sessions_unimplemented(self):
        # sessions.md §2 (which wins over wire.md §2): with sessions off only OpenSession is
        # unimplemented; the other two find no session.
        self.assertRefused(self.d.call("OpenSession", {"protocol": 3}), "unimplemented", "unsupported", 501)
        for proc in ("SessionRun", "CloseSession"):
            st, _, data, _ = self.d.call(proc, {"protocol": 3, "sessionId": "0" * 32})
            body = json.loads(data)
            self.assertEqual((st, body["code"]), (404, "not_found"))
            self.assertEqual(body["details"][0]["value"], "CAE")

    def test_request_id_rules(self):
        for bad in ("A" * 32, "a" * 31, "a" * 33, "g" * 32):
            st, hdrs, _, _ = self.d.call("Describe", {}, rid=bad)
            self.assertEqual(st, 200)
            self.assertNotIn("plimsoll-request-id", hdrs)
        st, hdrs, _ = self.d.request("POST", PROC + "Describe", b"{}",
                                     {"Content-Type": "application/json", "Plimsoll-Request-Id": "b" * 32})
        self.assertEqual(hdrs["plimsoll-request-id"], "b" * 32)

    def test_health(self):
        st, hdrs, data = self.d.request("GET", "/healthz", headers={"Plimsoll-Request-Id": "c" * 32})
        self.assertEqual((st, data), (200, b"ok\n"))
        self.assertEqual(hdrs["plimsoll-request-id"], "c" * 32)
        st, hdrs, data = self.d.request("GET", "/readyz", headers={"Plimsoll-Request-Id": "d" * 32})
        self.assertEqual((st, data), (200, b"ready\n"))
        self.assertEqual(hdrs["plimsoll-request-id"], "d" * 32)

    def test_audit_lines_hold_no_code(self):
        self.d.call("Run", js("console.log('SECRET-CODE-42')", traceId="trace-1"))
        self.assertTrue(self.d.wait_events("run", lambda r: r.get("trace_id") == "trace-1"))
        self.assertFalse(any("SECRET-CODE-42" in line for line in self.d.lines))

    def test_zz_still_serving(self):
        st, _, data = self.d.request("GET", "/healthz")
        self.assertEqual((st, data), (200, b"ok\n"))


class Auth(WireCase):
    TOKEN = "t0k3n-" + "x" * 40

    def test_shared_token(self):
        with Daemon({"PLIMSOLL_TOKEN": self.TOKEN}) as d:
            ans = d.call("Describe", {})
            st, hdrs, data, rid = ans
            self.assertEqual(st, 401)
            self.assertEqual(hdrs["plimsoll-not-dispatched"], "permission")
            body = self.assertRefused(ans, "unauthenticated", "permission", 401)
            self.assertEqual(body["message"], "missing bearer token")
            body = self.assertRefused(d.call("Run", js("1"), token="wrong"), "unauthenticated", "permission", 401)
            self.assertEqual(body["message"], "invalid or expired token")
            st, _, _, _ = d.call("Describe", {}, token=self.TOKEN)
            self.assertEqual(st, 200)
            # auth comes before the body is read: an oversize body with a bad token is a 401
            st, _, _ = d.headers_only(PROC + "Run", {"Content-Type": "application/json", "Authorization": "Bearer wrong",
                                                     "Content-Length": str(9 * 1024 * 1024)})
            self.assertEqual(st, 401)

    def test_clients_file_scopes(self):
        def sha(t):
            return hashlib.sha256(t.encode()).hexdigest()
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": sha("alice-tok"), "scopes": ["code:run"]},
                                   {"id": "bob", "token_sha256": sha("bob-tok"), "scopes": ["read"]}]}, f)
        try:
            with Daemon({"PLIMSOLL_CLIENTS_FILE": f.name}) as d:
                self.assertEqual(d.call("Describe", {}, token="alice-tok")[0], 200)
                body = self.assertRefused(d.call("Describe", {}, token="bob-tok"), "permission_denied", "permission", 403)
                self.assertEqual(body["message"], 'token lacks required scope "code:run"')
                self.assertRefused(d.call("Run", js("1"), token="carol"), "unauthenticated", "permission", 401)
                d.call("Run", js("1"), token="alice-tok")
                self.assertTrue(d.wait_events("run", lambda r: r.get("caller") == "alice"))
        finally:
            os.unlink(f.name)


class Admission(WireCase):
    def test_rate_limit_sheds(self):
        with Daemon({"SANDBOX_RATE_PER_MIN": "1", "SANDBOX_RATE_BURST": "1"}) as d:
            self.assertRefused(d.call("Run", js("1")), "failed_precondition", "unsupported")
            body = self.assertRefused(d.call("Run", js("1")), "resource_exhausted", "capacity", 429)
            self.assertEqual(body["message"], "rate limit: 1 runs/min per caller")
            # a floor refusal costs no rate token and is still answered as isolation
            self.assertRefused(d.call("Run", js("1", minimumIsolation="vm")), "failed_precondition", "isolation")
            self.assertEqual(d.metrics()['plimsoll_shed_total{reason="rate"}'], 1)


class Startup(unittest.TestCase):
    def start_fails(self, env, needle):
        d = Daemon(env, expect_start=False)
        rc = d.wait_exit(60)
        self.assertNotEqual(rc, 0)
        self.assertIn(needle, "\n".join(d.lines))

    def test_fail_closed(self):
        self.start_fails({"SANDBOX_PROVIDER": "dokcer"}, "known providers")
        self.start_fails({"SANDBOX_MAX_CONCURRENT": "eight"}, "SANDBOX_MAX_CONCURRENT")
        self.start_fails({"SANDBOX_MIN_ISOLATION": "process"}, "SANDBOX_MIN_ISOLATION")
        self.start_fails({"PLIMSOLL_TOKEN": "short"}, "PLIMSOLL_TOKEN")
        self.start_fails({"PLIMSOLL_ADDR": "nowhere"}, "PLIMSOLL_ADDR")
        self.start_fails({"SANDBOX_PROVIDER": "quickjs"}, "PLIMSOLL_INSECURE")

    def test_unknown_variable_warned(self):
        with Daemon({"PLIMSOLL_TYPO": "1"}) as d:
            pass
        self.assertTrue(any("PLIMSOLL_TYPO" in line for line in d.lines))

    def test_help(self):
        out = subprocess.run([DAEMON, "-h"], capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0)
        for var in ("PLIMSOLL_ADDR", "SANDBOX_PROVIDER", "SANDBOX_MAX_CONCURRENT", "SANDBOX_RATE_PER_MIN"):
            self.assertIn(var, out.stdout)
        self.assertIn("127.0.0.1:8746", out.stdout)

    def test_sigterm_exits_zero(self):
        d = Daemon()
        self.assertEqual(d.stop(), 0)
        self.assertTrue(d.wait_events("stopped"))


class Cli(unittest.TestCase):
    def test_refusal_card(self):
        with Daemon() as d:
            url = "http://127.0.0.1:%d" % d.port
            out = subprocess.run([CLI, "run", "--url", url, "--min-isolation", "vm", "-e", "console.log(1)"],
                                 capture_output=True, text=True, timeout=30)
            self.assertIn("refused before dispatch: isolation", out.stderr)
            self.assertIn("no code ran", out.stderr)
            out2 = subprocess.run([CLI, "run", "--url", url, "--json", "-e", "1"], capture_output=True, text=True, timeout=30)
            card = json.loads(out2.stdout)
            self.assertIn("refused", json.dumps(card))
            self.assertNotEqual(out.returncode, 0)
            desc = subprocess.run([CLI, "describe", "--url", url], capture_output=True, text=True, timeout=30)
            self.assertEqual(desc.returncode, 0, desc.stderr)
            self.assertIn("disabled", desc.stdout + desc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
