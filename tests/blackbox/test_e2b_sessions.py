"""Sessions on the e2b provider through the real daemon (issue 13, sessions.md §8 as it applies to
e2b), against the loopback double of E2B (tests/e2b_double): one sandbox per session, JavaScript
and Python cells in long-lived interpreters fed through envd's SendInput and interrupted through
SendSignal, files in the session directory, and every way a session ends (close, expiry, the
sandbox killed from outside, shutdown) leaving no sandbox and no guest process behind.

The chain is checked by test_sessions.Client (digests recomputed in Python); the double, the
daemon set-up and the cleanliness checks are test_e2b's. Standard library only.
"""
import base64
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import DAEMON, Daemon, WireCase  # noqa: E402
from test_e2b import API_KEY, E2BCase, free_port, instance_of  # noqa: E402
from test_sessions import Client, out, session_ended_reason  # noqa: E402

SESSION_ENV = {"SANDBOX_MAX_SESSIONS": "4", "SANDBOX_MAX_SESSIONS_PER_CALLER": "3", "SANDBOX_SESSION_IDLE": "1m",
               "SANDBOX_MAX_CONCURRENT": "8"}


def cell(resp):
    return resp["run"]["cell"]


class E2BSessionCase(E2BCase):
    EXTRA = SESSION_ENV

    def kill_from_outside(self, sandbox_id):
        """What a person with the API key (or E2B itself) does: DELETE the sandbox."""
        req = urllib.request.Request("%s/sandboxes/%s" % (self.dbl.base, sandbox_id), method="DELETE",
                                     headers={"X-API-Key": API_KEY})
        with urllib.request.urlopen(req, timeout=30) as r:
            self.assertEqual(r.status, 204)

    def session_sandboxes(self):
        return [sb["sandboxID"] for sb in self.dbl.state()["live"]]


