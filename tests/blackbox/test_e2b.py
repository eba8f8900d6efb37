"""The e2b provider through the real daemon (issue 11), against the loopback double of E2B in
tests/e2b_double/ (control plane + envd; it runs the code with local node in a private mount and
network namespace). Every step of providers.md §6 and every fault the issue lists is exercised
here; the double records what the daemon sent, so the tests state exactly what reached "E2B".

A live suite (LiveE2B) runs against the real E2B only when E2B_API_KEY is set, and is skipped
visibly otherwise. Standard library only.
"""
import base64
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon, Upstream, WireCase, check_record, js  # noqa: E402

DOUBLE = os.path.join(os.path.dirname(__file__), "..", "e2b_double", "double.py")
API_KEY = "e2b_double_key_" + secrets.token_hex(12)
GUARD_HOST = "guard.plimsoll.test"
UP_TOKEN_PREFIX = "e2b-upstream-credential-"
UP_TOKEN = UP_TOKEN_PREFIX + secrets.token_hex(16)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Double:
    def __init__(self, egress=None):
        args = [sys.executable, DOUBLE, "--api-key", API_KEY]
        for host, url in (egress or {}).items():
            args += ["--egress", "%s=%s" % (host, url)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline()
        self.port = json.loads(line)["port"]
        self.base = "http://127.0.0.1:%d" % self.port

    def _call(self, method, path, obj=None):
        data = json.dumps(obj).encode() if obj is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def faults(self, **f):
        return self._call("POST", "/_double/faults", f)

    def reset(self):
        self._call("POST", "/_double/reset", {})

    def state(self):
        return self._call("GET", "/_double/state")

    def plant(self, metadata, age_s=0):
        return self._call("POST", "/_double/plant", {"metadata": metadata, "age_s": age_s})["sandboxID"]

    def wait_empty(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.state()
            if not st["live"] and not st["procs"]:
                return st
            time.sleep(0.1)
        return self.state()

    def env(self):
        return {"SANDBOX_PROVIDER": "e2b", "E2B_API_KEY": API_KEY, "E2B_API_URL": self.base,
                "E2B_ENVD_URL": self.base + "/envd/{sandbox}"}

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.proc.stdout.close()


def instance_of(env):
    """The daemon's instance label, derived as e2b.c derives it (host, listener, control plane)."""
    seed = "plimsoll-e2b-instance|%s|%s|%s" % (socket.gethostname(), env.get("PLIMSOLL_ADDR", "127.0.0.1:0"),
                                               env["E2B_API_URL"].rstrip("/"))
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def out_of(body, kind="javascript"):
    j = body.get(kind) or {}
    return base64.b64decode(j.get("stdout", "")), base64.b64decode(j.get("stderr", ""))


class E2BCase(WireCase):
    """One double and one daemon for the class; faults are reset before every test."""
    EXTRA = {}

    @classmethod
    def setUpClass(cls):
        cls.dbl = Double(cls.egress())
        # the suites make many runs in a row: no rate limit, room for 8 at once per caller
        env = dict(cls.dbl.env(), PLIMSOLL_INSECURE="1", SANDBOX_RATE_PER_MIN="0", SANDBOX_PER_KEY_CONCURRENT="8")
        env.update(cls.extra_env())
        cls.env = env
        try:
            cls.d = Daemon(env, timeout=120)
        except Exception:
            cls.dbl.close()
            raise

    @classmethod
    def egress(cls):
        return None

    @classmethod
    def extra_env(cls):
        return dict(cls.EXTRA)

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        st = cls.dbl.wait_empty(10)
        cls.dbl.close()
        assert rc == 0, "\n".join(cls.d.lines[-30:])
        assert not st["live"], "sandboxes left alive after SIGTERM: %r" % st["live"]
        assert not any(API_KEY in line for line in cls.d.lines), "the API key reached the daemon's log"
        assert not any("crg_" in line for line in cls.d.lines), "a guard token reached the daemon's log"

    def setUp(self):
        self.dbl.reset()

    def run_js(self, code, **kw):
        st, hdrs, data, _ = self.d.call("Run", js(code, **kw))
        return st, json.loads(data)

    def assertClean(self):
        st = self.dbl.wait_empty()
        self.assertEqual(st["live"], [], "a sandbox was left running")
        self.assertEqual(st["procs"], 0, "a guest process was left running")
        return st


class SnippetE2B(E2BCase):
    def test_describe_states_vm_and_the_endpoints(self):
        st, _, data, _ = self.d.call("Describe", {})
        body = json.loads(data)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["sandbox"], "e2b")
        self.assertEqual(body["isolation"], "vm")
        card = json.dumps(body.get("evidence", {}))
        self.assertIn(self.dbl.base, card)
        self.assertIn("NOT E2B's default", card)
        self.assertIn("api=" + self.dbl.base, body["javascriptEnvironment"]["identity"])
        self.assertIn("probe.cwd", card)
        self.assertIn("net.https_1.1.1.1", card)
        status, _, ready = self.d.request("GET", "/readyz")
        self.assertEqual((status, ready), (200, b"ready\n"))

    def test_vm_floor_runs_and_the_create_is_locked_down(self):
        req = js("console.log('hello', 6 * 7); console.error('e')", minimumIsolation="vm", timeoutMs=5000)
        st, _, data, _ = self.d.call("Run", req)
        body = json.loads(data)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["isolation"], "vm")
        self.assertEqual(body["sandbox"], "e2b")
        self.assertEqual(out_of(body), (b"hello 42\n", b"e\n"))
        self.assertEqual(body["javascript"].get("exitCode", 0), 0)
        check_record(self, req, body)
        state = self.assertClean()
        self.assertEqual(len(state["creates"]), 1)
        c = state["creates"][0]
        self.assertIs(c["secure"], True)
        self.assertEqual(c["network"], {"denyOut": ["0.0.0.0/0"], "allowPublicTraffic": False})
        self.assertNotIn("envVars", c)
        self.assertLessEqual(c["timeout"], 5 + 10)
        self.assertEqual(c["metadata"], {"sdk": "plimsoll", "instance": instance_of(self.env)})
        self.assertEqual(c["templateID"], "base")
        self.assertEqual(len(state["deleted"]), 1)
        start = [r for r in state["log"] if r["path"].endswith("/process.Process/Start")][0]
        h = {k.lower(): v for k, v in start["headers"].items()}
        self.assertEqual(h["content-type"], "application/connect+json")
        self.assertEqual(h["connect-protocol-version"], "1")
        self.assertTrue(1 <= int(h["connect-timeout-ms"]) <= 5000)
        self.assertIn("x-access-token", h)
        self.assertIn("e2b-traffic-access-token", h)

    def test_cli_verifies_the_record(self):
        r = subprocess.run([CLI, "run", "--url", "http://127.0.0.1:%d" % self.d.port, "--min-isolation", "vm",
                            "-e", "console.log('via cli')"], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"via cli\n")
        self.assertIn(b"(checked)", r.stderr)
        self.assertIn(b"actual tier:     vm", r.stderr)

    def test_exit_code_and_no_secret_in_the_guest(self):
        st, body = self.run_js("console.log(JSON.stringify(process.env)); process.exit(7)")
        self.assertEqual(st, 200, body)
        self.assertEqual(body["javascript"]["exitCode"], 7)
        out, _ = out_of(body)
        self.assertNotIn(API_KEY.encode(), out)
        self.assertNotIn(b"e2b_double_key", out)
        self.assertClean()

    def test_concurrent_runs(self):
        """Eight runs at once: one sandbox each, all answered, all deleted (the shared connection
        cache and the tracking are exercised from many threads)."""
        results = [None] * 8

        def one(i):
            results[i] = self.run_js("console.log('run', %d)" % i)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for i, (st, body) in enumerate(results):
            self.assertEqual(st, 200, body)
            self.assertEqual(out_of(body)[0], b"run %d\n" % i)
        state = self.assertClean()
        self.assertEqual(len(state["creates"]), 8)
        self.assertEqual(len(set(state["deleted"])), 8)

    def test_timeout_is_124(self):
        t0 = time.monotonic()
        st, body = self.run_js("console.log('spin'); for (;;) {}", timeoutMs=1500)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["javascript"]["exitCode"], 124)
        self.assertTrue(body["javascript"]["timedOut"])
        self.assertLess(time.monotonic() - t0, 15)
        self.assertClean()

    def test_output_cap(self):
        st, body = self.run_js("process.stdout.write('x'.repeat(200000))")
        self.assertEqual(st, 200, body)
        out, _ = out_of(body)
        self.assertEqual(len(out), 64 * 1024)
        self.assertTrue(body["javascript"]["stdoutTruncated"])

    def test_below_floor_is_not_a_thing_and_vm_floor_met(self):
        # vm is the top tier: every floor is met; an unknown floor is a request refusal.
        self.assertRefused(self.d.call("Run", js("1", minimumIsolation="hypervisor")), "invalid_argument", "request")
        self.assertEqual(self.dbl.state()["creates"], [])


