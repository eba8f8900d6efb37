"""Request smuggling, the Host check and the loop thread (issue 22), against the real daemon.

One HTTP parser reads every request (src/server/gate.h); these attacks try to make it and a
client disagree on where a request ends, or to slip a request past a refusal. For each one the
suite checks the answers on the wire (how many, in what order, which status) and that no run
the attacker hid was executed: every run the daemon handles writes one audit line (`run`).
The open-mode daemon also carries the Host check (DNS rebinding) and the cross-site refusal.
"""
import concurrent.futures as cf
import json
import os
import re
import socket
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import PROC, Daemon, WireCase, js  # noqa: E402

TOKEN = "smuggling-token-0123456789abcdef0123456789"


def run_request(code="console.log(1)", rid="a" * 32, host=b"127.0.0.1", extra=b"", token=None, body=None):
    body = json.dumps(js(code)).encode() if body is None else body
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    return (b"POST %sRun HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nPlimsoll-Request-Id: %s\r\n"
            b"%s%sContent-Length: %d\r\n\r\n" % (PROC.encode(), host, rid.encode(), auth, extra, len(body))) + body


def exchange(port, data, timeout=15):
    """Sends data; returns everything the daemon writes until it closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return read_until_quiet(s)


def read_until_quiet(s, quiet=1.5):
    out = b""
    s.settimeout(quiet)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except socket.timeout:
        return out


def statuses(out):
    return [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", out)]


def request_ids(out):
    return [m.decode() for m in re.findall(rb"Plimsoll-Request-Id: ([0-9a-f]{32})", out)]


class OpenDaemon(WireCase):
    """quickjs in open mode (PLIMSOLL_INSECURE=1): the Host check is on."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
                        "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_PER_KEY_CONCURRENT": "8", "PLIMSOLL_UI": "1"})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def runs(self):
        time.sleep(0.3)  # audit lines are read on a thread
        return len(self.d.events("run"))

    def assert_closed_after(self, out, n):
        """Exactly n answers, the last one closing the connection."""
        self.assertEqual(len(statuses(out)), n, out[:800])
        self.assertIn(b"connection: close", out.lower())


