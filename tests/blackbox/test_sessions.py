"""Sessions through the real daemon on the quickjs provider (issue 13; sessions.md §8).

The chain is checked here independently of the C code: request, result and record digests are
recomputed in Python (wire.md §13, sessions.md §5), as a client would.
"""
import base64
import hashlib
import json
import os
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, DETAIL, Daemon, WireCase, _Stream, descendants  # noqa: E402
import subprocess  # noqa: E402

BASE = {"SANDBOX_PROVIDER": "quickjs", "SANDBOX_RATE_PER_MIN": "0", "SANDBOX_MAX_CONCURRENT": "8",
        "SANDBOX_PER_KEY_CONCURRENT": "8"}


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


def cell_request_digest(req):
    s = _Stream("plimsoll.run-request.v2")
    s.field("protocol", req.get("protocol", 0))
    s.field("minimum_isolation", req.get("minimumIsolation", ""))
    s.field("timeout_ms", req.get("timeoutMs", 0))
    rule = req.get("softwareRule", {})
    s.field("software_mode", rule.get("mode", ""))
    ids = rule.get("identities", [])
    s.field("software_identities", len(ids))
    for i in ids:
        s.field("software_identity", i)
    c = req["cell"]
    s.field("kind", "cell")
    s.field("language", c.get("language", ""))
    s.field("code", c.get("code", ""))
    files = c.get("files", [])
    s.field("files", len(files))
    for f in files:
        s.field("file_path", f["path"])
        s.field("file_content", f["content"])
    return s.hex()


def cell_result_digest(run):
    s = _Stream("plimsoll.run-result.v1")
    c = run["cell"]
    s.field("kind", "cell")
    s.field("exit_code", c.get("exitCode", 0))
    s.field("timed_out", c.get("timedOut", False))
    s.field("stdout", base64.b64decode(c.get("stdout", "")))
    s.field("stderr", base64.b64decode(c.get("stderr", "")))
    s.field("stdout_truncated", c.get("stdoutTruncated", False))
    s.field("stderr_truncated", c.get("stderrTruncated", False))
    s.field("interpreter_started", c.get("interpreterStarted", False))
    s.field("interpreter_ended", c.get("interpreterEnded", False))
    return s.hex()


def record_digest(rec):
    s = _Stream("plimsoll.run-record.v%d" % rec["version"])
    s.field("request_sha256", rec.get("requestSha256", ""))
    s.field("result_sha256", rec.get("resultSha256", ""))
    if rec["version"] >= 3:
        s.field("unanswered", rec.get("unanswered", ""))
    for name, key in (("provider", "provider"), ("isolation", "isolation"), ("environment", "environment"),
                      ("policy", "policy"), ("software_identity", "softwareIdentity"),
                      ("software_rule_id", "softwareRuleId")):
        s.field(name, rec.get(key, ""))
    s.field("started_unix_ms", int(rec.get("startedUnixMs", "0")))
    s.field("ended_unix_ms", int(rec.get("endedUnixMs", "0")))
    s.field("session", rec.get("session", ""))
    s.field("sequence", int(rec.get("sequence", "0")))
    s.field("previous_sha256", rec.get("previousSha256", ""))
    return s.hex()


def session_ended_reason(detail_value):
    raw = base64.b64decode(detail_value + "=" * (-len(detail_value) % 4))
    assert raw[0] == 0x08
    return raw[1]


