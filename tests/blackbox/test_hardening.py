"""Hostile-input hardening through the real daemon (issue 12, findings 1, 2, 3, 6, 7).

Each class attacks a running daemon as the issue's findings describe and checks that memory
stays bounded, that other callers keep being answered, and that malformed HTTP is refused.
Memory is read from /proc/<pid>/status (VmHWM, the peak resident set, and VmRSS).
"""
import concurrent.futures as cf
import hashlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import PROC, Daemon, WireCase, js  # noqa: E402

MIB = 1024 * 1024
CALLERS = ["alice", "bob", "carol", "dave", "erin"]


def token(name):
    return name + "-token-0123456789abcdef0123456789"


def write_clients(path, extra=()):
    clients = [{"id": c, "token_sha256": hashlib.sha256(token(c).encode()).hexdigest(), "scopes": ["code:run"]}
               for c in CALLERS]
    clients += list(extra)
    with open(path, "w") as f:
        json.dump({"clients": clients}, f)


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def hostile_json(size=8 * MIB - 64):
    """{"protocol":3,"project":{"files":[{},{},...]}} just under 8 MiB."""
    head, tail = b'{"protocol":3,"project":{"files":[', b"{}]}}"
    n = (size - len(head) - len(tail)) // 3
    return head + b"{}," * n + tail


def hostile_binary(size=8 * MIB - 64):
    """RunRequest{protocol: 3, project: ProjectRun{files: [{}, {}, ...]}} as 0a 00 repeated."""
    n = (size - 16) // 2
    inner = b"\x0a\x00" * n
    return b"\x08\x03" + b"\x5a" + varint(len(inner)) + inner


def post_raw(port, path, body, tok, ctype, timeout=120):
    """One POST on its own connection; returns (status, body bytes)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": ctype, "Authorization": "Bearer " + tok,
                                                       "Connect-Protocol-Version": "1"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


class HostileBodies(WireCase):
    """Finding 1: 16 concurrent 8 MiB bodies of empty elements, JSON and binary."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        write_clients(cls.clients)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                        "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def test_sixteen_hostile_bodies_stay_under_512_mib(self):
        pid = self.d.proc.pid
        bodies = [(hostile_json(), "application/json"), (hostile_binary(), "application/proto")]
        base_kib = status_kib(pid, "VmRSS")
        peak = [status_kib(pid, "VmHWM")]
        done = threading.Event()

        def sample():
            while not done.is_set():
                try:
                    peak.append(status_kib(pid, "VmRSS"))
                except OSError:
                    return
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        answers = []
        health = []
        with cf.ThreadPoolExecutor(16) as ex:
            futs = [ex.submit(post_raw, self.d.port, PROC + "Run", bodies[i % 2][0],
                              token(CALLERS[i % 4]), bodies[i % 2][1]) for i in range(16)]
            # the daemon keeps answering while the bodies arrive and decode
            for _ in range(5):
                t0 = time.monotonic()
                st, _, data = self.d.request("GET", "/healthz", timeout=10)
                health.append((st, time.monotonic() - t0))
                time.sleep(0.1)
            for f in futs:
                answers.append(f.result())
        done.set()
        sampler.join(2)
        hwm_kib = status_kib(pid, "VmHWM")
        print("hostile bodies: RSS before %d MiB, peak sampled %d MiB, VmHWM %d MiB, after %d MiB"
              % (base_kib // 1024, max(peak) // 1024, hwm_kib // 1024, status_kib(pid, "VmRSS") // 1024),
              file=sys.stderr)
        self.assertLess(hwm_kib, 512 * 1024)
        self.assertTrue(all(st == 200 for st, _ in health), health)
        for st, data in answers:
            self.assertEqual(st, 400, data[:300])
            body = json.loads(data)
            self.assertEqual(body["code"], "invalid_argument")
            self.assertIn("more than 200 elements", body["message"])
        # it keeps answering: a real run right after
        st, _, data, _ = self.d.call("Run", js("console.log(6*7)"), token=token("erin"))
        self.assertEqual(st, 200, data)

    def test_unknown_keys_and_top_level_array_are_bounded(self):
        n = (8 * MIB - 100) // 7
        for body in (b'{"protocol":3,"x":[' + b'[],' * n + b'[]]}', b"[" + b"{}," * n + b"{}]",
                     b'{"protocol":3' + b"".join(b',"k%06d":1' % i for i in range(200000)) + b"}"):
            st, data = post_raw(self.d.port, PROC + "Run", body, token("alice"), "application/json")
            self.assertEqual(st, 400, data[:200])
            self.assertIn("more than 1024 values", json.loads(data)["message"])

    def test_binary_unknown_fields_and_duplicates_are_bounded(self):
        unknown = b"\x08\x03" + b"\xf8\x01\x00" * 100000  # field 31, varint 0, repeated
        st, data = post_raw(self.d.port, PROC + "Run", unknown, token("alice"), "application/proto")
        self.assertEqual(st, 400)
        self.assertIn("unknown fields", json.loads(data)["message"])
        twice = b"\x08\x03" * 100000
        st, data = post_raw(self.d.port, PROC + "Run", twice, token("alice"), "application/proto")
        self.assertEqual(st, 400)
        self.assertIn("given twice", json.loads(data)["message"])

    def test_legitimate_limits_still_decode(self):
        files = [{"path": "f%d.js" % i, "content": "x"} for i in range(200)]
        req = {"protocol": 3, "project": {"files": files, "steps": ["node f0.js"]}}
        st, _, data, _ = self.d.call("Run", req, token=token("alice"))
        body = json.loads(data)
        # quickjs runs no projects: refused as unsupported, i.e. decoded and validated first
        self.assertEqual(body["code"], "unimplemented", body)
        req["project"]["files"].append({"path": "one-more.js", "content": "x"})
        st, _, data, _ = self.d.call("Run", req, token=token("alice"))
        self.assertEqual(st, 400)
        self.assertIn("more than 200 elements", json.loads(data)["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