class ProjectE2B(E2BCase):
    def project(self, files, steps, artifacts=(), timeout_ms=None):
        msg = {"protocol": 3, "project": {"files": [{"path": p, "content": c} for p, c in files],
                                          "steps": list(steps), "artifacts": list(artifacts)}}
        if timeout_ms:
            msg["timeoutMs"] = timeout_ms
        st, _, data, _ = self.d.call("Run", msg)
        return st, json.loads(data)

    def test_files_steps_artifacts(self):
        st, body = self.project([("main.js", "require('fs').writeFileSync('out/r.txt', 'result ' + 6*7)"),
                                 ("out/.keep", "")],
                                ["node main.js", "cat out/r.txt; echo; pwd"], ["out/r.txt", "missing.txt"])
        self.assertEqual(st, 200, body)
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED", p)
        self.assertEqual(len(p["steps"]), 2)
        self.assertEqual(base64.b64decode(p["steps"][1]["stdout"]), b"result 42\n/home/user/project\n")
        arts = p.get("artifacts", [])
        self.assertEqual([a["path"] for a in arts], ["out/r.txt"])
        self.assertEqual(base64.b64decode(arts[0]["content"]), b"result 42")
        # one multipart write for the project's files, then one per step
        writes = [r for r in self.dbl.state()["log"] if "/files" in r["path"] and r["method"] == "POST"]
        self.assertEqual(len(writes), 1 + 2)
        self.assertClean()

    def test_steps_stop_at_the_first_failure(self):
        st, body = self.project([], ["echo one", "exit 3", "echo never"])
        self.assertEqual(st, 200, body)
        p = body["project"]
        self.assertEqual(len(p["steps"]), 2)
        self.assertEqual(p["steps"][1]["exitCode"], 3)
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED")

    def test_project_timeout(self):
        st, body = self.project([], ["echo a", "sleep 30"], timeout_ms=2000)
        self.assertEqual(st, 200, body)
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_TIMED_OUT")
        self.assertEqual(p["steps"][-1]["exitCode"], 124)
        self.assertTrue(p["steps"][-1]["timedOut"])
        self.assertClean()

    def test_escaping_path_is_refused_before_any_vm(self):
        st, body = self.project([("../escape.js", "x")], ["true"])
        self.assertEqual(st, 400, body)
        self.assertEqual(self.dbl.state()["creates"], [])