class Client:
    """What a client keeps per session: the id, the fingerprint and the chain (sessions.md §5.2)."""

    def __init__(self, case, d, token=None):
        self.case, self.d, self.token = case, d, token

    def open(self, **kw):
        msg = {"protocol": 3}
        msg.update(kw)
        st, _, data, _ = self.d.call("OpenSession", msg, token=self.token)
        self.case.assertEqual(st, 200, data)
        o = json.loads(data)
        self.id, self.fp = o["sessionId"], o["session"]
        self.case.assertRegex(self.id, r"^[0-9a-f]{32}$")
        self.case.assertEqual(self.fp, sha(self.id))
        self.calls, self.last = 0, ""
        return o

    def cell(self, code, language="javascript", **kw):
        req = {"protocol": 3, "sessionId": self.id, "cell": {"language": language, "code": code}}
        req.update(kw)
        st, _, data, _ = self.d.call("SessionRun", req, token=self.token)
        self.case.assertEqual(st, 200, data)
        resp = json.loads(data)
        run = resp["run"]
        rec = run["record"]
        # the client's chain checks
        self.case.assertEqual(rec["version"], 2)
        self.case.assertEqual(rec["requestSha256"], cell_request_digest(req))
        self.case.assertEqual(rec["resultSha256"], cell_result_digest(run))
        self.case.assertEqual(rec["recordSha256"], record_digest(rec))
        self.case.assertEqual(rec["session"], self.fp)
        self.case.assertEqual(int(rec["sequence"]), self.calls + 1)
        self.case.assertEqual(rec.get("previousSha256", ""), self.last)
        self.calls, self.last = self.calls + 1, rec["recordSha256"]
        return resp

    def close(self):
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": self.id}, token=self.token)
        self.case.assertEqual(st, 200, data)
        c = json.loads(data)
        self.case.assertEqual(c["session"], self.fp)
        self.case.assertEqual(int(c.get("calls", "0")), self.calls)
        self.case.assertEqual(c.get("lastRecordSha256", ""), self.last)
        return c


def out(resp, stream="stdout"):
    return base64.b64decode(resp["run"]["cell"].get(stream, "")).decode()


class SessionsOff(WireCase):
    """Item 2: the default daemon keeps no sessions and nothing changes for Run."""

    def test_off_by_default(self):
        with Daemon(dict(BASE, PLIMSOLL_INSECURE="1")) as d:
            st, _, data, _ = d.call("Describe", {})
            desc = json.loads(data)
            self.assertNotIn("supportsSessions", desc)
            self.assertNotIn("sessionEnvironment", desc)
            self.assertRefused(d.call("OpenSession", {"protocol": 3}), "unimplemented", "unsupported")
            st, _, data, _ = d.call("SessionRun", {"protocol": 3, "sessionId": "0" * 32,
                                                  "cell": {"language": "javascript", "code": "1"}})
            self.assertEqual(json.loads(data)["code"], "not_found")
            st, _, data, _ = d.call("CloseSession", {"protocol": 3, "sessionId": "0" * 32})
            self.assertEqual(json.loads(data)["code"], "not_found")
            st, _, data, _ = d.call("Run", {"protocol": 3, "javascript": {"code": "console.log(1)"}})
            self.assertEqual(st, 200)
            self.assertEqual(d.events("session_smoke_passed"), [])

    def test_sessions_on_a_provider_without_them_stop_startup(self):
        d = Daemon({"SANDBOX_MAX_SESSIONS": "2"}, expect_start=False)
        self.assertEqual(d.wait_exit(), 1)
        self.assertTrue(any("keeps no sessions" in l for l in d.lines), d.lines)

    def test_malformed_session_variable_stops_startup(self):
        d = Daemon(dict(BASE, PLIMSOLL_INSECURE="1", SANDBOX_SESSION_LIFETIME="30"), expect_start=False)
        self.assertEqual(d.wait_exit(), 1)
        self.assertTrue(any("SANDBOX_SESSION_LIFETIME" in l for l in d.lines), d.lines)


