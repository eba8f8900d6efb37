"""The quickjs provider through the real daemon over HTTP (issue 4; providers.md §8 items 12-24)."""
import base64
import concurrent.futures as cf
import json
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase, check_record, descendants, js  # noqa: E402

ENV = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
       "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_PER_KEY_CONCURRENT": "8"}


def out(resp, stream="stdout"):
    return base64.b64decode(resp["javascript"].get(stream, ""))


class QuickJS(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(ENV)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def run_js(self, code, **kw):
        req = js(code, **kw)
        st, hdrs, data, rid = self.d.call("Run", req)
        self.assertEqual(st, 200, data)
        self.assertEqual(hdrs["plimsoll-request-id"], rid)
        resp = json.loads(data)
        check_record(self, req, resp)
        return resp

    def test_describe_and_evidence(self):
        st, _, data, _ = self.d.call("Describe", {})
        d = json.loads(data)
        self.assertEqual(d["sandbox"], "quickjs")
        self.assertEqual(d["isolation"], "process")
        env = d["javascriptEnvironment"]
        self.assertRegex(env["identity"], r"^quickjs-ng:sha256:[0-9a-f]{64}$")
        self.assertEqual(env["maxTimeoutMs"], 30000)
        self.assertNotIn("supportsProject", d)
        ev = d["evidence"]
        self.assertTrue(ev["checks"])
        self.assertTrue(all(c.get("passed") for c in ev["checks"]), ev["checks"])
        self.assertEqual(d["policy"], "plimsoll-evidence:sha256:" + ev["digest"])

    def test_hello(self):
        r = self.run_js('console.log("wasm", 6*7)')
        self.assertEqual(out(r), b"wasm 42\n")
        self.assertEqual(r["sandbox"], "quickjs")
        self.assertEqual(r["isolation"], "process")
        self.assertNotIn("exitCode", r["javascript"])
        self.assertTrue(r["record"]["policy"].startswith("plimsoll-evidence:sha256:"))
        self.assertTrue(r["environment"].startswith("quickjs-ng:sha256:"))

    def test_uncaught_is_a_result(self):
        r = self.run_js('throw new Error("boom")')
        self.assertEqual(r["javascript"]["exitCode"], 1)
        self.assertIn(b"Uncaught Error: boom", out(r, "stderr"))

    def test_host_objects_absent(self):
        r = self.run_js('console.log(typeof fetch, typeof require, typeof std, typeof os)')
        self.assertEqual(out(r), b"undefined undefined undefined undefined\n")

    def test_console_streams(self):
        r = self.run_js('console.error("e"); console.warn("w"); console.info("i"); console.debug("d"); console.log("end")')
        self.assertEqual(out(r), b"i\nd\nend\n")
        self.assertEqual(out(r, "stderr"), b"e\nw\n")

    def test_timeout(self):
        t = time.time()
        r = self.run_js("while(true){}", timeoutMs=1000)
        self.assertTrue(r["javascript"]["timedOut"])
        self.assertEqual(r["javascript"]["exitCode"], 124)
        self.assertLess(time.time() - t, 10)

    def test_async_and_timers(self):
        r = self.run_js('setTimeout(() => console.log("later"), 50); (async () => { await null; console.log("now") })()')
        self.assertEqual(out(r), b"now\nlater\n")

    def test_process_exit(self):
        r = self.run_js('console.log("a"); process.exit(3); console.log("b")')
        self.assertEqual(r["javascript"]["exitCode"], 3)
        self.assertEqual(out(r), b"a\n")

    def test_output_cap(self):
        r = self.run_js('while(true) console.log("x")', timeoutMs=1000)
        self.assertTrue(r["javascript"]["stdoutTruncated"])
        self.assertEqual(len(out(r)), 64 * 1024)

    def test_memory_bomb_is_a_result(self):
        r = self.run_js('const a = []; for (let i = 0; i < 1024; i++) a.push(new Uint8Array(1 << 20)); console.log("done")')
        self.assertNotEqual(r["javascript"].get("exitCode", 0), 0)
        self.assertNotIn(b"done", out(r))

    def test_deep_recursion_is_a_result(self):
        r = self.run_js("function f(n){ return n === 0 ? 0 : 1 + f(n - 1) } f(200000)")
        self.assertNotEqual(r["javascript"].get("exitCode", 0), 0)

    def test_floor_above_process_refused(self):
        before = self.d.metrics()["plimsoll_runs_total"]
        body = self.assertRefused(self.d.call("Run", js("console.log(1)", minimumIsolation="kernel")),
                                  "failed_precondition", "isolation", 400)
        self.assertEqual(body["message"], "provider isolation process is below requested minimum kernel")
        self.assertEqual(self.d.metrics()["plimsoll_runs_total"], before)
        r = self.run_js("console.log(1)", minimumIsolation="process")
        self.assertEqual(out(r), b"1\n")

    def test_project_unsupported_after_floor(self):
        proj = {"protocol": 3, "project": {"steps": ["echo hi"]}}
        self.assertRefused(self.d.call("Run", proj), "unimplemented", "unsupported", 501)
        proj["minimumIsolation"] = "vm"
        self.assertRefused(self.d.call("Run", proj), "failed_precondition", "isolation")

    def test_concurrent_runs_shed_not_lost(self):
        def one(i):
            st, _, data, _ = self.d.call("Run", js('let s = 0; for (let i = 0; i < 2e5; i++) s += i; console.log(s)'))
            return st, json.loads(data)
        with cf.ThreadPoolExecutor(50) as ex:
            results = list(ex.map(one, range(200)))
        ok = [r for st, r in results if st == 200]
        shed = [r for st, r in results if st == 429]
        self.assertEqual(len(ok) + len(shed), 200, [st for st, _ in results if st not in (200, 429)])
        self.assertTrue(ok)
        for r in ok:
            self.assertEqual(out(r), b"19999900000\n")
        for r in shed:
            self.assertEqual(r["code"], "resource_exhausted")
            self.assertEqual(r["details"][0]["value"], "CAY")

    def test_worker_killed_from_outside(self):
        pid = self.d.proc.pid
        before = set(descendants(pid))
        box = {}

        def runner():
            box["ans"] = self.d.call("Run", js("while(true){}", timeoutMs=20000))

        t = threading.Thread(target=runner)
        t.start()
        busy = []
        for _ in range(100):
            time.sleep(0.05)
            # the busy worker is the descendant burning CPU; kill every descendant that is running
            for p in descendants(pid):
                try:
                    with open("/proc/%d/stat" % p) as f:
                        st = f.read()
                    if st[st.rindex(")") + 2] == "R":
                        busy.append(p)
                except OSError:
                    pass
            if busy:
                break
        self.assertTrue(busy, "no running worker found")
        for p in busy:
            os.kill(p, signal.SIGKILL)
        t.join(30)
        self.assertFalse(t.is_alive(), "the run hung after its worker was killed")
        st, hdrs, data, _ = box["ans"]
        body = json.loads(data)
        self.assertEqual(st, 500, body)
        self.assertEqual(body["code"], "internal")
        self.assertNotIn("details", body)  # may have run: never marked not dispatched
        self.assertRegex(body["message"], r"^internal error [0-9a-f]{16}; the daemon's log holds its detail$")
        del before


class Leaks(unittest.TestCase):
    def test_2000_runs_no_leaks(self):
        with Daemon(ENV) as d:
            pid = d.proc.pid
            for _ in range(20):
                d.call("Run", js("1"))
            time.sleep(0.5)
            fds0 = len(os.listdir("/proc/%d/fd" % pid))
            kids0 = len(descendants(pid))
            for i in range(2000):
                st, _, _, _ = d.call("Run", js("console.log(%d)" % i))
                self.assertEqual(st, 200)
            time.sleep(1.0)
            fds1 = len(os.listdir("/proc/%d/fd" % pid))
            kids1 = len(descendants(pid))
            self.assertLessEqual(fds1, fds0 + 2, "descriptors leaked")
            self.assertLessEqual(kids1, kids0, "processes leaked")


class Startup(unittest.TestCase):
    def test_unenforceable_envelope_stops_startup(self):
        for var in ("SANDBOX_PIDS", "SANDBOX_CPUS", "SANDBOX_DISK_MB"):
            d = Daemon(dict(ENV, **{var: "1"}), expect_start=False)
            self.assertNotEqual(d.wait_exit(60), 0)
            self.assertIn(var, "\n".join(d.lines))

    def test_min_isolation_container_refuses_start(self):
        d = Daemon(dict(ENV, SANDBOX_MIN_ISOLATION="container"), expect_start=False)
        self.assertNotEqual(d.wait_exit(60), 0)
        self.assertIn("SANDBOX_MIN_ISOLATION", "\n".join(d.lines))


if __name__ == "__main__":
    unittest.main(verbosity=2)