class FaultsE2B(E2BCase):
    def assertMayHaveRun(self, st, body, code="unavailable"):
        self.assertNotEqual(st, 200, body)
        self.assertEqual(body["code"], code, body)
        self.assertEqual(body.get("details", []), [], "a may-have-run error carries no NotDispatched mark")

    def test_create_5xx(self):
        self.dbl.faults(create_5xx=1)
        st, body = self.run_js("console.log(1)")
        self.assertMayHaveRun(st, body)
        self.assertIn("HTTP 503", body["message"])
        self.assertClean()

    def test_missing_tokens_kill_the_vm(self):
        for fault in ("missing_envd_token", "missing_traffic_token"):
            self.dbl.reset()
            self.dbl.faults(**{fault: True})
            st, body = self.run_js("console.log(1)")
            self.assertMayHaveRun(st, body)
            state = self.assertClean()
            self.assertEqual(len(state["deleted"]), 1, fault)
            self.assertFalse(any("process.Process" in r["path"] for r in state["log"]), fault)

    def test_create_without_an_id(self):
        self.dbl.faults(create_no_id=True)
        st, body = self.run_js("console.log(1)")
        self.assertMayHaveRun(st, body)
        self.assertIn("sandbox ID", body["message"])
        state = self.dbl.state()
        self.assertEqual(state["deleted"], [])
        self.assertEqual(len(state["live"]), 1)
        # The daemon scheduled a reconcile for it in 65 s (LifecycleE2B proves the reconcile); the
        # test does not wait: it deletes the orphan as an operator would.
        req = urllib.request.Request(self.dbl.base + "/sandboxes/" + state["live"][0]["sandboxID"], method="DELETE",
                                     headers={"X-API-Key": API_KEY})
        urllib.request.urlopen(req, timeout=10).close()
        self.assertClean()

    def test_stream_cut_before_end_is_an_error(self):
        self.dbl.faults(cut_stream=True)
        st, body = self.run_js("console.log(1)")
        self.assertMayHaveRun(st, body)
        self.assertIn("without an end event", body["message"])
        self.assertClean()

    def test_trailer_error(self):
        self.dbl.faults(trailer_error=True)
        st, body = self.run_js("console.log(1)")
        self.assertMayHaveRun(st, body)
        self.assertIn("internal", body["message"])
        self.assertClean()

    def test_slow_stream_hits_the_deadline(self):
        self.dbl.faults(slow_stream=3)
        st, body = self.run_js("console.log(1); setTimeout(() => console.log(2), 10)", timeoutMs=1500)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["javascript"]["exitCode"], 124)
        self.assertTrue(body["javascript"]["timedOut"])
        self.assertClean()

    def test_oversized_stream_is_153_truncated(self):
        self.dbl.faults(oversized_stream=True)
        st, body = self.run_js("console.log(1)", timeoutMs=30000)
        self.assertEqual(st, 200, body)
        j = body["javascript"]
        self.assertEqual(j["exitCode"], 153)
        self.assertTrue(j["stdoutTruncated"] and j["stderrTruncated"])
        self.assertEqual(len(out_of(body)[0]), 64 * 1024)
        self.assertClean()

    def test_oversized_frame_is_an_error(self):
        self.dbl.faults(oversized_frame=True)
        st, body = self.run_js("console.log(1)")
        self.assertMayHaveRun(st, body)
        self.assertIn("8 MiB", body["message"])
        self.assertClean()

    def test_delete_404_is_success(self):
        self.dbl.faults(delete_404=True)
        st, body = self.run_js("console.log(1)")
        self.assertEqual(st, 200, body)
        self.assertFalse(self.d.events("e2b_delete_failed"))
        self.assertClean()

    def test_files_500_is_an_error(self):
        self.dbl.faults(files_500=True)
        st, body = self.run_js("console.log(1)")
        self.assertMayHaveRun(st, body)
        self.assertClean()

    def test_no_secret_in_errors(self):
        for f in ({"create_5xx": 1}, {"cut_stream": True}, {"missing_envd_token": True}):
            self.dbl.reset()
            self.dbl.faults(**f)
            _, body = self.run_js("1")
            self.assertNotIn(API_KEY, json.dumps(body))
            self.assertNotIn("ea_", json.dumps(body))