class Sessions(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        with open(cls.clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": sha("alice-tok"), "scopes": ["code:run"]},
                                   {"id": "bob", "token_sha256": sha("bob-tok"), "scopes": ["code:run"]}]}, f)
        cls.d = Daemon(dict(BASE, PLIMSOLL_CLIENTS_FILE=cls.clients, SANDBOX_MAX_SESSIONS="4",
                            SANDBOX_MAX_SESSIONS_PER_CALLER="3", SANDBOX_SESSION_IDLE="1m"))

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_startup_smoke_and_describe(self):
        self.assertEqual(len(self.d.events("session_smoke_passed")), 1)
        st, _, data, _ = self.d.call("Describe", {}, token="alice-tok")
        desc = json.loads(data)
        self.assertTrue(desc["supportsSessions"])
        self.assertEqual(desc["sessionLifetimeMs"], 30 * 60 * 1000)
        self.assertEqual(desc["sessionIdleTimeoutMs"], 60 * 1000)
        self.assertEqual(desc["maxSessionsPerCaller"], 3)
        env = desc["sessionEnvironment"]
        self.assertRegex(env["identity"], r"^quickjs-ng:sha256:[0-9a-f]{64}$")
        self.assertEqual(env["languages"], ["javascript"])

    def test_cells_keep_state_and_chain(self):
        c = Client(self, self.d, "alice-tok")
        o = c.open(languages=["python", "javascript"])
        self.assertEqual(o["isolation"], "process")
        self.assertEqual(o["sandbox"], "quickjs")
        r = c.cell("globalThis.n = 41; let kept = 'yes'; function twice(x) { return 2 * x }")
        self.assertEqual(r["run"]["cell"].get("exitCode", 0), 0)
        self.assertTrue(r["run"]["cell"].get("interpreterStarted"))
        r = c.cell("console.log(n + 1, kept, twice(21))")
        self.assertEqual(out(r), "42 yes 42\n")
        self.assertFalse(r["run"]["cell"].get("interpreterStarted", False))
        # a raising cell exits 1 and keeps the state
        r = c.cell("n = 7; throw new Error('boom')")
        self.assertEqual(r["run"]["cell"]["exitCode"], 1)
        self.assertIn("boom", out(r, "stderr"))
        r = c.cell("console.log(n)")
        self.assertEqual(out(r), "7\n")
        # top-level await works
        r = c.cell("const v = await Promise.resolve(5); console.log(v)")
        self.assertEqual(out(r), "5\n")
        # the completion value is printed in inspect form, as a REPL does; undefined is not
        r = c.cell("v * 2")
        self.assertEqual(out(r), "10\n")
        r = c.cell("'str'")
        self.assertEqual(out(r), "'str'\n")
        r = c.cell("({k: [1, 'b']})")
        self.assertEqual(out(r), "{ k: [ 1, 'b' ] }\n")
        r = c.cell("let w = 1")
        self.assertEqual(out(r), "")
        summary = c.close()
        self.assertEqual(summary["ended"], "SESSION_END_CLOSED")
        self.assertEqual(int(summary["calls"]), 9)
        # closed: a call or a second close finds nothing
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "1"}}, token="alice-tok")
        self.assertEqual(json.loads(data)["code"], "not_found")
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id}, token="alice-tok")
        self.assertEqual(json.loads(data)["code"], "not_found")
        events = self.d.wait_events("run", lambda e: e.get("session") == c.fp, n=9)
        self.assertEqual(sorted(e["session_call"] for e in events), list(range(1, 10)))
        # logs carry the fingerprint, never the id (item 44)
        self.assertFalse(any(c.id in l for l in self.d.lines))
        self.assertTrue(self.d.events("session_opened") and self.d.events("session_closed"))

    def test_endless_cell_ends_the_interpreter_not_the_session(self):
        c = Client(self, self.d, "alice-tok")
        c.open()
        c.cell("globalThis.k = 1")
        r = c.cell("for (;;) {}", timeoutMs=300)
        cell = r["run"]["cell"]
        self.assertEqual(cell["exitCode"], 124)
        self.assertTrue(cell["timedOut"])
        self.assertTrue(cell["interpreterEnded"])
        r = c.cell("console.log(typeof k)")
        self.assertTrue(r["run"]["cell"]["interpreterStarted"])
        self.assertEqual(out(r), "undefined\n")
        # process.exit ends the interpreter too
        r = c.cell("process.exit(0)")
        self.assertTrue(r["run"]["cell"]["interpreterEnded"])
        r = c.cell("console.log('fresh')")
        self.assertTrue(r["run"]["cell"]["interpreterStarted"])
        # a snippet in the session is a fresh single-use worker (exit 3 is a result)
        req = {"protocol": 3, "sessionId": c.id, "javascript": {"code": "process.exit(3)"}}
        st, _, data, _ = self.d.call("SessionRun", req, token="alice-tok")
        self.assertEqual(st, 200, data)
        run = json.loads(data)["run"]
        self.assertEqual(run["javascript"]["exitCode"], 3)
        self.assertEqual(int(run["record"]["sequence"]), c.calls + 1)
        c.calls, c.last = c.calls + 1, run["record"]["recordSha256"]
        self.assertEqual(c.close()["ended"], "SESSION_END_CLOSED")

    def test_refusals(self):
        c = Client(self, self.d, "alice-tok")
        c.open()
        base = {"protocol": 3, "sessionId": c.id}
        # python has no interpreter here: refused, marked environment
        body = self.assertRefused(self.d.call("SessionRun", dict(base, cell={"language": "python", "code": "1"}),
                                              token="alice-tok"), "unimplemented", "environment")
        self.assertIn("javascript", body["message"])
        self.assertRefused(self.d.call("SessionRun", dict(base, cell={"language": "cobol", "code": "1"}),
                                       token="alice-tok"), "invalid_argument", "request")
        self.assertRefused(self.d.call("SessionRun", dict(base, minimumIsolation="vm",
                                                          cell={"language": "javascript", "code": "1"}),
                                       token="alice-tok"), "failed_precondition", "isolation")
        self.assertRefused(self.d.call("SessionRun", base, token="alice-tok"), "invalid_argument", "request")
        self.assertRefused(self.d.call("SessionRun", dict(base, protocol=2, cell={"language": "javascript", "code": "1"}),
                                       token="alice-tok"), "unimplemented", "protocol")
        self.assertRefused(self.d.call("OpenSession", {"protocol": 3, "owner": "a b"}, token="alice-tok"),
                           "invalid_argument", "request")
        self.assertRefused(self.d.call("OpenSession", {"protocol": 3, "minimumIsolation": "kernel"},
                                       token="alice-tok"), "failed_precondition", "isolation")
        # Run refuses a cell
        self.assertRefused(self.d.call("Run", {"protocol": 3, "cell": {"language": "javascript", "code": "1"}},
                                       token="alice-tok"), "invalid_argument", "request")
        # no refusal advanced the chain
        r = c.cell("console.log(1)")
        self.assertEqual(int(r["run"]["record"]["sequence"]), 1)
        c.close()

    def test_foreign_and_unknown_ids_are_the_same_miss(self):
        c = Client(self, self.d, "alice-tok")
        c.open()
        msg = {"protocol": 3, "sessionId": c.id, "cell": {"language": "javascript", "code": "1"}}
        st1, _, foreign, _ = self.d.call("SessionRun", msg, token="bob-tok")
        st2, _, unknown, _ = self.d.call("SessionRun", dict(msg, sessionId="f" * 32), token="alice-tok")
        self.assertEqual(st1, 404)
        self.assertEqual(st1, st2)
        self.assertEqual(json.loads(foreign), json.loads(unknown))
        body = json.loads(foreign)
        self.assertEqual(body["code"], "not_found")
        types = [x["type"] for x in body["details"]]
        self.assertEqual(types, ["plimsoll.v1.NotDispatched", "plimsoll.v1.SessionEnded"])
        self.assertEqual(body["details"][0]["value"], DETAIL["request"])
        self.assertEqual(session_ended_reason(body["details"][1]["value"]), 9)
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id}, token="bob-tok")
        self.assertEqual(json.loads(data)["code"], "not_found")
        c.close()  # still alice's, untouched

    def test_caps(self):
        opened = []
        for _ in range(3):
            c = Client(self, self.d, "bob-tok")
            c.open()
            opened.append(c)
        body = self.assertRefused(self.d.call("OpenSession", {"protocol": 3}, token="bob-tok"),
                                  "resource_exhausted", "capacity")
        self.assertIn("one caller", body["message"])
        a = Client(self, self.d, "alice-tok")
        a.open()  # the fourth place is alice's
        body = self.assertRefused(self.d.call("OpenSession", {"protocol": 3}, token="alice-tok"),
                                  "resource_exhausted", "capacity")
        self.assertIn("this daemon keeps", body["message"])
        opened[0].close()  # a close frees a place
        b = Client(self, self.d, "bob-tok")
        b.open()
        for c in opened[1:] + [a, b]:
            c.close()

    def test_expiry_is_reported_with_its_reason(self):
        c = Client(self, self.d, "alice-tok")
        c.open(lifetimeMs=1200)
        c.cell("1")
        time.sleep(1.6)
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "1"}}, token="alice-tok")
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition")
        self.assertEqual([x["type"] for x in body["details"]], ["plimsoll.v1.SessionEnded", "plimsoll.v1.NotDispatched"])
        self.assertEqual(session_ended_reason(body["details"][0]["value"]), 2)
        summary = c.close()
        self.assertEqual(summary["ended"], "SESSION_END_EXPIRED")

    def test_cli_repl_checks_the_chain(self):
        tok = os.path.join(self.tmp, "alice.tok")
        with open(tok, "w") as f:
            f.write("alice-tok\n")
        cells = "globalThis.x = 41\n%%\nconsole.log(x + 1)\n%%\nthrow new Error('e')\n%%\nconsole.log(x)\n"
        p = subprocess.run([CLI, "repl", "--url", "http://127.0.0.1:%d" % self.d.port, "--token-file", tok],
                           input=cells.encode(), capture_output=True, timeout=60)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(p.stdout.decode(), "41\n42\n41\n")  # the first cell's completion value too
        self.assertEqual(err.count("chain ok"), 5, err)  # four cells and the close summary
        self.assertIn("[cell 3] exit 1", err)
        self.assertIn("SESSION_END_CLOSED] 4 calls", err)
        # python has no interpreter on quickjs: the cell is refused, nothing is chained
        p = subprocess.run([CLI, "repl", "--language", "python", "--url", "http://127.0.0.1:%d" % self.d.port,
                            "--token-file", tok], input=b"print(1)\n", capture_output=True, timeout=60)
        self.assertIn("[refused: environment]", p.stderr.decode())
        self.assertIn("0 calls", p.stderr.decode())

    def test_one_call_at_a_time_and_one_waiter(self):
        import threading
        c = Client(self, self.d, "alice-tok")
        c.open()
        c.cell("globalThis.busy = (ms) => { const t = Date.now(); while (Date.now() - t < ms) {} }")
        answers = {}

        def call(name, code):
            answers[name] = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id, "timeoutMs": 10000,
                                                      "cell": {"language": "javascript", "code": code}},
                                        token="alice-tok")
        t1 = threading.Thread(target=call, args=("first", "busy(1500); console.log('first')"))
        t1.start()
        time.sleep(0.4)
        t2 = threading.Thread(target=call, args=("second", "console.log('second')"))
        t2.start()
        time.sleep(0.4)
        third = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                           "cell": {"language": "javascript", "code": "1"}}, token="alice-tok")
        body = self.assertRefused(third, "resource_exhausted", "capacity")
        self.assertIn("already waiting", body["message"])
        t1.join()
        t2.join()
        first, second = (json.loads(answers[k][2]) for k in ("first", "second"))
        self.assertEqual(base64.b64decode(first["run"]["cell"]["stdout"]), b"first\n")
        self.assertEqual(base64.b64decode(second["run"]["cell"]["stdout"]), b"second\n")
        # never interleaved: the waiter ran after the first, and the chain numbers them so
        self.assertEqual(int(first["run"]["record"]["sequence"]), 2)
        self.assertEqual(int(second["run"]["record"]["sequence"]), 3)
        self.assertEqual(second["run"]["record"]["previousSha256"], first["run"]["record"]["recordSha256"])
        c.calls, c.last = 3, second["run"]["record"]["recordSha256"]
        c.close()

    def test_cycles_leak_nothing(self):
        before = len(descendants(self.d.proc.pid))
        for i in range(20):
            c = Client(self, self.d, "alice-tok")
            c.open()
            r = c.cell("console.log(%d)" % i)
            self.assertEqual(out(r), "%d\n" % i)
            c.close()
        deadline = time.monotonic() + 10
        while len(descendants(self.d.proc.pid)) > before and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertLessEqual(len(descendants(self.d.proc.pid)), before)