class SessionsE2B(E2BSessionCase):
    def test_startup_smoke_and_describe(self):
        # §7: the startup session smoke test ran on a real (double) sandbox, both languages
        self.assertEqual(len(self.d.events("session_smoke_passed")), 1)
        st, _, data, _ = self.d.call("Describe", {})
        desc = json.loads(data)
        self.assertTrue(desc["supportsSessions"])
        self.assertEqual(desc["sessionLifetimeMs"], 30 * 60 * 1000)
        self.assertEqual(desc["sessionIdleTimeoutMs"], 60 * 1000)
        self.assertEqual(desc["maxSessionsPerCaller"], 3)
        env = desc["sessionEnvironment"]
        self.assertEqual(env["identity"], desc["javascriptEnvironment"]["identity"])
        self.assertIn("api=" + self.dbl.base, env["identity"])  # a double never passes for E2B
        self.assertEqual(env["languages"], ["javascript", "python"])  # the template has python3
        self.assertEqual(env["maxTimeoutMs"], 120000)
        self.assertIn("template python3: 3.", json.dumps(desc["evidence"]))

    def test_one_sandbox_per_session_with_its_lifetime(self):
        c = Client(self, self.d)
        o = c.open(lifetimeMs=600000)
        self.assertEqual(o["isolation"], "vm")
        self.assertEqual(o["sandbox"], "e2b")
        st = self.dbl.state()
        self.assertEqual(len(st["live"]), 1)
        create = st["creates"][-1]
        # E2B's own timeout covers the lifetime (plus a minute), so E2B ends it if we cannot
        self.assertEqual(create["timeout"], 600 + 60)
        self.assertEqual(create["network"], {"denyOut": ["0.0.0.0/0"], "allowPublicTraffic": False})
        self.assertEqual(create["metadata"], {"sdk": "plimsoll", "instance": instance_of(self.env)})
        self.assertIs(create["secure"], True)
        d = Client(self, self.d)
        d.open()
        self.assertEqual(len(self.dbl.state()["live"]), 2)
        self.assertEqual(c.close()["ended"], "SESSION_END_CLOSED")
        self.assertEqual(d.close()["ended"], "SESSION_END_CLOSED")
        self.assertClean()

    def test_javascript_cells_keep_state_and_chain(self):
        c = Client(self, self.d)
        c.open()
        r = c.cell("globalThis.n = 41; let kept = 'yes'; function twice(x) { return 2 * x }")
        self.assertEqual(cell(r).get("exitCode", 0), 0)
        self.assertTrue(cell(r).get("interpreterStarted"))
        r = c.cell("console.log(n + 1, kept, twice(21))")
        self.assertEqual(out(r), "42 yes 42\n")
        self.assertFalse(cell(r).get("interpreterStarted", False))
        self.assertEqual(r["run"]["isolation"], "vm")
        self.assertIn("api=" + self.dbl.base, r["run"]["environment"])
        r = c.cell("n = 7; throw new Error('boom')")  # raises: exit 1, state kept
        self.assertEqual(cell(r)["exitCode"], 1)
        self.assertIn("boom", out(r, "stderr"))
        self.assertEqual(out(c.cell("console.log(n)")), "7\n")
        r = c.cell("const v = await Promise.resolve(5); console.log(v)")  # top-level await
        self.assertEqual(out(r), "5\n")
        self.assertEqual(out(c.cell("'str'")), "'str'\n")  # the completion value, as the REPL prints it
        self.assertEqual(out(c.cell("({k: [1, 'b']})")), "{ k: [ 1, 'b' ] }\n")
        self.assertEqual(out(c.cell("let w = 1")), "")
        # output written between cells is dropped; a forged marker of another nonce is output
        c.cell("setTimeout(() => console.log('late'), 10)")
        time.sleep(0.2)
        r = c.cell("process.stdout.write('\\x1eplimsoll-cell ' + 'f'.repeat(32) + ' 0\\n'); 1")
        self.assertEqual(out(r), "\x1eplimsoll-cell " + "f" * 32 + " 0\n1\n")
        self.assertEqual(int(c.close()["calls"]), 10)
        self.assertClean()

    def test_python_cells_keep_state(self):
        c = Client(self, self.d)
        c.open(languages=["python", "javascript"])
        r = c.cell("import json\nn = 41\ndef twice(x):\n    return 2 * x", language="python")
        self.assertTrue(cell(r).get("interpreterStarted"))
        self.assertEqual(cell(r).get("exitCode", 0), 0, out(r, "stderr"))
        r = c.cell("print(n + 1, twice(21), json.dumps([1]))", language="python")
        self.assertEqual(out(r), "42 42 [1]\n")
        self.assertFalse(cell(r).get("interpreterStarted", False))
        self.assertEqual(out(c.cell("'yes'", language="python")), "'yes'\n")  # repr of the final value
        r = c.cell("n = 7\nraise ValueError('boom')", language="python")
        self.assertEqual(cell(r)["exitCode"], 1)
        self.assertIn("ValueError: boom", out(r, "stderr"))
        self.assertEqual(out(c.cell("print(n)", language="python")), "7\n")
        r = c.cell("def broken(:", language="python")  # a syntax error names the cell, not the kernel
        self.assertEqual(cell(r)["exitCode"], 1)
        self.assertIn("SyntaxError", out(r, "stderr"))
        self.assertNotIn("ast.py", out(r, "stderr"))
        r = c.cell("import asyncio\nawait asyncio.sleep(0)\nprint('awaited')", language="python")
        self.assertEqual(out(r), "awaited\n", out(r, "stderr"))
        # the two languages have separate interpreters in one sandbox, sharing its files
        c.cell("open('from_py.txt', 'w').write('py wrote')", language="python")
        r = c.cell("console.log(require('fs').readFileSync('from_py.txt', 'utf8'))")
        self.assertEqual(out(r), "py wrote\n")
        self.assertTrue(cell(r).get("interpreterStarted"))
        # a cell reading stdin gets nothing and cannot steal the next cell
        r = c.cell("import sys\nprint(repr(sys.stdin.read()))", language="python")
        self.assertEqual(out(r), "''\n")
        self.assertEqual(out(c.cell("print(n)", language="python")), "7\n")
        c.close()
        self.assertClean()

    def test_files_persist_across_calls_of_every_kind(self):
        c = Client(self, self.d)
        c.open()
        req = {"protocol": 3, "sessionId": c.id,
               "cell": {"language": "python", "code": "import json\njson.loads(open('in.json').read())['n'] + 1",
                        "files": [{"path": "in.json", "content": '{"n": 41}'}]}}
        st, _, data, _ = self.d.call("SessionRun", req)
        self.assertEqual(st, 200, data)
        run = json.loads(data)["run"]
        self.assertEqual(base64.b64decode(run["cell"]["stdout"]), b"42\n")
        c.calls, c.last = 1, run["record"]["recordSha256"]
        # a snippet in the session runs in the session directory and finds the file
        req = {"protocol": 3, "sessionId": c.id, "javascript": {
            "code": "const fs = require('fs'); console.log(fs.readFileSync('in.json', 'utf8'), process.cwd());"
                    "fs.writeFileSync('snip.txt', 'from the snippet')"}}
        st, _, data, _ = self.d.call("SessionRun", req)
        self.assertEqual(st, 200, data)
        run = json.loads(data)["run"]
        self.assertEqual(base64.b64decode(run["javascript"]["stdout"]), b'{"n": 41} /home/user/project\n')
        self.assertEqual(int(run["record"]["sequence"]), 2)
        c.calls, c.last = 2, run["record"]["recordSha256"]
        # a project too, and its artifact is read back
        req = {"protocol": 3, "sessionId": c.id, "project": {
            "files": [{"path": "step.sh", "content": "cat snip.txt > art.txt\n"}],
            "steps": ["sh step.sh"], "artifacts": ["art.txt"]}}
        st, _, data, _ = self.d.call("SessionRun", req)
        self.assertEqual(st, 200, data)
        run = json.loads(data)["run"]
        self.assertEqual(base64.b64decode(run["project"]["artifacts"][0]["content"]), b"from the snippet")
        c.calls, c.last = 3, run["record"]["recordSha256"]
        r = c.cell("console.log(require('fs').readFileSync('art.txt', 'utf8'))")
        self.assertEqual(out(r), "from the snippet\n")
        # an escaping file path is refused, its code not run, the chain untouched
        bad = {"protocol": 3, "sessionId": c.id,
               "cell": {"language": "javascript", "code": "1", "files": [{"path": "../x", "content": "x"}]}}
        self.assertRefused(self.d.call("SessionRun", bad), "invalid_argument", "request")
        self.assertEqual(int(c.close()["calls"]), 4)
        self.assertClean()

    def test_no_process_outlives_its_call(self):
        # item 46: what a call leaves running (a child, a setsid grandchild, a detached child of a
        # snippet) is killed after the call; the interpreters and their state stay
        c = Client(self, self.d)
        c.open(languages=["python", "javascript"])
        r = c.cell("import subprocess\nkept = 41\nchild = subprocess.Popen(['sleep', '300'])\n"
                   "grand = int(subprocess.run(['sh', '-c', 'setsid sleep 300 >/dev/null 2>&1 & echo $!'],\n"
                   "                           capture_output=True, text=True).stdout)\n"
                   "print(child.poll(), open('/proc/%d/stat' % grand).read().rsplit(') ', 1)[1][0] in 'RS')",
                   language="python")
        self.assertEqual(out(r), "None True\n", out(r, "stderr"))  # both ran during the call
        r = c.cell("const cp = require('child_process');"
                   "const d = cp.spawn('sleep', ['300'], {detached: true, stdio: 'ignore'}); d.unref();"
                   "globalThis.dpid = d.pid; globalThis.kept = 'yes'")
        self.assertEqual(cell(r).get("exitCode", 0), 0, out(r, "stderr"))
        req = {"protocol": 3, "sessionId": c.id, "javascript": {
            "code": "const d = require('child_process').spawn('sleep', ['300'], {detached: true, stdio: 'ignore'});"
                    "d.unref(); require('fs').writeFileSync('snippet.pid', String(d.pid))"}}
        st, _, data, _ = self.d.call("SessionRun", req)
        self.assertEqual(st, 200, data)
        run = json.loads(data)["run"]
        self.assertNotIn("ended", json.loads(data))
        c.calls, c.last = c.calls + 1, run["record"]["recordSha256"]
        # gone: no /proc entry, or a zombie its parent has not reaped yet
        r = c.cell("def gone(pid):\n    try:\n        st = open('/proc/%d/stat' % pid).read()\n"
                   "    except OSError:\n        return True\n    return st.rsplit(') ', 1)[1][0] in 'ZX'\n"
                   "print(child.poll(), gone(grand), gone(int(open('snippet.pid').read())), kept + 1)",
                   language="python")
        self.assertEqual(out(r), "-9 True True 42\n", out(r, "stderr"))
        self.assertFalse(cell(r).get("interpreterStarted", False))
        r = c.cell("let s; try { s = require('fs').readFileSync('/proc/' + dpid + '/stat', 'utf8').split(') ')[1][0] }"
                   " catch (e) { s = 'Z' }; console.log('ZX'.includes(s), kept)")
        self.assertEqual(out(r), "true yes\n", out(r, "stderr"))
        self.assertFalse(cell(r).get("interpreterStarted", False))
        self.assertEqual(c.close()["ended"], "SESSION_END_CLOSED")
        self.assertClean()

    def test_a_sweep_that_cannot_run_ends_the_session(self):
        # the sweep is envd's process start: when envd will not start it, the call's result is
        # answered, and the session ends BOUNDARY_FAILED rather than go on unproven
        c = Client(self, self.d)
        c.open()
        c.cell("globalThis.x = 1")
        base = self.d.settled_count("e2b_session_sweep_failed")
        self.dbl.faults(start_fail=1)
        r = c.cell("x + 1")
        self.dbl.faults()
        self.assertEqual(out(r), "2\n")
        self.assertEqual(r.get("ended"), "SESSION_END_BOUNDARY_FAILED")
        self.assertEqual(self.d.settled_count("e2b_session_sweep_failed"), base + 1)
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "1"}})
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition", body)
        self.assertEqual(session_ended_reason(body["details"][0]["value"]), 5)  # BOUNDARY_FAILED
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        self.assertEqual(json.loads(data)["ended"], "SESSION_END_BOUNDARY_FAILED")
        self.assertClean()

    def test_endless_cell_interrupts_the_interpreter_not_the_session(self):
        c = Client(self, self.d)
        c.open()
        c.cell("globalThis.k = 1")
        t0 = time.monotonic()
        r = c.cell("console.log('before'); for (;;) {}", timeoutMs=1000)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(cell(r)["exitCode"], 124)
        self.assertTrue(cell(r)["timedOut"])
        self.assertTrue(cell(r)["interpreterEnded"])
        self.assertEqual(out(r), "before\n")
        kills = [s for s in self.dbl.state()["signals"] if s["signal"] == "SIGNAL_SIGKILL"]
        self.assertEqual(len(kills), 1)  # interrupted through envd's SendSignal
        r = c.cell("console.log(typeof k)")
        self.assertTrue(cell(r)["interpreterStarted"])
        self.assertEqual(out(r), "undefined\n")
        # the same for python, and the sandbox (and its files) stay
        c.cell("open('kept.txt', 'w').write('kept')", language="python")
        r = c.cell("while True:\n    pass", language="python", timeoutMs=800)
        self.assertEqual(cell(r)["exitCode"], 124)
        self.assertTrue(cell(r)["interpreterEnded"])
        r = c.cell("print(open('kept.txt').read())", language="python")
        self.assertTrue(cell(r)["interpreterStarted"])
        self.assertEqual(out(r), "kept\n")
        self.assertEqual(len(self.dbl.state()["live"]), 1)
        c.close()
        self.assertClean()

    def test_a_cell_that_ends_its_interpreter(self):
        c = Client(self, self.d)
        c.open()
        c.cell("globalThis.k = 1")
        r = c.cell("process.exit(5)")
        self.assertTrue(cell(r)["interpreterEnded"])
        self.assertEqual(cell(r)["exitCode"], 5)
        r = c.cell("console.log(typeof k)")
        self.assertTrue(cell(r)["interpreterStarted"])
        self.assertEqual(out(r), "undefined\n")
        r = c.cell("import os\nos._exit(3)", language="python")
        self.assertTrue(cell(r)["interpreterEnded"])
        self.assertEqual(cell(r)["exitCode"], 3)
        r = c.cell("print('fresh')", language="python")
        self.assertTrue(cell(r)["interpreterStarted"])
        # a snippet exiting 3 is a result, and the cells' interpreter is untouched by it
        c.cell("globalThis.j = 2")
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "javascript": {"code": "process.exit(3)"}})
        run = json.loads(data)["run"]
        self.assertEqual(run["javascript"]["exitCode"], 3)
        c.calls, c.last = c.calls + 1, run["record"]["recordSha256"]
        self.assertEqual(out(c.cell("console.log(j)")), "2\n")
        c.close()
        self.assertClean()

    def test_output_is_bounded(self):
        c = Client(self, self.d)
        c.open()
        r = c.cell("process.stdout.write('x'.repeat(200000)); console.error('e'.repeat(70000)); 1")
        self.assertTrue(cell(r)["stdoutTruncated"])
        self.assertTrue(cell(r)["stderrTruncated"])
        self.assertEqual(len(base64.b64decode(cell(r)["stdout"])), 64 * 1024)
        self.assertEqual(cell(r).get("exitCode", 0), 0)
        self.assertEqual(out(c.cell("'after'")), "'after'\n")  # the interpreter is still in step
        c.close()

    def test_killed_from_outside_ends_the_session(self):
        # between calls: the next call finds the sandbox gone and the session ends
        c = Client(self, self.d)
        c.open()
        c.cell("globalThis.x = 1")
        [sid] = self.session_sandboxes()
        self.kill_from_outside(sid)
        t0 = time.monotonic()
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "x"}})
        self.assertLess(time.monotonic() - t0, 20)
        body = json.loads(data)
        self.assertEqual(body["code"], "unavailable", body)
        types = [x["type"] for x in body["details"]]
        self.assertIn("plimsoll.v1.UnansweredCall", types)
        self.assertNotIn("plimsoll.v1.NotDispatched", types)
        ended = [x for x in body["details"] if x["type"] == "plimsoll.v1.SessionEnded"]
        self.assertEqual(session_ended_reason(ended[0]["value"]), 4)  # MAIN_PROCESS_ENDED
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "1"}})
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition")
        self.assertEqual(session_ended_reason(body["details"][0]["value"]), 4)
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        summary = json.loads(data)
        self.assertEqual(summary["ended"], "SESSION_END_MAIN_PROCESS_ENDED")
        self.assertEqual(int(summary["calls"]), 2)  # the unanswered call is counted
        self.assertClean()

    def test_killed_from_outside_during_a_cell(self):
        c = Client(self, self.d)
        c.open()
        c.cell("1")
        [sid] = self.session_sandboxes()
        killer = threading.Timer(0.8, self.kill_from_outside, args=(sid,))
        killer.start()
        t0 = time.monotonic()
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id, "timeoutMs": 60000,
                                                   "cell": {"language": "javascript", "code": "for (;;) {}"}})
        killer.join()
        self.assertLess(time.monotonic() - t0, 20)  # never a hang: not the cell's 60 s
        body = json.loads(data)
        self.assertEqual(body["code"], "unavailable", body)
        ended = [x for x in body["details"] if x["type"] == "plimsoll.v1.SessionEnded"]
        self.assertEqual(session_ended_reason(ended[0]["value"]), 4)
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        self.assertEqual(json.loads(data)["ended"], "SESSION_END_MAIN_PROCESS_ENDED")
        self.assertClean()

    def test_a_failed_file_write_refuses_or_ends_by_what_the_read_back_says(self):
        c = Client(self, self.d)
        c.open()
        c.cell("globalThis.k = 1")
        req = {"protocol": 3, "sessionId": c.id,
               "cell": {"language": "javascript", "code": "k", "files": [{"path": "a.txt", "content": "a"}]}}
        # envd fails, the sandbox reads back fine: refused, the code not run, the chain untouched
        self.dbl.faults(files_500=True)
        body = self.assertRefused(self.d.call("SessionRun", req), "invalid_argument", "request")
        self.assertIn("file 1", body["message"])
        self.dbl.faults(files_500=False)
        r = c.cell("console.log(k)")
        self.assertEqual(out(r), "1\n")
        self.assertFalse(cell(r).get("interpreterStarted", False))  # the interpreter was untouched
        # envd fails and the sandbox cannot be read back: no clean sandbox, BOUNDARY_FAILED
        self.dbl.faults(files_500=True, get_500=True)
        st, _, data, _ = self.d.call("SessionRun", req)
        self.dbl.faults()
        body = json.loads(data)
        self.assertEqual(body["code"], "unavailable", body)
        types = [x["type"] for x in body["details"]]
        self.assertIn("plimsoll.v1.UnansweredCall", types)
        ended = [x for x in body["details"] if x["type"] == "plimsoll.v1.SessionEnded"]
        self.assertEqual(session_ended_reason(ended[0]["value"]), 5)  # BOUNDARY_FAILED
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        summary = json.loads(data)
        self.assertEqual(summary["ended"], "SESSION_END_BOUNDARY_FAILED")
        self.assertEqual(int(summary["calls"]), 3)
        self.assertClean()
        # a closed session is a miss
        st, _, data, _ = self.d.call("SessionRun", dict(req, cell={"language": "javascript", "code": "1"}))
        self.assertEqual(json.loads(data)["code"], "not_found")

    def test_refusals(self):
        c = Client(self, self.d)
        c.open()
        base = {"protocol": 3, "sessionId": c.id}
        self.assertRefused(self.d.call("SessionRun", dict(base, cell={"language": "cobol", "code": "1"})),
                           "invalid_argument", "request")
        self.assertRefused(self.d.call("SessionRun", base), "invalid_argument", "request")
        self.assertRefused(self.d.call("SessionRun", dict(base, protocol=0, cell={"language": "javascript",
                                                                                    "code": "1"})),
                           "invalid_argument", "protocol")
        self.assertRefused(self.d.call("OpenSession", {"protocol": 3, "owner": "a/b"}), "invalid_argument", "request")
        self.assertRefused(self.d.call("Run", {"protocol": 3, "cell": {"language": "javascript", "code": "1"}}),
                           "invalid_argument", "request")
        st, _, data, _ = self.d.call("SessionRun", dict(base, sessionId="f" * 32,
                                                        cell={"language": "javascript", "code": "1"}))
        self.assertEqual(json.loads(data)["code"], "not_found")
        r = c.cell("console.log(1)")  # no refusal advanced the chain
        self.assertEqual(int(r["run"]["record"]["sequence"]), 1)
        c.close()
        self.assertClean()

    def test_expiry_deletes_the_sandbox(self):
        c = Client(self, self.d)
        c.open(lifetimeMs=1500)
        c.cell("1")
        time.sleep(2.2)
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "1"}})
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition")
        self.assertEqual(session_ended_reason(body["details"][0]["value"]), 2)  # EXPIRED
        self.assertClean()
        self.assertEqual(c.close()["ended"], "SESSION_END_EXPIRED")

    def test_cycles_leak_nothing(self):
        for i in range(20):
            c = Client(self, self.d)
            c.open()
            self.assertEqual(out(c.cell("console.log(%d)" % i)), "%d\n" % i)
            c.close()
        st = self.assertClean()
        self.assertEqual(len(st["deleted"]), 20)


