"""Sessions at the vm tier on one box (issue 23 item 2; docs/sessions.md "microvm"): one VM per
session restored from the project template, JavaScript and Python cells keeping their state, a
cell's files written into /work, the disk measured after every call (DISK_EXCEEDED past the budget),
idle suspend (QMP stop) and resume, expiry and close killing the VM, no QEMU left after close or
after the daemon's shutdown; and grants in session snippets (the cases of test_session_grants.py on
a microvm daemon: an allowed route called, another refused, one route budget across the session's
calls, a profile without allow_in_sessions refused marked permission). Under TCG a cold boot costs
seconds: one daemon serves each class, and each test opens one session (one restore, ~0.3 s).
Standard library only."""
import json
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase  # noqa: E402
from test_microvm import qemus, settle  # noqa: E402
from test_sessions import Client, out, session_ended_reason  # noqa: E402
import test_session_grants as qs  # noqa: E402  (a module, so its quickjs class is not collected here)

STARTUP = 600  # seconds: template boot, the proofs, the python probe and the session smoke test
POOL = 3  # the snippet pool (2) and the project pool (1), when full


def project_vm(pids):
    """The one project VM among pids (its QEMU has the node disk), or None."""
    found = []
    for p in pids:
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                if b"disk.img" in f.read():
                    found.append(p)
        except OSError:
            pass
    return found[0] if len(found) == 1 else None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rindex(")") + 2] != "Z"
    except (OSError, ValueError):
        return False