class Smuggling(OpenDaemon):
    def test_cl_plus_te(self):
        hidden = run_request("console.log('smuggled')", rid="b" * 32)
        for te in (b"chunked", b"identity"):
            body = b"0\r\n\r\n" + hidden
            data = (b"POST %sRun HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nTransfer-Encoding: %s\r\n\r\n" % (PROC.encode(), len(body), te)) + body
            n0 = self.runs()
            out = exchange(self.d.port, data)
            self.assertEqual(statuses(out), [400], out[:600])
            self.assert_closed_after(out, 1)
            self.assertEqual(self.runs(), n0, "a smuggled run was executed")

    def test_transfer_encoding_variants(self):
        hidden = run_request("console.log('smuggled')", rid="c" * 32)
        variants = [b"Transfer-Encoding: chunked", b"Transfer-Encoding: Chunked", b"Transfer-Encoding:\tchunked",
                    b"Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: chunked, identity",
                    b"Transfer-Encoding: xchunked", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
                    b"Transfer-Encoding : chunked", b"Transfer-Encoding: \"chunked\"", b"Transfer-Encoding: identity"]
        for te in variants:
            data = (b"POST %sRun HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n\r\n"
                    % (PROC.encode(), te)) + b"0\r\n\r\n" + hidden
            n0 = self.runs()
            out = exchange(self.d.port, data)
            st = statuses(out)
            self.assertEqual(len(st), 1, (te, out[:600]))
            self.assertIn(st[0], (400, 411), (te, out[:600]))
            self.assert_closed_after(out, 1)
            self.assertEqual(self.runs(), n0, te)

    def test_obsolete_line_folding(self):
        for fold in (b"X-A: a\r\n Transfer-Encoding: chunked", b"X-A: a\r\n\tContent-Length: 0",
                     b"Content-Length:\r\n 5"):
            data = (b"POST %sRun HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n\r\n{}"
                    % (PROC.encode(), fold)) + run_request(rid="d" * 32)
            n0 = self.runs()
            out = exchange(self.d.port, data)
            self.assertEqual(statuses(out), [400], (fold, out[:600]))
            self.assert_closed_after(out, 1)
            self.assertEqual(self.runs(), n0)

    def test_pipelined_requests_are_answered_in_order(self):
        rids = ["%032x" % (0xe000 + i) for i in range(5)]
        data = b"".join(run_request("console.log(%d)" % i, rid=r) for i, r in enumerate(rids))
        data += b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        out = exchange(self.d.port, data)
        self.assertEqual(statuses(out), [200] * 6, out[:800])
        self.assertEqual(request_ids(out), rids)  # each answer echoes its own request, in order

    def test_hidden_request_in_a_body_is_a_body(self):
        # the declared length covers a whole request: it is the body (malformed JSON), never run
        hidden = run_request("console.log('smuggled')", rid="f" * 32)
        n0 = self.runs()
        out = exchange(self.d.port, run_request(body=hidden, rid="1" * 32) + b"GET /healthz HTTP/1.1\r\n"
                       b"Host: 127.0.0.1\r\n\r\n")
        self.assertEqual(statuses(out), [400, 200], out[:800])
        self.assertEqual(request_ids(out), ["1" * 32])
        self.assertEqual(self.runs(), n0)

    def test_bytes_past_the_length_are_the_next_head(self):
        # a body longer than its Content-Length: the rest is parsed as a head, strictly
        body = json.dumps(js("console.log(1)")).encode()
        data = run_request(body=body, rid="2" * 32)[:-len(body)] + body + b"GET /%68ealthz HTTP/1.1\r\n\r\n"
        out = exchange(self.d.port, data)
        self.assertEqual(statuses(out), [200, 400], out[:800])
        self.assertIn(b"percent-encoded", out)

    def test_nothing_after_a_malformed_head_is_read(self):
        n0 = self.runs()
        out = exchange(self.d.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n" +
                       run_request(rid="3" * 32))
        self.assertEqual(statuses(out), [400], out[:600])
        self.assert_closed_after(out, 1)
        self.assertEqual(self.runs(), n0)

    def test_a_refused_requests_body_is_dropped_not_parsed(self):
        # refused before its body (cross-site, a wrong content type, a bad Host): the body is read
        # and thrown away on a kept connection; a request inside it never runs
        hidden = run_request("console.log('smuggled')", rid="4" * 32)
        for extra, host, want in ((b"Sec-Fetch-Site: cross-site\r\n", b"127.0.0.1", 403),
                                  (b"", b"attacker.example", 421)):
            n0 = self.runs()
            data = run_request(body=hidden, rid="5" * 32, host=host, extra=extra)
            data += b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            out = exchange(self.d.port, data)
            self.assertEqual(statuses(out), [want, 200], out[:800])
            self.assertEqual(self.runs(), n0)
        data = run_request(rid="6" * 32).replace(b"application/json", b"text/plain", 1)
        out = exchange(self.d.port, data + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.assertEqual(statuses(out), [415, 200], out[:800])

    def test_request_after_an_oversized_length_is_not_read(self):
        data = (b"POST %sRun HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 99999999\r\n\r\n" % PROC.encode()) + run_request(rid="7" * 32)
        n0 = self.runs()
        out = exchange(self.d.port, data)
        self.assertEqual(statuses(out), [400], out[:600])
        self.assert_closed_after(out, 1)
        self.assertEqual(self.runs(), n0)

    def test_expect(self):
        body = json.dumps(js("console.log(1)")).encode()
        head = run_request(body=body, rid="8" * 32, extra=b"Expect: 100-continue\r\n")[:-len(body)]
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=15) as s:
            s.sendall(head)
            first = s.recv(100)
            self.assertEqual(first, b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(body)
            out = read_until_quiet(s)
            self.assertEqual(statuses(out), [200], out[:600])
        # an expectation we do not know: 417 and close, the body never read as a request
        out = exchange(self.d.port, run_request(body=run_request(rid="9" * 32), extra=b"Expect: 200-ok\r\n"))
        self.assertEqual(statuses(out), [417], out[:600])
        self.assert_closed_after(out, 1)
        # refused before the body with 100-continue: no 100, the final answer, and close (the
        # client may or may not send the body now, so nothing after it can be framed)
        head = run_request(rid="a1" * 16, host=b"attacker.example", extra=b"Expect: 100-continue\r\n")
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=15) as s:
            s.sendall(head[:head.index(b"\r\n\r\n") + 4])
            out = read_until_quiet(s)
        self.assertEqual(statuses(out), [421], out[:600])
        self.assertIn(b"connection: close", out.lower())

    def test_http10_closes_unless_asked(self):
        h10 = b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
        out = exchange(self.d.port, h10 + h10)
        self.assertEqual(statuses(out), [200], out[:600])
        out = exchange(self.d.port, b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"
                       b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual(statuses(out), [200, 200], out[:600])

    def test_a_body_on_a_path_without_one_is_not_buffered(self):
        for path, first in ((b"/readyz", 400), (b"/ui", 400), (b"/healthz", 200)):
            out = exchange(self.d.port, b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello"
                           b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path)
            self.assertEqual(statuses(out), [first, 200], (path, out[:600]))

    def test_host_must_appear_once(self):
        for hosts in (b"", b"Host: 127.0.0.1\r\nHost: 127.0.0.1\r\n"):
            out = exchange(self.d.port, b"GET /healthz HTTP/1.1\r\n%s\r\n" % hosts)
            self.assertEqual(statuses(out), [400], out[:600])


class HostCheck(OpenDaemon):
    def test_rebinding_host_gets_421_and_nothing_runs(self):
        n0 = self.runs()
        for host in (b"attacker.example", b"attacker.example:%d" % self.d.port, b"localhost.attacker.example",
                     b"127.0.0.1.nip.io"):
            out = exchange(self.d.port, run_request("console.log('rebound')", host=host, rid="b1" * 16))
            self.assertEqual(statuses(out), [421], (host, out[:600]))
            self.assertIn(b"Plimsoll-Not-Dispatched: request", out)
        self.assertEqual(self.runs(), n0)
        # Describe, the UI and health answers alike
        for path in (b"/ui", b"/", b"/ui/verdict?floor=vm", b"/healthz"):
            out = exchange(self.d.port, b"GET %s HTTP/1.1\r\nHost: attacker.example\r\n\r\n" % path)
            self.assertEqual(statuses(out), [421], (path, out[:600]))

    def test_own_names_are_served(self):
        for host in (b"127.0.0.1", b"127.0.0.1:%d" % self.d.port, b"localhost", b"LOCALHOST:1", b"[::1]:8746"):
            out = exchange(self.d.port, run_request("console.log(7)", host=host, rid="b2" * 16))
            self.assertEqual(statuses(out), [200], (host, out[:600]))

    def test_cross_site_fetch_is_refused(self):
        n0 = self.runs()
        out = exchange(self.d.port, run_request(extra=b"Sec-Fetch-Site: cross-site\r\n", rid="b3" * 16))
        self.assertEqual(statuses(out), [403], out[:600])
        self.assertIn(b"Plimsoll-Not-Dispatched: request", out)
        self.assertEqual(self.runs(), n0)
        for site in (b"same-origin", b"none"):
            out = exchange(self.d.port, run_request(extra=b"Sec-Fetch-Site: %s\r\n" % site, rid="b4" * 16))
            self.assertEqual(statuses(out), [200], out[:600])


class HostCheckWithToken(unittest.TestCase):
    def test_off_with_a_token(self):
        with Daemon({"PLIMSOLL_TOKEN": TOKEN}) as d:
            out = exchange(d.port, b"POST %sDescribe HTTP/1.1\r\nHost: attacker.example\r\nAuthorization: Bearer %s"
                           b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                           % (PROC.encode(), TOKEN.encode()))
            self.assertEqual(statuses(out), [200], out[:600])

    def test_on_with_a_token_and_allowed_hosts(self):
        with Daemon({"PLIMSOLL_TOKEN": TOKEN, "PLIMSOLL_ALLOWED_HOSTS": "sandbox.internal"}) as d:
            def describe(host):
                return exchange(d.port, b"POST %sDescribe HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                                b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                                % (PROC.encode(), host, TOKEN.encode()))
            self.assertEqual(statuses(describe(b"attacker.example")), [421])
            self.assertEqual(statuses(describe(b"sandbox.internal:8746")), [200])
            self.assertEqual(statuses(describe(b"localhost")), [200])

    def test_metrics_listener_checks_host_too(self):
        with Daemon({"PLIMSOLL_INSECURE": "1"}) as d:
            out = exchange(d.metrics_port, b"GET /metrics HTTP/1.1\r\nHost: attacker.example\r\n\r\n")
            self.assertEqual(statuses(out), [421], out[:600])
            out = exchange(d.metrics_port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            self.assertEqual(statuses(out), [200], out[:600])


class LoopNeverWaits(OpenDaemon):
    """Issue 22 item 3: runs that take seconds hold worker threads, never the loop: Describe, a
    refusal below the floor and /healthz are answered while every one of them is still running
    (an order, not a time: each answer is checked to come back before any slow run ended)."""

    def test_slow_runs_do_not_delay_the_control_paths(self):
        slow = js("const t = Date.now(); while (Date.now() - t < 8000) {} console.log('slow')", timeoutMs=30000)
        with cf.ThreadPoolExecutor(8) as pool:
            futs = [pool.submit(self.d.call, "Run", slow) for _ in range(6)]
            deadline = time.monotonic() + 30
            # the runs are in the provider once admission counts them (plimsoll_inflight)
            while time.monotonic() < deadline and self.d.metrics().get("plimsoll_inflight", 0) < 6:
                time.sleep(0.05)
            answers = []
            for _ in range(3):
                answers.append(self.d.call("Describe", {})[0])
                answers.append(self.d.call("Run", js("1", minimumIsolation="vm"))[0])
                answers.append(self.d.request("GET", "/healthz")[0])
            still_running = sum(not f.done() for f in futs)
            results = [f.result() for f in futs]
        self.assertEqual(answers, [200, 400, 200] * 3)
        self.assertEqual(still_running, 6, "the control paths waited for the slow runs")
        self.assertEqual([r[0] for r in results], [200] * 6, results[0][2][:300])


if __name__ == "__main__":
    unittest.main(verbosity=2)