class LifecycleE2B(unittest.TestCase):
    """Delete failures, the reconcile at start, SIGTERM, a daemon killed mid-run."""

    def setUp(self):
        self.dbl = Double()
        self.env = dict(self.dbl.env(), PLIMSOLL_INSECURE="1")

    def tearDown(self):
        self.dbl.close()

    def test_delete_failing_three_times_then_the_sweep(self):
        with Daemon(self.env, timeout=120) as d:
            self.dbl.reset()  # the startup proof's own calls are not part of this count
            self.dbl.faults(delete_fail=3)
            st, _, data, _ = d.call("Run", js("console.log(1)"))
            self.assertEqual(st, 200, data)
            ev = d.wait_events("e2b_delete_failed")
            self.assertEqual(len(ev), 1)
            self.assertEqual(ev[0]["attempts"], 3)
            self.assertEqual(len(self.dbl.state()["live"]), 1)
            deletes = [r for r in self.dbl.state()["log"] if r["method"] == "DELETE"]
            self.assertEqual(len(deletes), 3)
        # SIGTERM: the shutdown sweep removes what the failed deletes left
        self.assertEqual(self.dbl.wait_empty()["live"], [])

    def test_control_plane_down(self):
        d = Daemon(self.env, timeout=120)
        try:
            self.dbl.close()  # E2B is gone
            st, _, data, _ = d.call("Run", js("console.log(1)"))
            body = json.loads(data)
            self.assertEqual(body["code"], "unavailable", body)
            self.assertEqual(body.get("details", []), [], "may have run: no NotDispatched mark")
            self.assertNotIn(API_KEY, data.decode())
        finally:
            self.assertEqual(d.stop(), 0)
            self.dbl = Double()  # for tearDown

    def test_periodic_reconcile(self):
        """An orphan of ours that appears while the daemon runs is removed by the periodic
        reconcile (every 60 s), not only at startup; a foreign one is spared."""
        with Daemon(self.env, timeout=120) as d:
            mine = self.dbl.plant({"sdk": "plimsoll", "instance": instance_of(self.env)})
            foreign = self.dbl.plant({"sdk": "plimsoll", "instance": "someoneelse0000"})
            self.dbl.faults(age_skew_s=120)
            deadline = time.monotonic() + 80
            while time.monotonic() < deadline and mine in [s["sandboxID"] for s in self.dbl.state()["live"]]:
                time.sleep(0.5)
            ids = [s["sandboxID"] for s in self.dbl.state()["live"]]
            self.assertNotIn(mine, ids)
            self.assertIn(foreign, ids)
            self.assertTrue(d.events("e2b_orphan_deleted"))

    def test_sigterm_mid_run_drains_then_deletes(self):
        d = Daemon(self.env, timeout=120)
        got = {}

        def run():
            st, _, data, _ = d.call("Run", js("for (;;) {}", timeoutMs=3000))
            got["st"], got["body"] = st, json.loads(data)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not self.dbl.state()["procs"]:
            time.sleep(0.1)
        self.assertEqual(self.dbl.state()["procs"], 1)
        self.assertEqual(d.stop(), 0)
        t.join(30)
        self.assertEqual(got.get("st"), 200, got)
        self.assertEqual(got["body"]["javascript"]["exitCode"], 124)
        st = self.dbl.wait_empty()
        self.assertEqual((st["live"], st["procs"]), ([], 0))

    def test_killed_mid_run_then_restarted(self):
        d = Daemon(self.env, timeout=120)
        def doomed():
            try:
                d.call("Run", js("for (;;) {}", timeoutMs=60000))
            except OSError:
                pass  # the daemon is killed under this call, on purpose
        t = threading.Thread(target=doomed, daemon=True)
        t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not self.dbl.state()["procs"]:
            time.sleep(0.1)
        self.assertEqual(self.dbl.state()["procs"], 1)
        d.kill()
        live = self.dbl.state()["live"]
        self.assertEqual(len(live), 1)
        orphan = live[0]["sandboxID"]
        # a foreign sandbox (another instance label) and a young one of ours are spared
        foreign = self.dbl.plant({"sdk": "plimsoll", "instance": "someoneelse0000"}, age_s=600)
        self.dbl.faults(age_skew_s=120)  # the orphan is older than the 60 s grace
        with Daemon(self.env, timeout=120) as d2:
            ids = [s["sandboxID"] for s in self.dbl.state()["live"]]
            self.assertNotIn(orphan, ids)
            self.assertIn(foreign, ids)
            self.assertTrue(d2.events("e2b_orphan_deleted"))