class SessionShutdownE2B(WireCase):
    def test_stopping_with_sessions_open_deletes_their_sandboxes(self):
        from test_e2b import Double
        dbl = Double()
        try:
            env = dict(dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0", **SESSION_ENV)
            d = Daemon(env, timeout=120)
            fps = []
            for _ in range(3):
                c = Client(self, d)
                c.open()
                c.cell("globalThis.x = 1")
                fps.append(c.fp)
            self.assertEqual(len(dbl.state()["live"]), 3)
            self.assertEqual(d.stop(), 0)
            ended = [e for e in d.events("session_ended") if e.get("reason") == "shutdown"]
            self.assertEqual(sorted(e["session"] for e in ended), sorted(fps))
            st = dbl.wait_empty(10)
            self.assertEqual(st["live"], [])
            self.assertEqual(st["procs"], 0)
        finally:
            dbl.close()


class SessionReconcileE2B(WireCase):
    """The reconcile and session sandboxes: a live session's sandbox is tracked, so the periodic
    reconcile spares it however old it looks; once no daemon knows it (the daemon was killed), the
    next daemon of the same instance label deletes it at startup."""

    def test_reconcile_spares_live_sessions_and_reaps_forgotten_ones(self):
        from test_e2b import Double
        dbl = Double()
        try:
            env = dict(dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0",
                       PLIMSOLL_ADDR="127.0.0.1:%d" % free_port(), **SESSION_ENV)
            d = Daemon(env, timeout=120)
            try:
                c = Client(self, d)
                c.open()
                c.cell("globalThis.x = 41")
                [sid] = [s["sandboxID"] for s in dbl.state()["live"]]
                dbl.faults(age_skew_s=600)  # every sandbox now looks ten minutes old
                lists = lambda: [r for r in dbl.state()["log"] if r["method"] == "GET" and  # noqa: E731
                                 r["path"].startswith("/sandboxes?metadata=")]
                seen = len(lists())
                deadline = time.monotonic() + 80
                while len(lists()) == seen and time.monotonic() < deadline:
                    time.sleep(0.5)
                self.assertGreater(len(lists()), seen, "no periodic reconcile ran")
                time.sleep(0.5)
                self.assertIn(sid, [s["sandboxID"] for s in dbl.state()["live"]])
                self.assertEqual(out(c.cell("console.log(x + 1)")), "42\n")
            finally:
                d.kill()  # no drain, no close: the session's sandbox is forgotten
                d.proc.wait(30)
            self.assertIn(sid, [s["sandboxID"] for s in dbl.state()["live"]])
            d2 = Daemon(env, timeout=120)  # same host, listener and control plane: same label
            try:
                self.assertNotIn(sid, [s["sandboxID"] for s in dbl.state()["live"]])
                self.assertIn(sid, dbl.state()["deleted"])
            finally:
                self.assertEqual(d2.stop(), 0)
            self.assertEqual(dbl.wait_empty(10)["live"], [])
        finally:
            dbl.close()


class NoPythonE2B(WireCase):
    """A template without python3: the startup proof says so, Describe states javascript only,
    and a python cell is refused, marked environment."""

    def test_python_cells_are_refused(self):
        from test_e2b import Double
        # outside /tmp and /home, which the double's guests see replaced by the sandbox's own (so
        # not beside the daemon either: a checkout may live under /tmp)
        bindir = tempfile.mkdtemp(prefix="plimsoll-nopython-bin-", dir="/var/tmp")
        dbl = None
        saved = os.environ["PATH"]
        try:
            # the double (and so every guest) gets a PATH with what it needs but no python3
            for tool in ("node", "sh", "cat", "unshare", "nsenter", "mount", "mkdir", "true", "sleep"):
                src = next(os.path.join(p, tool) for p in saved.split(":") if os.path.exists(os.path.join(p, tool)))
                dst = os.path.join(bindir, tool)
                if not os.path.exists(dst):
                    os.symlink(src, dst)
            os.environ["PATH"] = bindir
            try:
                dbl = Double()
            finally:
                os.environ["PATH"] = saved
            env = dict(dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0", **SESSION_ENV)
            with Daemon(env, timeout=120) as d:
                st, _, data, _ = d.call("Describe", {})
                desc = json.loads(data)
                self.assertEqual(desc["sessionEnvironment"]["languages"], ["javascript"])
                self.assertIn("python3: absent", json.dumps(desc["evidence"]))
                c = Client(self, d)
                c.open(languages=["python", "javascript"])
                body = self.assertRefused(d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                                "cell": {"language": "python", "code": "1"}}),
                                          "unimplemented", "environment")
                self.assertIn("python3", body["message"])
                self.assertEqual(out(c.cell("console.log(1)")), "1\n")
                c.close()
        finally:
            if dbl:
                dbl.close()
            shutil.rmtree(bindir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
