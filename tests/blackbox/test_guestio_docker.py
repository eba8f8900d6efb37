"""The docker grant socket's privilege separation through the real daemon (issue 12, finding 8;
docs/privsep.md): while a granted run lives, the guest's HTTP is parsed by a plimsoll-guestio
helper process, a child of the daemon, which is confined (seccomp, no_new_privs, no capabilities,
its own uid when the daemon is root, an empty environment, no descriptor but its channel, the
guest connections and /dev/null: in particular not the Docker socket). Killing that helper while
the guest's call is inside the broker answers the guest 503, the run goes on and its next call
is served by a new helper, and the daemon keeps serving.

Needs what tests/blackbox/test_docker.py needs (dockerd and the images: scripts/docker-setup.sh).
A missing prerequisite is a FAILURE, never a skip. Standard library only.
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, Upstream, WireCase, descendants  # noqa: E402
from test_docker import BASE_ENV, prerequisites  # noqa: E402

CALLER_TOKEN = "alice-guestio-token-0123456789abcdef"
HELPER_UID = 61010  # GIO_HELPER_UID (src/guestio/guestio.h), when no plimsoll-guestio user exists


def setUpModule():
    missing = prerequisites()
    if missing:
        raise AssertionError("the guestio docker suite cannot run on this machine; missing:\n  - " +
                             "\n  - ".join(missing))


def out_of(body):
    j = body.get("javascript") or {}
    return (base64.b64decode(j.get("stdout", "")), base64.b64decode(j.get("stderr", "")))


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


class GuestioDocker(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp(prefix="plimsoll-guestio-docker-")
        clients = os.path.join(cls.tmp, "clients.json")
        grants = os.path.join(cls.tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": hashlib.sha256(CALLER_TOKEN.encode()).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*"],
                "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        env = {k: v for k, v in BASE_ENV.items() if k != "PLIMSOLL_INSECURE"}
        cls.rundir = os.path.join(cls.tmp, "run")
        os.mkdir(cls.rundir, 0o700)
        env.update({"PLIMSOLL_CLIENTS_FILE": clients, "PLIMSOLL_GRANTS_FILE": grants,
                    "ITEMS_TOKEN": "guestio-upstream-credential", "RUNTIME_DIRECTORY": cls.rundir})
        cls.d = Daemon(env, timeout=180)

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        cls.up.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert rc == 0, "\n".join(cls.d.lines[-30:])

    def snippet(self, code, timeout_ms=20000):
        msg = {"protocol": 3, "timeoutMs": timeout_ms, "javascript": {"code": code, "grantProfile": "items"}}
        st, _, data, _ = self.d.call("Run", msg, token=CALLER_TOKEN)
        body = json.loads(data)
        self.assertEqual(st, 200, body)
        return body

    def in_background(self, code):
        result = {}

        def run():
            try:
                result["body"] = self.snippet(code)
            except Exception as e:  # reported by the caller's assertions
                result["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, result

    def helpers(self, want=1, timeout=20):
        """The daemon's live guestio helpers (named plm-guestio), once there are `want`."""
        deadline = time.monotonic() + timeout
        while True:
            found = []
            for pid in descendants(self.d.proc.pid):
                try:
                    with open("/proc/%d/comm" % pid) as f:
                        if f.read().strip() == "plm-guestio":
                            found.append(pid)
                except OSError:
                    pass
            if len(found) >= want or time.monotonic() >= deadline:
                return found
            time.sleep(0.05)

    def test_helper_is_confined_and_holds_no_docker_socket(self):
        # The run waits 3 s before its call: the helper exists from before the container starts.
        t, result = self.in_background(
            "setTimeout(() => host.get('/v1/items/7').then(r => console.log('got', r.id)), 3000);")
        pids = self.helpers()
        self.assertEqual(len(pids), 1, pids)
        pid = pids[0]
        st = status(pid)
        self.assertEqual(st["Seccomp"], "2")
        self.assertEqual(st["NoNewPrivs"], "1")
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            self.assertEqual(int(st[cap], 16), 0, cap)
        self.assertEqual(int(st["PPid"]), self.d.proc.pid)
        if os.geteuid() == 0:
            self.assertEqual(st["Uid"].split(), [str(HELPER_UID)] * 4)
            self.assertEqual(st["Gid"].split(), [str(HELPER_UID)] * 4)
            self.assertEqual(st["Groups"], "")
            self.assertEqual(int(st["CapBnd"], 16), 0)
        fds = {}
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                fds[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                pass
        self.assertEqual([fds.get(i) for i in (0, 1, 2)], ["/dev/null"] * 3, fds)
        self.assertTrue(fds.get(3, "").startswith("socket:"), fds)
        self.assertTrue(all(v.startswith("socket:") for k, v in fds.items() if k > 2), fds)
        # nothing but sockets beyond 0-2: no file, no directory (the daemon's Docker socket
        # connections are the daemon's; the helper was exec'd with only its channel)
        self.assertFalse(any(v.startswith("/") and v != "/dev/null" for v in fds.values()), fds)
        with open("/proc/%d/environ" % pid, "rb") as f:
            self.assertEqual(f.read(), b"")
        t.join(40)
        self.assertNotIn("error", result)
        out, err = out_of(result["body"])
        self.assertEqual(out, b"got 7\n", (out, err))
        # the run is over: its helper was reaped with it
        deadline = time.monotonic() + 5
        while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(os.path.exists("/proc/%d" % pid))

    def test_helper_killed_mid_call(self):
        n0 = self.up.count()
        code = ("host.get('/v1/items/hang').then(r => console.log('unexpected', r.id),"
                " e => console.log('ERR', JSON.stringify(e.message)))"
                ".then(() => host.get('/v1/items/after'))"
                ".then(r => console.log('after', r.id), e => console.log('ERR2', e.message));")
        t, result = self.in_background(code)
        # the hanging call is inside the broker (it reached the upstream): the helper waits
        deadline = time.monotonic() + 30
        while not any(s["path"] == "/v1/items/hang" for s in self.up.since(n0)) and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = self.helpers()
        self.assertEqual(len(pids), 1, pids)
        t0 = time.monotonic()
        os.kill(pids[0], signal.SIGKILL)
        t.join(40)
        self.assertNotIn("error", result)
        out, err = out_of(result["body"])
        self.assertIn(b'ERR "host api 503: host api socket unavailable\\n"', out, (out, err))
        self.assertIn(b"after after\n", out, (out, err))  # a new helper served the run's next call
        self.assertNotIn(b"unexpected", out)
        self.assertLess(time.monotonic() - t0, 15)
        # the daemon carries on
        out, _ = out_of(self.snippet("host.get('/v1/items/later').then(r => console.log(r.id))"))
        self.assertEqual(out, b"later\n")
        self.assertEqual(self.d.proc.poll(), None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