class MicrovmSessions(WireCase):
    seen = set()  # every session VM's pid, checked again after the daemon stopped

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
                        "SANDBOX_MAX_SESSIONS": "3", "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_SESSION_DISK_MB": "8",
                        "SANDBOX_SESSION_IDLE": "10m"}, timeout=STARTUP)

    @classmethod
    def tearDownClass(cls):
        pid = cls.d.proc.pid
        live = [p for p in cls.seen if alive(p)]
        assert cls.d.stop() == 0, "\n".join(cls.d.lines[-30:])
        # Shutdown ends every session still open (test_zz leaves one) and kills every VM.
        assert settle(lambda: not any(alive(p) for p in live) and not qemus(pid), 20), live

    def open_vm(self, **kw):
        """Opens a session and returns its client and its VM's pid: the pooled project VM it took
        (the pool holds one when full, and no other session is open between tests)."""
        pid = self.d.proc.pid
        self.assertTrue(settle(lambda: len(qemus(pid)) >= POOL and project_vm(qemus(pid)), 120), qemus(pid))
        vm = project_vm(qemus(pid))
        c = Client(self, self.d)
        o = c.open(**kw)
        self.assertEqual(o["isolation"], "vm")
        self.assertTrue(alive(vm))
        self.seen.add(vm)
        return c, vm

    def test_js_cells_keep_state(self):
        c, vm = self.open_vm()
        r = c.cell("globalThis.n = 41; let kept = 'yes'; function twice(x) { return 2 * x }")
        self.assertEqual(r["run"]["cell"].get("exitCode", 0), 0, r)
        self.assertEqual(r["run"]["isolation"], "vm")
        r = c.cell("console.log(n + 1, kept, twice(21))")
        self.assertEqual(out(r), "42 yes 42\n")
        self.assertFalse(r["run"]["cell"].get("interpreterStarted", False))
        r = c.cell("n = 7; throw new Error('boom')")  # a raising cell exits 1 and keeps the state
        self.assertEqual(r["run"]["cell"]["exitCode"], 1)
        self.assertIn("boom", out(r, "stderr"))
        r = c.cell("n * 6")  # the completion value, as Node's REPL prints it
        self.assertEqual(out(r), "42\n")
        # a snippet in the session runs like a Run: a result with its exit code
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "javascript": {"code": "console.log('snip'); process.exit(3)"}})
        self.assertEqual(st, 200, data)
        run = json.loads(data)["run"]
        self.assertEqual(run["javascript"]["exitCode"], 3)
        c.calls, c.last = c.calls + 1, run["record"]["recordSha256"]
        r = c.cell("console.log(n)")  # the snippet shared nothing with the cells' interpreter
        self.assertEqual(out(r), "7\n")
        # a cell past its deadline ends its interpreter only; the next cell starts a fresh one
        r = c.cell("for (;;) {}", timeoutMs=1500)
        self.assertEqual(r["run"]["cell"]["exitCode"], 124)
        self.assertTrue(r["run"]["cell"].get("timedOut"))
        self.assertTrue(r["run"]["cell"].get("interpreterEnded"))
        r = c.cell("typeof n")
        self.assertEqual(out(r), "'undefined'\n")
        self.assertTrue(r["run"]["cell"].get("interpreterStarted"))
        c.close()
        self.assertFalse(alive(vm))  # killed and reaped when the close is answered

    def test_python_cells_keep_state_and_files(self):
        st, _, data, _ = self.d.call("Describe", {})
        langs = json.loads(data)["sessionEnvironment"]["languages"]
        self.assertEqual(langs, ["javascript", "python"], "the node disk carries python3 here")
        c, vm = self.open_vm(languages=["python"])
        r = c.cell("x = 41\ndef twice(v):\n    return 2 * v\nopen('kept.txt', 'w').write('on the tmpfs')",
                   language="python")
        self.assertEqual(r["run"]["cell"].get("exitCode", 0), 0, out(r, "stderr"))
        self.assertTrue(r["run"]["cell"].get("interpreterStarted"))
        r = c.cell("print(x + 1, twice(21))\nopen('kept.txt').read()", language="python")
        self.assertEqual(out(r), "42 42\n'on the tmpfs'\n", out(r, "stderr"))
        self.assertFalse(r["run"]["cell"].get("interpreterStarted", False))
        r = c.cell("raise ValueError('bad')", language="python")
        self.assertEqual(r["run"]["cell"]["exitCode"], 1)
        self.assertIn("ValueError: bad", out(r, "stderr"))
        r = c.cell("import os; os.getcwd(), x", language="python")
        self.assertEqual(out(r), "('/work', 41)\n")
        # sys.exit ends the interpreter, not the session; files stay
        r = c.cell("import sys; sys.exit(5)", language="python")
        self.assertEqual(r["run"]["cell"]["exitCode"], 5)
        self.assertTrue(r["run"]["cell"].get("interpreterEnded"))
        r = c.cell("'x' in globals(), open('kept.txt').read()", language="python")
        self.assertEqual(out(r), "(False, 'on the tmpfs')\n", out(r, "stderr"))
        self.assertTrue(r["run"]["cell"].get("interpreterStarted"))
        c.close()
        self.assertFalse(alive(vm))

    def file_cell(self, c, code, files, language="python"):
        return c.cell(code, language=language, cell={"language": language, "code": code, "files": files})

    def test_cell_files_land_in_work(self):
        c, vm = self.open_vm(languages=["python"])
        files = [{"path": "data/in.json", "content": '{"n": 41}'}, {"path": "top.txt", "content": "é"}]
        r = self.file_cell(c, "import json, os\nn = json.load(open('data/in.json'))['n']\n"
                              "open('data/in.json', 'a').write(' ')\n"  # the cell's uid owns them
                              "n + 1, open('top.txt').read(), os.stat('top.txt').st_uid", files)
        self.assertEqual(out(r), "(42, 'é', 65534)\n", out(r, "stderr"))
        self.assertNotIn("ended", r)
        # a later cell's files replace a file's content; a JavaScript cell may carry files too
        # (its engine has no filesystem API, so a Python cell reads them)
        r = self.file_cell(c, "1", [{"path": "top.txt", "content": "v2"}], language="javascript")
        self.assertEqual(out(r), "1\n", out(r, "stderr"))
        r = c.cell("open('top.txt').read(), open('data/in.json').read()", language="python")
        self.assertEqual(out(r), "('v2', '{\"n\": 41} ')\n", out(r, "stderr"))
        # a file the guest cannot write refuses the call, marked request; its code did not run
        c.cell("import os\nos.mkfifo('pipe')\nos.mkdir('adir')", language="python")
        for path, name in (("adir", "EISDIR"), ("pipe", "ENXIO"), ("top.txt/x", "ENOTDIR")):
            msg = {"protocol": 3, "sessionId": c.id, "cell": {"language": "python", "code": "open('ran', 'w')",
                                                              "files": [{"path": "ok.txt", "content": "1"},
                                                                        {"path": path, "content": "x"}]}}
            body = self.assertRefused(self.d.call("SessionRun", msg), "invalid_argument", "request")
            self.assertIn("file 2 of 2 could not be written (%s)" % name, body["message"])
        # an escaping path is refused by the daemon before the VM sees it
        msg = {"protocol": 3, "sessionId": c.id, "cell": {"language": "python", "code": "1",
                                                          "files": [{"path": "../etc/x", "content": "x"}]}}
        self.assertRefused(self.d.call("SessionRun", msg), "invalid_argument", "request")
        r = c.cell("import os\nos.path.exists('ran'), open('ok.txt').read()", language="python")
        self.assertEqual(out(r), "(False, '1')\n", out(r, "stderr"))
        c.close()
        self.assertFalse(alive(vm))

    def test_the_disk_budget_ends_the_session(self):  # SANDBOX_SESSION_DISK_MB=8
        c, vm = self.open_vm(languages=["python"])
        r = c.cell("open('small', 'wb').write(b'x' * 1024)", language="python")
        self.assertNotIn("ended", r)
        # the tmpfs holds the budget and 1 MiB more: the write fails (ENOSPC) and the measurement
        # after the call is past the budget, so the call's own result ends the session
        r = c.cell("try:\n    open('big', 'wb').write(b'0' * (16 << 20))\nexcept OSError as e:\n    print(e.errno)",
                   language="python")
        self.assertEqual(out(r), "28\n", out(r, "stderr"))
        self.assertEqual(r.get("ended"), "SESSION_END_DISK_EXCEEDED", r)
        self.assertTrue(settle(lambda: not alive(vm), 10))
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "python", "code": "1"}})
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition", body)
        self.assertIn("(disk_exceeded)", body["message"])
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        self.assertEqual(json.loads(data)["ended"], "SESSION_END_DISK_EXCEEDED", data)

    def test_files_past_the_budget_end_the_session_before_the_code(self):
        c, vm = self.open_vm(languages=["javascript"])
        mib = 1 << 20
        msg = {"protocol": 3, "sessionId": c.id, "cell": {"language": "javascript", "code": "1"}}
        for call in range(2):  # 7.6 MiB of the 8 in two calls (each within the 4 MiB per call)
            msg["cell"]["files"] = [{"path": "f%d-%d" % (call, i), "content": "x" * (19 * mib // 10)} for i in (0, 1)]
            st, _, data, _ = self.d.call("SessionRun", msg)
            self.assertEqual(st, 200, data)
            self.assertNotIn("ended", json.loads(data))
        msg["cell"]["files"] = [{"path": "last", "content": "x" * mib}]  # 8.6 MiB: past the budget
        msg["cell"]["code"] = "globalThis.ran = 1"
        st, _, data, _ = self.d.call("SessionRun", msg)
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition", body)
        self.assertIn("(disk_exceeded)", body["message"])
        types = [x["type"] for x in body.get("details", [])]
        self.assertEqual(types, ["plimsoll.v1.SessionEnded", "plimsoll.v1.NotDispatched"], body)
        self.assertTrue(settle(lambda: not alive(vm), 10))
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        self.assertEqual(json.loads(data)["ended"], "SESSION_END_DISK_EXCEEDED", data)

    def test_idle_suspend_and_resume(self):
        c, vm = self.open_vm(idleTimeoutMs=1000)
        c.cell("globalThis.kept = 'after suspend'")
        self.assertTrue(self.d.wait_events("session_suspended", lambda e: e.get("session") == c.fp, timeout=30))
        r = c.cell("console.log(kept)")
        self.assertEqual(out(r), "after suspend\n")
        self.assertFalse(r["run"]["cell"].get("interpreterStarted", False))
        # and again: a second suspend, a second resume
        self.assertTrue(self.d.wait_events("session_suspended", lambda e: e.get("session") == c.fp, n=2,
                                           timeout=30))
        r = c.cell("console.log(kept.length)")
        self.assertEqual(out(r), "13\n")
        c.close()
        self.assertFalse(alive(vm))

    def test_expiry_kills_the_vm(self):
        c, vm = self.open_vm(lifetimeMs=4000)
        c.cell("globalThis.v = 1")
        self.assertTrue(self.d.wait_events("session_ended", lambda e: e.get("session") == c.fp, timeout=60))
        self.assertTrue(settle(lambda: not alive(vm), 10))
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "v"}})
        body = json.loads(data)
        self.assertEqual(body["code"], "failed_precondition", body)
        self.assertEqual(session_ended_reason(body["details"][0]["value"]), 2)  # EXPIRED

    def test_qemu_killed_mid_cell_is_unavailable(self):
        c, vm = self.open_vm()
        c.cell("globalThis.v = 1")
        result = {}

        def go():
            result["answer"] = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id, "timeoutMs": 20000,
                                                          "cell": {"language": "javascript", "code": "for (;;) {}"}})
        t = threading.Thread(target=go)
        t.start()
        time.sleep(1.5)
        os.kill(vm, signal.SIGKILL)
        t.join(60)
        self.assertFalse(t.is_alive())
        st, _, data, _ = result["answer"]
        body = json.loads(data)
        self.assertEqual(body["code"], "unavailable", body)  # the guest went away: never internal
        types = [x["type"] for x in body.get("details", [])]
        self.assertIn("plimsoll.v1.SessionEnded", types)
        self.assertNotIn("plimsoll.v1.NotDispatched", types)
        ended = [x for x in body["details"] if x["type"] == "plimsoll.v1.SessionEnded"][0]
        self.assertEqual(session_ended_reason(ended["value"]), 4)  # MAIN_PROCESS_ENDED
        # later calls are refused with the reason; the close reports it
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                   "cell": {"language": "javascript", "code": "v"}})
        self.assertEqual(json.loads(data)["code"], "failed_precondition")
        st, _, data, _ = self.d.call("CloseSession", {"protocol": 3, "sessionId": c.id})
        self.assertEqual(json.loads(data)["ended"], "SESSION_END_MAIN_PROCESS_ENDED", data)
        self.assertEqual(self.d.call("Describe", {})[0], 200)  # the daemon is fine

    def test_zz_shutdown_ends_an_open_session(self):
        c, vm = self.open_vm()
        c.cell("1")  # tearDownClass checks that its VM is gone after the stop


