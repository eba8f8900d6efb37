"""Hostile-input hardening through the real daemon (issue 12, findings 1, 2, 3, 6, 7).

Each class attacks a running daemon as the issue's findings describe and checks that memory
stays bounded, that other callers keep being answered, and that malformed HTTP is refused.
Memory is read from /proc/<pid>/status (VmHWM, the peak resident set, and VmRSS).
"""
import base64
import concurrent.futures as cf
import hashlib
import json
import os
import signal
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


def memory_env(env):
    """For the suites that measure resident memory: under ASan (make check's second pass) a small
    quarantine, or the 256 MiB of freed blocks ASan keeps by default would be counted as ours.
    The release pass runs without ASAN_OPTIONS and measures the real allocator."""
    if "ASAN_OPTIONS" in os.environ:
        env = dict(env, ASAN_OPTIONS=os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=8:thread_local_quarantine_size_kb=64")
    return env


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
        cls.d = Daemon(memory_env({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                                   "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_RATE_PER_MIN": "0"}))

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

    def test_sixteen_8_mib_strings_stay_under_512_mib(self):
        # the costliest shape per byte left after the count limits: one long string, which the
        # body, jansson's tree and the decoded message each hold once (3 x the body)
        body = b'{"protocol":3,"javascript":{"code":"' + b"a" * (8 * MIB - 100) + b'"}}'
        with Daemon(memory_env({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": self.clients,
                                "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_RATE_PER_MIN": "0"})) as d:
            with cf.ThreadPoolExecutor(16) as ex:
                res = list(ex.map(lambda i: post_raw(d.port, PROC + "Run", body, token(CALLERS[i % 4]),
                                                     "application/json"), range(16)))
            hwm_kib = status_kib(d.proc.pid, "VmHWM")
            print("16 x 8 MiB strings: VmHWM %d MiB" % (hwm_kib // 1024), file=sys.stderr)
            self.assertLess(hwm_kib, 512 * 1024)
            for st, data in res:
                self.assertEqual(st, 400, data[:200])
                self.assertIn("javascript code is", json.loads(data)["message"])

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
        # refused while decoding, answered as payload validation is: invalid_argument, `request`
        body = self.assertRefused(self.d.call("Run", req, token=token("alice")), "invalid_argument", "request", 400)
        self.assertIn("more than 200 elements", body["message"])


class Tricklers:
    """Many raw connections, each sending its head (or part of it) and then one byte every
    `every` seconds from one thread. Records when the daemon closed each one (EOF, reset or an
    answer), relative to when the connection was opened."""

    def __init__(self, port, heads, every, sources=("127.0.0.2",), complete_head=True):
        self.socks, self.opened, self.closed, self.answers = [], [], {}, {}
        self.every = every
        self.stop = threading.Event()
        for i, head in enumerate(heads):
            s = socket.socket()
            s.bind((sources[i % len(sources)], 0))
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            data = head if complete_head else head[:5]
            try:
                s.send(data)
            except OSError:
                pass
            self.socks.append((s, head[5:] if not complete_head else b"x" * 100000))
            self.opened.append(time.monotonic())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _poll_closed(self, i, s):
        try:
            data = s.recv(4096)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if data:
            self.answers[i] = data
        self.closed[i] = time.monotonic() - self.opened[i]
        return True

    def _run(self):
        pos = [0] * len(self.socks)
        while not self.stop.is_set():
            for i, (s, rest) in enumerate(self.socks):
                if i in self.closed:
                    continue
                if self._poll_closed(i, s):
                    continue
                if pos[i] < len(rest):
                    try:
                        s.send(rest[pos[i]:pos[i] + 1])
                        pos[i] += 1
                    except OSError:
                        self.closed[i] = time.monotonic() - self.opened[i]
            # check often, send every `every` seconds
            t_end = time.monotonic() + self.every
            while time.monotonic() < t_end and not self.stop.is_set():
                for i, (s, _) in enumerate(self.socks):
                    if i not in self.closed:
                        self._poll_closed(i, s)
                time.sleep(0.05)

    def close(self):
        self.stop.set()
        self.thread.join(10)
        for s, _ in self.socks:
            s.close()


def run_head(tok, length=1000):
    return ("POST %sRun HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (PROC, tok, length)).encode()


class Trickling(WireCase):
    """Findings 2 and 3: slow bodies and slow heads; the done-when of 200 trickling connections."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        write_clients(cls.clients)
        # 4 runs at once, so 8 decode slots, at most 4 of them one caller's
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                        "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_PER_KEY_CONCURRENT": "2",
                        "SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def timed_run(self, who):
        t0 = time.monotonic()
        st, _, data, _ = self.d.call("Run", js("console.log(1)"), token=token(who))
        return st, data, time.monotonic() - t0

    def test_slow_bodies_hold_neither_every_slot_nor_past_30s(self):
        # 8 connections with valid heads whose bodies trickle a byte every 2 s (finding 2)
        t = Tricklers(self.d.port, [run_head(token("dave"))] * 8, every=2.0)
        try:
            time.sleep(1.0)
            st, data, secs = self.timed_run("alice")
            self.assertEqual(st, 200, data)
            self.assertLess(secs, 1.0)
            # the ones over dave's share were shed at once, with capacity
            shed = [i for i, a in t.answers.items() if b" 429 " in a.split(b"\r\n")[0]]
            self.assertGreaterEqual(len(shed), 4, t.answers)
            # the rest are closed when 30 s of body reading have passed, not later
            deadline = time.monotonic() + 40
            while len(t.closed) < 8 and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertEqual(len(t.closed), 8, t.closed)
            held = sorted(v for i, v in t.closed.items() if i not in shed)
            self.assertTrue(held, t.closed)
            self.assertGreater(held[0], 25)
            self.assertLess(held[-1], 34)
        finally:
            t.close()

    def test_slow_head_is_closed_after_5s(self):
        # finding 3: a head trickled a byte every 0.5 s, never finished
        t = Tricklers(self.d.port, [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200], every=0.5,
                      complete_head=False)
        try:
            deadline = time.monotonic() + 9
            while not t.closed and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertIn(0, t.closed, "the trickling head is still open after 9 s")
            self.assertLess(t.closed[0], 7.0)
            self.assertGreater(t.closed[0], 4.0)
            self.assertIn(b" 408 ", t.answers.get(0, b" 408 "))
        finally:
            t.close()

    def test_200_tricklers_healthz_and_run_answer_within_1s(self):
        # 196 heads that never finish, 4 bodies holding erin's decode slots (46 more shed): 200 open
        heads = [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100] * 196
        slow_heads = Tricklers(self.d.port, heads, every=0.5, complete_head=False,
                               sources=("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.6"))
        slow_bodies = Tricklers(self.d.port, [run_head(token("erin"))] * 50, every=0.5, sources=("127.0.0.5",))
        try:
            time.sleep(0.5)
            open_now = 246 - len(slow_heads.closed) - len(slow_bodies.closed)
            print("trickling connections open: %d (heads %d, bodies %d)"
                  % (open_now, 196 - len(slow_heads.closed), 50 - len(slow_bodies.closed)), file=sys.stderr)
            self.assertEqual(len(slow_heads.closed), 0)
            self.assertGreaterEqual(open_now, 200)
            for _ in range(3):
                t0 = time.monotonic()
                st, _, body = self.d.request("GET", "/healthz", timeout=5)
                self.assertEqual((st, body), (200, b"ok\n"))
                self.assertLess(time.monotonic() - t0, 1.0)
                st, data, secs = self.timed_run("alice")
                self.assertEqual(st, 200, data)
                self.assertLess(secs, 1.0)
                print("with tricklers: /healthz %.3f s, Run %.3f s" % (time.monotonic() - t0 - secs, secs),
                      file=sys.stderr)
                time.sleep(0.5)
        finally:
            slow_heads.close()
            slow_bodies.close()


def one_answer_done(out):
    """True once out holds a whole answer (head and Content-Length body): a kept-alive
    connection stays open after it, so the reader must not wait for the close."""
    end = out.find(b"\r\n\r\n")
    if end < 0:
        return False
    length = 0
    for line in out[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return len(out) >= end + 4 + length


def raw_exchange(port, data, timeout=10, sock=None):
    """Sends data as is (on a fresh connection, or sock); returns what the daemon answers: one
    whole answer, or everything until it closes (b"" if it closed without answering)."""
    s = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        out = b""
        try:
            while not one_answer_done(out):
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass
        return out
    finally:
        if sock is None:
            s.close()


def status_of(answer):
    line = answer.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) >= 2 and line[1].isdigit() else None


def read_to_close(s):
    """Everything the daemon sends on s until it closes the connection."""
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


class OneQuickjsDaemon(WireCase):
    """One quickjs daemon with the five callers' clients file, for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        write_clients(cls.clients)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                        "SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0


class Strictness(OneQuickjsDaemon):
    """Finding 6: HTTP parsing quirks are refused before libmicrohttpd sees the request."""

    def run_request(self, head_lines, body=b"", path=PROC + "Run", eol=b"\r\n"):
        head = eol.join([("POST %s HTTP/1.1" % path).encode()] + head_lines) + eol + eol
        return raw_exchange(self.d.port, head + body)

    def good_lines(self, body, who="alice"):
        return [b"Host: x", b"Content-Type: application/json", ("Authorization: Bearer " + token(who)).encode(),
                b"Content-Length: %d" % len(body)]

    def test_well_formed_request_is_served(self):
        body = json.dumps(js("console.log(1)")).encode()
        ans = self.run_request(self.good_lines(body), body)
        self.assertEqual(status_of(ans), 200, ans[:300])

    def test_duplicate_content_length(self):
        body = json.dumps(js("console.log(1)")).encode()
        for second in (len(body), 5):  # equal, then conflicting
            lines = self.good_lines(body) + [b"Content-Length: %d" % second]
            ans = self.run_request(lines, body)
            self.assertEqual(status_of(ans), 400, ans[:300])
            self.assertIn(b"more than one Content-Length", ans)

    def test_content_length_with_transfer_encoding(self):
        body = json.dumps(js("console.log(1)")).encode()
        ans = self.run_request(self.good_lines(body) + [b"Transfer-Encoding: chunked"], body)
        self.assertEqual(status_of(ans), 400, ans[:300])

    def test_nul_in_a_header_value(self):
        body = json.dumps(js("console.log(1)")).encode()
        lines = [b"Host: x", b"Content-Type: application/json",
                 ("Authorization: Bearer %s\0Bearer %s" % (token("alice"), token("bob"))).encode(),
                 b"Content-Length: %d" % len(body)]
        ans = self.run_request(lines, body)
        self.assertEqual(status_of(ans), 400, ans[:300])
        self.assertIn(b"NUL", ans)

    def test_bare_lf_and_bare_cr(self):
        body = json.dumps(js("console.log(1)")).encode()
        ans = self.run_request(self.good_lines(body), body, eol=b"\n")
        self.assertEqual(status_of(ans), 400, ans[:300])
        self.assertIn(b"bare LF", ans)
        lines = self.good_lines(body)
        lines[0] = b"Host: x\rX-Evil: 1"
        ans = self.run_request(lines, body)
        self.assertEqual(status_of(ans), 400, ans[:300])
        self.assertIn(b"bare CR", ans)

    def test_obsolete_line_folding(self):
        body = json.dumps(js("console.log(1)")).encode()
        lines = self.good_lines(body) + [b" folded"]
        ans = self.run_request(lines, body)
        self.assertEqual(status_of(ans), 400, ans[:300])

    def test_percent_encoded_procedure_path(self):
        body = json.dumps(js("console.log(1)")).encode()
        ans = self.run_request(self.good_lines(body), body, path=PROC + "%52un")
        self.assertEqual(status_of(ans), 400, ans[:300])
        self.assertIn(b"percent-encoded", ans)
        ans = raw_exchange(self.d.port, b"GET /%68ealthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(status_of(ans), 400, ans[:300])

    def test_header_limit_is_32_kib(self):
        body = json.dumps(js("console.log(1)")).encode()
        base = b"\r\n".join([b"POST %sRun HTTP/1.1" % PROC.encode()] + self.good_lines(body)) + b"\r\n"
        # a head of exactly 32 KiB (final empty line included) is served ...
        pad = 32 * 1024 - len(base) - len(b"X-Pad: \r\n\r\n")
        ans = raw_exchange(self.d.port, base + b"X-Pad: " + b"a" * pad + b"\r\n\r\n" + body)
        self.assertEqual(status_of(ans), 200, ans[:300])
        # ... one byte more is not, and neither is a 40 KiB one
        for extra in (1, 8 * 1024):
            ans = raw_exchange(self.d.port, base + b"X-Pad: " + b"a" * (pad + extra) + b"\r\n\r\n" + body)
            self.assertEqual(status_of(ans), 431, ans[:300])


class KeepAlive(OneQuickjsDaemon):
    """The relaying gate: a kept-alive connection carries many requests and EVERY head on it is
    checked before libmicrohttpd sees it (not only the first)."""

    def run_bytes(self, code="console.log(1)", extra=b""):
        body = json.dumps(js(code)).encode()
        return (b"POST %sRun HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\n"
                b"%sContent-Length: %d\r\n\r\n" % (PROC.encode(), token("alice").encode(), extra, len(body))) + body

    def test_many_requests_on_one_connection(self):
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as s:
            for i in range(20):
                ans = raw_exchange(self.d.port, self.run_bytes("console.log(%d)" % i), sock=s)
                self.assertEqual(status_of(ans), 200, ans[:300])
                self.assertIn(b'"stdout":"%s"' % base64.b64encode(b"%d\n" % i), ans)
                self.assertNotIn(b"connection: close", ans.lower())
                ans = raw_exchange(self.d.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", sock=s)
                self.assertEqual(status_of(ans), 200, ans[:300])
            # idle past the parking time (its MHD connection given back), then one more
            time.sleep(1.5)
            ans = raw_exchange(self.d.port, self.run_bytes("console.log(99)"), sock=s)
            self.assertEqual(status_of(ans), 200, ans[:300])

    def test_every_head_is_checked_not_only_the_first(self):
        bad = [(b"GET /%68ealthz HTTP/1.1\r\nHost: x\r\n\r\n", b"percent-encoded"),
               (self.run_bytes(extra=b"Content-Length: 5\r\n"), b"more than one Content-Length"),
               (b"GET /healthz HTTP/1.1\nHost: x\n\n", b"bare LF"),
               (b"GET /healthz HTTP/1.1\r\nX: a\0b\r\n\r\n", b"NUL")]
        for second, why in bad:
            with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as s:
                ans = raw_exchange(self.d.port, self.run_bytes(), sock=s)
                self.assertEqual(status_of(ans), 200, ans[:300])
                ans = raw_exchange(self.d.port, second, sock=s)
                self.assertEqual(status_of(ans), 400, ans[:300])
                self.assertIn(why, ans)
                self.assertEqual(s.recv(100), b"")  # and the connection is closed

    def test_pipelined_smuggling_is_refused(self):
        # a body longer than its Content-Length carries a second head: it is checked as a head
        first = self.run_bytes()
        ans = raw_exchange(self.d.port, first + b"GET /%68ealthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout=10)
        self.assertEqual(status_of(ans), 200, ans[:300])
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as s:
            s.sendall(first + b"GET /%68ealthz HTTP/1.1\r\nHost: x\r\n\r\n")
            out = read_to_close(s)
            self.assertEqual(out.count(b"HTTP/1.1 "), 2, out[:600])
            self.assertIn(b"HTTP/1.1 400 ", out)
            self.assertIn(b"percent-encoded", out)

    def test_chunked_body_is_refused_411(self):
        ans = raw_exchange(self.d.port, b"POST %sRun HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"2\r\n{}\r\n0\r\n\r\n" % PROC.encode())
        self.assertEqual(status_of(ans), 411, ans[:300])

    def test_second_head_deadline_and_idle_parking(self):
        # after one answer, a trickled second head is held to 5 s from its first byte
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=20) as s:
            ans = raw_exchange(self.d.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", sock=s)
            self.assertEqual(status_of(ans), 200)
            time.sleep(2.0)  # idle (parked) is not the head's time
            t0 = time.monotonic()
            s.sendall(b"GET /healthz HTTP/1.1\r\n")
            out = read_to_close(s)
            secs = time.monotonic() - t0
            self.assertEqual(status_of(out), 408, out)
            self.assertGreater(secs, 4.0)
            self.assertLess(secs, 7.0)


class KeepAliveDrain(WireCase):
    def test_sigterm_finishes_the_answer_in_flight_and_closes_idle_connections(self):
        tmp = tempfile.mkdtemp()
        clients = os.path.join(tmp, "clients.json")
        write_clients(clients)
        d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": clients, "SANDBOX_RATE_PER_MIN": "0"})
        idle = socket.create_connection(("127.0.0.1", d.port), timeout=20)
        busy = socket.create_connection(("127.0.0.1", d.port), timeout=20)
        try:
            ans = raw_exchange(d.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", sock=idle)
            self.assertEqual(status_of(ans), 200)
            body = json.dumps(js("const t = Date.now(); while (Date.now() - t < 1500) {} console.log(7)")).encode()
            busy.sendall(b"POST %sRun HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
                         % (PROC.encode(), token("alice").encode(), len(body), body))
            time.sleep(0.5)
            d.proc.send_signal(signal.SIGTERM)
            self.assertEqual(read_to_close(idle), b"")  # idle: closed without a word
            out = read_to_close(busy)  # in flight: its answer, then the close
            self.assertEqual(status_of(out), 200, out[:300])
            self.assertIn(b'"stdout":"Nwo="', out)
            self.assertEqual(d.wait_exit(30), 0)
        finally:
            idle.close()
            busy.close()
            if d.proc.poll() is None:
                d.kill()


class Metrics(WireCase):
    """Finding 7: /metrics names every grant profile and every caller's counts: it needs the
    metrics scope, and a few idle connections must not starve it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        write_clients(cls.clients, extra=[{"id": "prom", "token_sha256": hashlib.sha256(b"prom-tok").hexdigest(),
                                           "scopes": ["metrics"]}])
        cls.grants = os.path.join(cls.tmp, "grants.json")
        with open(cls.grants, "w") as f:
            json.dump({"profiles": {"secret-profile-name": {
                "base_url": "http://127.0.0.1:9", "allow": ["GET /v1/*"], "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                        "PLIMSOLL_GRANTS_FILE": cls.grants, "ITEMS_TOKEN": "t" * 40,
                        "SANDBOX_RATE_PER_MIN": "0"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def scrape(self, tok=None):
        headers = {"Authorization": "Bearer " + tok} if tok else {}
        return self.d.request("GET", "/metrics", port=self.d.metrics_port, headers=headers, timeout=5)

    def test_scrape_needs_the_metrics_scope(self):
        st, _, data = self.scrape()
        self.assertEqual(st, 401, data)
        self.assertNotIn(b"secret-profile-name", data)
        st, _, data = self.scrape(token("alice"))  # code:run only
        self.assertEqual(st, 403, data)
        self.assertNotIn(b"secret-profile-name", data)
        st, _, data = self.scrape("prom-tok")
        self.assertEqual(st, 200, data)
        self.assertIn(b'profile="secret-profile-name"', data)

    def test_idle_connections_do_not_starve_it(self):
        idle = []
        try:
            for i in range(40):
                s = socket.socket()
                s.bind(("127.0.0.%d" % (2 + i % 8), 0))
                s.connect(("127.0.0.1", self.d.metrics_port))
                idle.append(s)
            time.sleep(0.3)
            for _ in range(3):
                t0 = time.monotonic()
                st, _, data = self.scrape("prom-tok")
                self.assertEqual(st, 200, data)
                self.assertLess(time.monotonic() - t0, 1.0)
        finally:
            for s in idle:
                s.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