class ConfigE2B(unittest.TestCase):
    def start_fails(self, env, needle):
        d = Daemon(env, expect_start=False)
        rc = d.wait_exit(120)
        text = "\n".join(d.lines)
        self.assertNotEqual(rc, 0, text)
        self.assertIn(needle, text)
        return text

    def test_bad_configuration_stops_startup(self):
        base = {"SANDBOX_PROVIDER": "e2b", "E2B_API_KEY": API_KEY, "PLIMSOLL_INSECURE": "1"}
        self.start_fails(dict(base, E2B_API_URL="http://api.example.com"), "E2B_API_URL")
        self.start_fails(dict(base, E2B_ENVD_URL="http://127.0.0.1:1/envd"), "E2B_ENVD_URL")
        self.start_fails(dict(base, SANDBOX_PIDS="64"), "SANDBOX_PIDS")
        self.start_fails(dict(base, SANDBOX_CPUS="0.5"), "SANDBOX_CPUS")
        self.start_fails(dict(base, E2B_GUARD_URL="https://guard.example"), "PLIMSOLL_GUARD_ADDR")
        for bad in ("http://guard.example", "https://localhost/x", "https://guard.example:8443",
                    "https://guard.example/x?q", "https://guard.example/a/../b"):
            self.start_fails(dict(base, E2B_GUARD_URL=bad, PLIMSOLL_GUARD_ADDR="127.0.0.1:0"), "E2B_GUARD_URL")
        self.start_fails({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1",
                          "PLIMSOLL_GUARD_ADDR": "127.0.0.1:0"}, "PLIMSOLL_GUARD_ADDR")
        text = self.start_fails({"SANDBOX_PROVIDER": "e2b", "PLIMSOLL_INSECURE": "1"}, "E2B_API_KEY")
        self.assertNotIn("listening", text)

    def test_caps_are_read_back(self):
        dbl = Double()
        try:
            env = dict(dbl.env(), PLIMSOLL_INSECURE="1")
            self.start_fails(dict(env, SANDBOX_MEMORY_MB="256"), "exceeds memory cap")
            dbl.faults(disk_size_mb=None)
            self.start_fails(dict(env, SANDBOX_DISK_MB="2048"), "disk cap")
            self.assertEqual(dbl.wait_empty()["live"], [])
            dbl.reset()
            with Daemon(dict(env, SANDBOX_MEMORY_MB="1024", SANDBOX_CPUS="2"), timeout=120) as d:
                st, _, data, _ = d.call("Run", js("console.log(1)"))
                self.assertEqual(st, 200, data)
                gets = [r for r in dbl.state()["log"] if r["method"] == "GET" and r["path"].startswith("/sandboxes/")]
                self.assertTrue(gets, "the resources were not read back")
        finally:
            dbl.close()

    def test_wrong_api_key_fails_the_proof(self):
        dbl = Double()
        try:
            env = dict(dbl.env(), PLIMSOLL_INSECURE="1", E2B_API_KEY="wrong-" + secrets.token_hex(8))
            text = self.start_fails(env, "startup proof")
            self.assertNotIn(env["E2B_API_KEY"], text)
        finally:
            dbl.close()