class MicrovmSessionGrants(qs.SessionGrants):
    """test_session_grants.py's cases on microvm: a session snippet's host calls go out as HOST_CALL
    frames over the VM's channel and are answered through the call's broker, as a run's are."""
    STARTUP = STARTUP

    @classmethod
    def daemon_env(cls):
        return {"SANDBOX_PROVIDER": "microvm", "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_SESSION_IDLE": "10m"}

    @classmethod
    def tearDownClass(cls):
        pid = cls.d.proc.pid
        super().tearDownClass()
        assert settle(lambda: not qemus(pid), 20), qemus(pid)

    def test_the_grant_lives_for_its_call_only(self):
        sid = self.open()
        got = self.lines(self.snippet(sid, qs.CALL.format(paths='["/v1/items/5"]', method="get", body="")))
        self.assertEqual(got, ['OK {"id":"5","method":"GET"}'])
        # an ungranted snippet and a cell of the same session (same VM) have no host client
        msg = {"protocol": 3, "sessionId": sid, "javascript": {"code": "console.log(typeof host)"}}
        self.assertEqual(self.lines(self.d.call("SessionRun", msg, token="alice-tok")), ["undefined"])
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": sid, "cell": {
            "language": "javascript", "code": "typeof host"}}, token="alice-tok")
        self.assertEqual(st, 200, data)
        self.assertEqual(out(json.loads(data)), "'undefined'\n")
        self.close(sid)

if __name__ == "__main__":
    unittest.main(verbosity=2)
