"""The microvm provider through the real daemon over HTTP (issue 10).

Under TCG (this machine kind) a cold boot costs seconds, so one daemon serves most tests and the
VM count stays modest. MICROVM_LEAK_RUNS (default 200) sets the length of the leak run."""
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import (CLI, DAEMON, STACK_SNIPPETS, Daemon, Upstream, WireCase, check_record,  # noqa: E402
                     descendants, js)

UID = 61100
TOKEN = "alice-token-0123456789abcdef0123456789"
UP_TOKEN = "upstream-secret-token-0123456789"
STARTUP = 300  # seconds: template boot + proof under a loaded TCG host


def out(resp, stream="stdout"):
    return base64.b64decode(resp["javascript"].get(stream, ""))


def qemus(pid):
    """Descendants of pid that are jailed QEMUs (the unprivileged uid)."""
    found = []
    for p in descendants(pid):
        try:
            with open("/proc/%d/status" % p) as f:
                st = f.read()
        except OSError:
            continue
        if "\nUid:\t%d\t" % UID in st:
            found.append(p)
    return found


def uid_procs():
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/status" % d) as f:
                    if "\nUid:\t%d\t" % UID in f.read():
                        found.append(int(d))
            except OSError:
                pass
    return found


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rindex(")") + 2]
    except (OSError, ValueError):
        return None