class GrantsE2B(E2BCase):
    """Grants through the egress guard: the double's emulated egress proxy adds the per-run guard
    header outside the guest and forwards to the daemon's guard listener."""

    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp(prefix="plimsoll-e2b-grants-")
        cls.guard_port = free_port()
        grants = os.path.join(cls.tmp, "grants.json")
        cls.caller = "alice-e2b-grants-token-0123456789abcdef"
        clients = os.path.join(cls.tmp, "clients.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": hashlib.sha256(cls.caller.encode()).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*", "POST /v1/items/*"],
                "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"},
                "max_calls": 50}}}, f)
        cls.EXTRA = {"PLIMSOLL_GRANTS_FILE": grants, "PLIMSOLL_CLIENTS_FILE": clients, "ITEMS_TOKEN": UP_TOKEN,
                     "E2B_GUARD_URL": "https://%s/v1/e2b/guard" % GUARD_HOST,
                     "PLIMSOLL_GUARD_ADDR": "127.0.0.1:%d" % cls.guard_port}
        super().setUpClass()

    @classmethod
    def egress(cls):
        return {GUARD_HOST: "http://127.0.0.1:%d" % cls.guard_port}

    @classmethod
    def extra_env(cls):
        e = dict(cls.EXTRA)
        return e

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.up.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def call(self, msg):
        st, _, data, _ = self.d.call("Run", msg, token=self.caller)
        return st, json.loads(data)

    def test_describe_claims_grants(self):
        st, _, data, _ = self.d.call("Describe", {}, token=self.caller)
        body = json.loads(data)
        self.assertTrue(body.get("supportsJavascriptGrants"), body)
        self.assertIn(GUARD_HOST, json.dumps(body["evidence"]))

    def test_granted_snippet_reaches_only_the_routes(self):
        n0 = self.up.count()
        code = r"""
(async () => {
  const a = await host.get('/v1/items/1');
  console.log('ok', a.id);
  try { await host.get('/v1/secret'); } catch (e) { console.log('gate', e.message); }
  const raw = await fetch('https://%s/v1/e2b/guard', {method: 'POST', body: JSON.stringify({method: 'GET', path: '/v1/other/1'})});
  console.log('raw', raw.status, (await raw.text()).trim());
  try { await fetch('https://example.com'); console.log('egress open'); } catch (e) { console.log('egress blocked'); }
  const fs = require('fs');
  const seen = JSON.stringify(process.env) + fs.readFileSync(__filename, 'utf8');
  console.log('seen', Buffer.from(seen).toString('base64'));
})();
""" % GUARD_HOST
        st, body = self.call({"protocol": 3, "javascript": {"code": code, "grantProfile": "items"}})
        self.assertEqual(st, 200, body)
        out = out_of(body)[0].decode()
        self.assertIn("ok 1\n", out)
        self.assertIn("gate host api call not permitted by sandbox capability: GET /v1/secret", out)
        self.assertIn("raw 403 forbidden by sandbox capability allowlist", out)
        self.assertIn("egress blocked", out)
        seen = base64.b64decode(out.split("seen ", 1)[1].strip())
        arrived = self.up.since(n0)
        self.assertEqual([r["path"] for r in arrived], ["/v1/items/1"])
        self.assertEqual(arrived[0]["headers"].get("Authorization"), "Bearer " + UP_TOKEN)
        self.assertNotIn(UP_TOKEN.encode(), seen)
        self.assertNotIn(API_KEY.encode(), seen)
        c = self.dbl.state()["creates"][-1]
        net = c["network"]
        self.assertEqual(net["allowOut"], [GUARD_HOST])
        rule = net["rules"][GUARD_HOST]
        self.assertEqual(len(rule), 1)
        token = rule[0]["transform"]["headers"]["X-Plimsoll-E2B-Guard"]
        self.assertRegex(token, r"^crg_[0-9a-f]{64}$")
        self.assertNotIn(token, json.dumps(body))
        self.assertNotIn(token.encode(), seen, "the guest saw its guard token")
        # after the run the token is dead
        req = urllib.request.Request("http://127.0.0.1:%d/v1/e2b/guard" % self.guard_port, method="POST",
                                     data=b'{"method":"GET","path":"/v1/items/2"}',
                                     headers={"X-Plimsoll-E2B-Guard": token})
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(cm.exception.code, 401)
        self.assertIn(b"unknown or expired egress guard credential", cm.exception.read())
        self.assertEqual(self.up.count(), n0 + 1)
        self.assertClean()

    def test_granted_project_step(self):
        n0 = self.up.count()
        msg = {"protocol": 3, "project": {
            "files": [{"path": "main.mjs", "content": "const r = await host.post('/v1/items/9', {a: 1}); console.log(r.id);"}],
            "steps": ["node main.mjs", "cat /tmp/plimsoll-e2b-host.mjs | grep -c crg_ || true"],
            "grantProfile": "items"}}
        st, body = self.call(msg)
        self.assertEqual(st, 200, body)
        steps = body["project"]["steps"]
        self.assertEqual(base64.b64decode(steps[0]["stdout"]), b"9\n", steps[0])
        self.assertEqual(base64.b64decode(steps[1]["stdout"]), b"0\n")
        seen = self.up.since(n0)
        self.assertEqual([(r["method"], r["path"]) for r in seen], [("POST", "/v1/items/9")])
        self.assertClean()

    def test_guard_rejects_unknown_tokens_and_bad_requests(self):
        url = "http://127.0.0.1:%d/v1/e2b/guard" % self.guard_port

        def post(path=url, body=b"{}", headers=None):
            req = urllib.request.Request(path, method="POST", data=body, headers=headers or {})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
        self.assertEqual(post(headers={}), 401)
        self.assertEqual(post(headers={"X-Plimsoll-E2B-Guard": "crg_" + "0" * 64}), 401)
        self.assertEqual(post(url + "x", headers={"X-Plimsoll-E2B-Guard": "crg_" + "0" * 64}), 404)
        self.assertEqual(post(url + "?q=1", headers={"X-Plimsoll-E2B-Guard": "crg_" + "0" * 64}), 404)


class GrantsWithoutGuard(E2BCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="plimsoll-e2b-noguard-")
        grants = os.path.join(cls.tmp, "grants.json")
        cls.caller = "bob-e2b-grants-token-0123456789abcdef00"
        clients = os.path.join(cls.tmp, "clients.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "bob", "token_sha256": hashlib.sha256(cls.caller.encode()).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {"base_url": "http://127.0.0.1:9", "allow": ["GET /v1/items/*"],
                                              "allowed_callers": ["bob"],
                                              "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        cls.EXTRA = {"PLIMSOLL_GRANTS_FILE": grants, "PLIMSOLL_CLIENTS_FILE": clients, "ITEMS_TOKEN": UP_TOKEN}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_grant_is_unsupported_before_any_vm(self):
        for msg in ({"protocol": 3, "javascript": {"code": "1", "grantProfile": "items"}},
                    {"protocol": 3, "project": {"steps": ["true"], "grantProfile": "items"}}):
            self.assertRefused(self.d.call("Run", msg, token=self.caller), "unimplemented", "unsupported")
        self.assertEqual(self.dbl.state()["creates"], [])


@unittest.skipUnless(os.environ.get("E2B_API_KEY"), "live E2B suite: E2B_API_KEY is not set (skipped)")
class LiveE2B(WireCase):
    """The real E2B: the startup proof, a vm snippet, a timeout. Needs E2B_API_KEY (and network)."""

    def test_live(self):
        env = {"SANDBOX_PROVIDER": "e2b", "E2B_API_KEY": os.environ["E2B_API_KEY"], "PLIMSOLL_INSECURE": "1"}
        if os.environ.get("E2B_TEMPLATE"):
            env["E2B_TEMPLATE"] = os.environ["E2B_TEMPLATE"]
        with Daemon(env, timeout=180) as d:
            req = js("console.log('live', 1 + 1)", minimumIsolation="vm")
            st, _, data, _ = d.call("Run", req)
            body = json.loads(data)
            self.assertEqual(st, 200, body)
            self.assertEqual(out_of(body)[0], b"live 2\n")
            check_record(self, req, body)
            st, _, data, _ = d.call("Run", js("for (;;) {}", timeoutMs=3000))
            self.assertEqual(json.loads(data)["javascript"]["exitCode"], 124)
            self.assertFalse(any(env["E2B_API_KEY"] in line for line in d.lines))


if __name__ == "__main__":
    unittest.main(verbosity=2)