class Shutdown(WireCase):
    def test_stopping_with_sessions_open_ends_them(self):
        d = Daemon(dict(BASE, PLIMSOLL_INSECURE="1", SANDBOX_MAX_SESSIONS="4"))
        try:
            fps = []
            for _ in range(3):
                c = Client(self, d)
                c.open()
                c.cell("globalThis.x = 1")
                fps.append(c.fp)
            pid = d.proc.pid
            self.assertGreater(len(descendants(pid)), 0)
            self.assertEqual(d.stop(), 0)
            ended = [e for e in d.events("session_ended") if e.get("reason") == "shutdown"]
            self.assertEqual(sorted(e["session"] for e in ended), sorted(fps))
        finally:
            if d.proc.poll() is None:
                d.kill()

    def test_idle_suspend_keeps_the_interpreter(self):
        with Daemon(dict(BASE, PLIMSOLL_INSECURE="1", SANDBOX_MAX_SESSIONS="2", SANDBOX_SESSION_IDLE="1s")) as d:
            c = Client(self, d)
            c.open()
            c.cell("globalThis.kept = 'after suspend'")
            self.assertTrue(d.wait_events("session_suspended", lambda e: e.get("session") == c.fp, timeout=5))

            def state(pid):
                try:
                    with open("/proc/%d/stat" % pid) as f:
                        st = f.read()
                    return st[st.rindex(")") + 2]
                except OSError:
                    return ""
            self.assertIn("T", [state(p) for p in descendants(d.proc.pid)])  # the worker is stopped
            r = c.cell("console.log(kept)")
            self.assertEqual(out(r), "after suspend\n")
            self.assertFalse(r["run"]["cell"].get("interpreterStarted", False))
            self.assertNotIn("T", [state(p) for p in descendants(d.proc.pid)])
            c.close()

    def test_per_owner_cap_replaces_the_least_recently_used(self):
        env = dict(BASE, PLIMSOLL_INSECURE="1", SANDBOX_MAX_SESSIONS="3", SANDBOX_MAX_SESSIONS_PER_OWNER="2")
        with Daemon(env) as d:
            u = [Client(self, d) for _ in range(3)]
            u[0].open(owner="u1")
            u[1].open(owner="u1")
            u[0].cell("globalThis.a = 1")  # u[1] is now the least recently used
            other = Client(self, d)
            other.open(owner="u2")
            u[2].open(owner="u1")  # the daemon is full: u[1]'s place passes to this open
            st, _, data, _ = d.call("SessionRun", {"protocol": 3, "sessionId": u[1].id,
                                                  "cell": {"language": "javascript", "code": "1"}})
            body = json.loads(data)
            self.assertEqual(body["code"], "failed_precondition")
            self.assertEqual(session_ended_reason(body["details"][0]["value"]), 8)  # REPLACED
            self.assertEqual(body["details"][1]["value"], DETAIL["request"])
            self.assertEqual(u[1].close()["ended"], "SESSION_END_REPLACED")
            r = u[0].cell("console.log(a)")  # the others are untouched
            self.assertEqual(out(r), "1\n")
            other.cell("1")
            for c in (u[0], u[2], other):
                self.assertEqual(c.close()["ended"], "SESSION_END_CLOSED")

    def test_unclaimed_session_is_closed(self):
        with Daemon(dict(BASE, PLIMSOLL_INSECURE="1", SANDBOX_MAX_SESSIONS="2", SANDBOX_SESSION_IDLE="1s")) as d:
            c = Client(self, d)
            c.open()
            time.sleep(1.8)
            st, _, data, _ = d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
            self.assertEqual(st, 200, data)
            summary = json.loads(data)
            self.assertEqual(summary["ended"], "SESSION_END_UNCLAIMED")
            self.assertNotIn("calls", summary)


if __name__ == "__main__":
    unittest.main(verbosity=2)