def settle(pred, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


class MicroVM(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        clients = os.path.join(cls.tmp, "clients.json")
        grants = os.path.join(cls.tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*"],
                "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"},
                "max_calls": 5}}}, f)
        cls.d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_CLIENTS_FILE": clients,
                        "PLIMSOLL_GRANTS_FILE": grants, "ITEMS_TOKEN": UP_TOKEN,
                        "SANDBOX_RATE_PER_MIN": "0", "SANDBOX_MAX_CONCURRENT": "4",
                        "SANDBOX_PER_KEY_CONCURRENT": "4"}, timeout=STARTUP)

    @classmethod
    def tearDownClass(cls):
        pid = cls.d.proc.pid
        assert cls.d.stop() == 0
        cls.up.close()
        # Every VM went with the daemon.
        assert settle(lambda: not qemus(pid), 10)

    def run_js(self, code, **kw):
        req = js(code, **kw)
        st, hdrs, data, rid = self.d.call("Run", req, token=TOKEN)
        self.assertEqual(st, 200, (data, self.d.lines[-3:]))
        resp = json.loads(data)
        check_record(self, req, resp)
        return resp

    def test_describe_and_card(self):
        st, _, data, _ = self.d.call("Describe", {}, token=TOKEN)
        d = json.loads(data)
        self.assertEqual(d["sandbox"], "microvm")
        self.assertEqual(d["isolation"], "vm")
        self.assertRegex(d["javascriptEnvironment"]["identity"], r"^microvm:sha256:[0-9a-f]{64}$")
        self.assertTrue(d.get("supportsJavascriptGrants"))
        ev = d["evidence"]
        names = {c["name"] for c in ev["checks"]}
        self.assertTrue(d.get("supportsProject"))
        for n in ("guest.project", "host.qemu_uid", "host.qemu_seccomp", "host.qemu_descriptors", "guest.network_interfaces",
                  "guest.block_devices", "guest.host_file", "guest.fork_bomb", "guest.memory_bomb",
                  "guest.snippet", "guest.kernel"):
            self.assertIn(n, names)
        self.assertTrue(all(c.get("passed") for c in ev["checks"]), ev["checks"])
        proj = [c for c in ev["checks"] if c["name"] == "guest.project"][0]
        self.assertIn("node", json.dumps(proj))
        # Project VMs have one block device, node's read-only image; snippet VMs have none.
        for n in ("guest.disk", "guest.project_block_devices", "guest.project_disk_read_only",
                  "host.project_qemu_descriptors", "guest.project_network_interfaces"):
            self.assertIn(n, names)
        self.assertRegex(d["projectEnvironment"]["identity"], r"^microvm:sha256:[0-9a-f]{64}$")
        self.assertNotEqual(d["projectEnvironment"]["identity"], d["javascriptEnvironment"]["identity"])
        self.assertRegex(ev["runtime"], r"^qemu-microvm/(tcg|kvm)$")
        self.assertTrue(any(line.startswith("accelerator: ") for line in ev["confinement"]), ev["confinement"])
        self.assertEqual(d["policy"], "plimsoll-evidence:sha256:" + ev["digest"])

    def test_vm_floor_runs_a_snippet_like_the_process_tier(self):
        r = self.run_js('console.log("vm", 6*7, typeof process, [1,2].map(x => x*2))', minimumIsolation="vm")
        self.assertEqual(out(r), b"vm 42 object [ 2, 4 ]\n")
        self.assertEqual(r["sandbox"], "microvm")
        self.assertEqual(r["isolation"], "vm")
        self.assertRegex(r["environment"], r"^microvm:sha256:[0-9a-f]{64}$")

    def test_stack_overflow_is_a_catchable_range_error(self):  # issue 19: as at the process tier
        for code in STACK_SNIPPETS:
            r = self.run_js(code)
            self.assertEqual((out(r), r["javascript"].get("exitCode", 0)), (b"caught true\n", 0), code)

    def test_startup_progress_is_logged(self):  # issue 19 item 5: ~15 s of startup is not silence
        lines = self.d.events("provider_progress")
        self.assertTrue(all(e["level"] == "info" and e["provider"] == "microvm" for e in lines), lines)
        steps = [e["step"] for e in lines]
        for step in ("accelerator", "template", "check", "proof", "pool"):
            self.assertIn(step, steps, lines)
        # in order: the accelerator first, every check of the card named, then the pool
        self.assertEqual(steps[0], "accelerator")
        self.assertLess(steps.index("template"), steps.index("check"))
        self.assertLess(max(i for i, s in enumerate(steps) if s == "check"), steps.index("pool"))
        st, _, data, _ = self.d.call("Describe", {}, token=TOKEN)
        card = json.loads(data)["evidence"]["checks"]
        named = {e["detail"].rsplit(": ", 1)[0] for e in lines if e["step"] == "check"}
        self.assertEqual(named, {c["name"] for c in card})
        self.assertTrue(all(e["detail"].endswith(": passed") for e in lines if e["step"] == "check"), lines)
        accel = [e["detail"] for e in lines if e["step"] == "accelerator"]
        self.assertTrue(any(a.startswith(("tcg", "kvm")) for a in accel), accel)
        # the pools fill in the background: each says so once it is full
        self.assertTrue(self.d.wait_events("provider_progress", lambda e: "pool full" in e["detail"], n=2,
                                           timeout=STARTUP), self.d.events("provider_progress"))

    def test_record_verifies_with_the_cli(self):
        env = dict(os.environ, PLIMSOLL_URL="http://127.0.0.1:%d" % self.d.port)
        tokf = os.path.join(self.tmp, "tok")
        with open(tokf, "w") as f:
            f.write(TOKEN)
        p = subprocess.run([CLI, "run", "--min-isolation", "vm", "--token-file", tokf, "-e", "console.log(7)"],
                           env=env, capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"(checked)", p.stderr + p.stdout)

    def test_timeout_is_a_timed_out_result(self):
        r = self.run_js("console.log('before'); for(;;){}", timeoutMs=1000)
        self.assertTrue(r["javascript"].get("timedOut"))
        self.assertEqual(r["javascript"].get("exitCode"), 124)
        self.assertEqual(out(r), b"before\n")

    def test_error_and_stderr(self):
        r = self.run_js("console.error('e1'); throw new Error('boom')")
        self.assertEqual(r["javascript"].get("exitCode"), 1)
        self.assertIn(b"e1\n", out(r, "stderr"))
        self.assertIn(b"boom", out(r, "stderr"))

    def test_entropy_differs_between_restored_vms(self):
        a = out(self.run_js("console.log(Math.random())"))
        b = out(self.run_js("console.log(Math.random())"))
        self.assertNotEqual(a, b)

    def test_grant_reaches_only_its_routes(self):
        n0 = len(self.up.seen)
        code = ('host.get("/v1/items/7").then(r => console.log("ok", JSON.stringify(r)))'
                '.then(() => host.get("/v1/other/1")).then(r => console.log("other", r.status))'
                '.catch(e => console.log("ERR", e.message))')
        msg = {"protocol": 3, "javascript": {"code": code, "grantProfile": "items"}}
        st, _, data, _ = self.d.call("Run", msg, token=TOKEN)
        self.assertEqual(st, 200, (data, self.d.lines[-3:]))
        text = out(json.loads(data)).decode()
        self.assertIn('ok {"id":"7","method":"GET"}', text)
        self.assertIn("ERR host api call not permitted", text)
        seen = self.up.seen[n0:]
        self.assertEqual([s["path"] for s in seen], ["/v1/items/7"])
        self.assertEqual(seen[0]["headers"].get("Authorization"), "Bearer " + UP_TOKEN)

    def run_project(self, files, steps, artifacts=(), **kw):
        msg = {"protocol": 3, "project": {"files": [{"path": p, "content": c} for p, c in files],
                                          "steps": list(steps), "artifacts": list(artifacts)}}
        msg.update(kw)
        st, _, data, _ = self.d.call("Run", msg, token=TOKEN)
        self.assertEqual(st, 200, (data, self.d.lines[-3:]))
        r = json.loads(data)
        self.assertEqual(r["record"]["provider"], "microvm")
        return r

    def test_project_files_steps_artifacts_stop_at_first_failure(self):
        r = self.run_project([("src/a.sh", "echo from-file $(id -u)")],
                             ["sh src/a.sh > out.txt; cat out.txt", "echo e >&2; exit 3", "echo never"],
                             ["out.txt", "missing.txt", "src/a.sh"], minimumIsolation="vm")
        self.assertEqual(r["isolation"], "vm")
        p = r["project"]
        self.assertEqual(p["outcome"], "PROJECT_OUTCOME_COMPLETED")
        self.assertFalse(p.get("outcomeDetail"))
        self.assertEqual(len(p["steps"]), 2)
        self.assertEqual(base64.b64decode(p["steps"][0]["stdout"]), b"from-file 65534\n")
        self.assertEqual(p["steps"][1].get("exitCode"), 3)
        self.assertEqual(base64.b64decode(p["steps"][1]["stderr"]), b"e\n")
        self.assertEqual([a["path"] for a in p["artifacts"]], ["out.txt", "src/a.sh"])
        self.assertEqual(base64.b64decode(p["artifacts"][0]["content"]), b"from-file 65534\n")

    def test_project_step_timeout(self):
        r = self.run_project([], ["echo started; sleep 30"], timeoutMs=1500)
        p = r["project"]
        self.assertEqual(p["outcome"], "PROJECT_OUTCOME_TIMED_OUT")
        self.assertEqual(p.get("outcomeDetail"), "step 1 exceeded its time budget")
        self.assertTrue(p["steps"][0].get("timedOut"))
        self.assertEqual(p["steps"][0].get("exitCode"), 124)

    def test_project_has_no_network_and_no_host_files(self):
        r = self.run_project([], ["ls /sys/class/net; ls /etc/passwd 2>&1; echo end"])
        outp = base64.b64decode(r["project"]["steps"][0]["stdout"])
        self.assertTrue(outp.startswith(b"lo\n"), outp)
        self.assertIn(b"end", outp)
        self.assertNotIn(b"root:", outp)

    def test_project_runs_node_main_js(self):
        r = self.run_project([("main.js", "console.log('sum', [1, 2, 3].reduce((a, b) => a + b));"
                                          "require('fs').writeFileSync('out.txt', process.version);")],
                             ["node main.js", "node --version"], ["out.txt"], minimumIsolation="vm")
        p = r["project"]
        self.assertEqual(p["outcome"], "PROJECT_OUTCOME_COMPLETED", p)
        self.assertEqual([s.get("exitCode", 0) for s in p["steps"]], [0, 0], p)
        self.assertEqual(base64.b64decode(p["steps"][0]["stdout"]), b"sum 6\n")
        host = subprocess.run(["node", "--version"], capture_output=True, check=True).stdout
        self.assertEqual(base64.b64decode(p["steps"][1]["stdout"]), host)
        self.assertEqual(base64.b64decode(p["artifacts"][0]["content"]), host.strip())

    def test_project_node_disk_is_read_only(self):
        r = self.run_project([], ["grep ' /usr ' /proc/mounts; touch /usr/x 2>&1; (echo x > /dev/vda) 2>&1; "
                                  "ls /sys/block; echo end"])
        p = r["project"]
        self.assertEqual(r["environment"], self.d_project_identity())
        outp = base64.b64decode(p["steps"][0]["stdout"])
        self.assertRegex(outp, rb"^/dev/vda /usr ext4 ro,")
        self.assertIn(b"Read-only file system", outp)
        self.assertIn(b"Permission denied", outp)
        self.assertTrue(outp.endswith(b"vda\nend\n"), outp)

    def d_project_identity(self):
        st, _, data, _ = self.d.call("Describe", {}, token=TOKEN)
        return json.loads(data)["projectEnvironment"]["identity"]

    def test_project_grant_is_refused_before_dispatch(self):
        msg = {"protocol": 3, "project": {"files": [], "steps": ["true"], "grantProfile": "items"}}
        self.assertRefused(self.d.call("Run", msg, token=TOKEN), "unimplemented", "unsupported")

    def test_qemu_killed_mid_run_is_an_unmarked_error(self):
        got = {}

        def go():
            got["a"] = self.d.call("Run", js("for(;;){}", timeoutMs=20000), token=TOKEN)

        t = threading.Thread(target=go)
        t.start()
        time.sleep(2)
        killed = qemus(self.d.proc.pid)
        for p in killed:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        t.join(60)
        self.assertFalse(t.is_alive())
        # Every killed QEMU has exited (zombie or reaped): its sockets are closed.
        self.assertTrue(settle(lambda: all(proc_state(p) in ("Z", None) for p in killed), 10))
        st, hdrs, data, _ = got["a"]
        body = json.loads(data)
        self.assertNotEqual(st, 200)
        self.assertEqual(body["code"], "unavailable", body)
        self.assertNotIn("details", body)  # no NotDispatched: code may have run
        self.assertNotIn("plimsoll-not-dispatched", {k.lower() for k in hdrs})
        # The daemon serves on. A pool VM caught by the same kill sweep can still fail the first
        # run after it (an unmarked error, seen once in five runs of this suite): QEMU's thread
        # group leader shows "Z" while its other threads still exit and hold its sockets, so the
        # pool's liveness check at take time (reaped? channel closed?) can pass a dying VM.
        for attempt in range(3):
            st, _, data, _ = self.d.call("Run", js("console.log('again')"), token=TOKEN)
            if st == 200:
                break
            self.assertEqual(json.loads(data)["code"], "unavailable")
        self.assertEqual(st, 200, (data, self.d.lines[-3:]))
        self.assertEqual(out(json.loads(data)), b"again\n")

    def test_zz_many_runs_leak_nothing(self):
        pid = self.d.proc.pid
        n = int(os.environ.get("MICROVM_LEAK_RUNS", "200"))
        self.run_js("1")
        # Measured with the pools full and idle (2 snippet VMs + 1 project VM, each holding 2 of
        # the daemon's fds).
        self.assertTrue(settle(lambda: len(qemus(pid)) == 3))
        time.sleep(1)
        fds0 = len(os.listdir("/proc/%d/fd" % pid))
        t0 = time.monotonic()
        for i in range(n):
            r = self.run_js("console.log(%d)" % i)
            self.assertEqual(out(r), b"%d\n" % i)
        wall = time.monotonic() - t0
        print("\nmicrovm: %d runs back to back in %.1f s (%.2f runs/s)" % (n, wall, n / wall), file=sys.stderr)
        # Only the pools (2 + 1 VMs, each with its channel's guestio helper, docs/privsep.md)
        # remain; the daemon's descriptors are back where they were.
        self.assertTrue(settle(lambda: len(qemus(pid)) == 3 and len(descendants(pid)) == 6), descendants(pid))
        self.assertTrue(settle(lambda: len(os.listdir("/proc/%d/fd" % pid)) == fds0, 30),
                        (fds0, os.listdir("/proc/%d/fd" % pid)))


class MicroVMLifecycle(unittest.TestCase):
    def test_qemu_missing_stops_startup_naming_the_package(self):
        d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1",
                    "SANDBOX_MICROVM_QEMU": "/nonexistent/qemu-system-x86_64"}, expect_start=False)
        rc = d.wait_exit(60)
        self.assertNotEqual(rc, 0)
        self.assertIn("qemu-system-x86", "\n".join(d.lines))

    def test_daemon_killed_leaves_no_qemu(self):
        before = set(uid_procs())
        d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_MICROVM_ACCEL": "tcg"},
                   timeout=STARTUP)
        pid = d.proc.pid
        self.assertTrue(settle(lambda: len(qemus(pid)) >= 1, 60))
        mine = set(qemus(pid))
        d.kill()  # SIGKILL: no drain, no cleanup code runs
        self.assertTrue(settle(lambda: not (set(uid_procs()) - before) & mine, 10), mine)

    def test_guest_kernel_panic_is_an_unmarked_error(self):
        """A guest whose kernel panics mid-run (the test initramfs: PID 1 exits on a marked snippet;
        "Attempted to kill init", panic=-1, -no-reboot: QEMU exits): an error without a
        not-dispatched mark, no hang, no QEMU left, and the daemon serves on."""
        initrd = os.environ.get("MICROVM_PANIC_INITRD") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(DAEMON))),
            "providers/microvm/plimsoll-microvm-initramfs-panictest.cpio")
        self.assertTrue(os.path.isfile(initrd), "build the test initramfs (ninja): " + initrd)
        d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_MICROVM_ACCEL": "tcg",
                    "SANDBOX_MICROVM_INITRD": initrd, "SANDBOX_RATE_PER_MIN": "0"}, timeout=STARTUP)
        try:
            pid = d.proc.pid
            self.assertTrue(settle(lambda: len(qemus(pid)) == 3, 120), qemus(pid))
            before = set(qemus(pid))
            t0 = time.monotonic()
            st, hdrs, data, _ = d.call("Run", js("/* plimsoll-test:panic */ console.log(1)", timeoutMs=20000))
            waited = time.monotonic() - t0
            body = json.loads(data)
            self.assertNotEqual(st, 200, body)
            self.assertEqual(body["code"], "unavailable", body)
            self.assertNotIn("details", body)  # no NotDispatched: code may have run
            self.assertNotIn("plimsoll-not-dispatched", {k.lower() for k in hdrs})
            # The channel closed under the run (the guest reset after its panic, -no-reboot, and
            # QEMU exits): the answer's message holds the detail, "exit 0" or
            # "signal 9" depending on whether QEMU had exited before the daemon reaped it. No
            # hang: the answer came before the run's own 20 s deadline (a deadline would have
            # been a timedOut result, not an error).
            self.assertIn("went away (", body.get("message", ""), body)
            self.assertLess(waited, 20, waited)
            # The VM that panicked is gone (reaped); the pools refill; the daemon serves on.
            self.assertTrue(settle(lambda: len(before - set(qemus(pid))) == 1 and len(qemus(pid)) == 3, 60),
                            (before, qemus(pid)))
            self.assertTrue(all(proc_state(p) not in ("Z", None) for p in qemus(pid)))
            st, _, data, _ = d.call("Run", js("console.log('after')"))
            self.assertEqual(st, 200, data)
            self.assertEqual(out(json.loads(data)), b"after\n")
        finally:
            self.assertEqual(d.stop(), 0)
        self.assertTrue(settle(lambda: not qemus(pid), 10))

    def test_kvm_path(self):
        """Runs the KVM path where /dev/kvm boots a guest; skips visibly (saying why) elsewhere."""
        d = Daemon({"SANDBOX_PROVIDER": "microvm", "PLIMSOLL_INSECURE": "1", "SANDBOX_MICROVM_ACCEL": "kvm"},
                   expect_start=False)
        deadline = time.monotonic() + STARTUP
        while d.port is None and d.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if d.port is None:
            d.kill()
            why = [line for line in d.lines if "SANDBOX_MICROVM_ACCEL=kvm" in line]
            self.assertTrue(why, d.lines)  # the daemon said why it would not start
            print("\nmicrovm KVM path skipped: " + why[0], file=sys.stderr)
            self.skipTest("KVM cannot boot a guest here: " + why[0])
        try:
            st, _, data, _ = d.call("Describe", {})
            self.assertEqual(json.loads(data)["evidence"]["runtime"], "qemu-microvm/kvm")
            st, _, data, _ = d.call("Run", js("console.log(6*7)"))
            self.assertEqual(out(json.loads(data)), b"42\n")
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
