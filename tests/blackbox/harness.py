"""Black-box harness: starts the real plimsolld on a free loopback port and talks HTTP to it.

Only the standard library is used, so the tests need nothing beyond python3. Each daemon's stderr
(one JSON object per line) is kept so tests can read the audit and startup lines.
"""
import base64
import http.client
import http.server
import json
import os
import secrets
import signal
import subprocess
import threading
import time
import unittest

DAEMON = os.environ.get("PLIMSOLLD", os.path.join(os.path.dirname(__file__), "../../build/plimsolld"))
CLI = os.environ.get("PLIMSOLL_CLI", os.path.join(os.path.dirname(__file__), "../../build/plimsoll"))
PROC = "/plimsoll.v1.SandboxService/"

# NotDispatched detail values (wire.md §7.4), unpadded base64 of 08 <reason>.
DETAIL = {"request": "CAE", "permission": "CAI", "protocol": "CAM", "unsupported": "CAQ",
          "isolation": "CAU", "capacity": "CAY", "environment": "CAc"}


class Daemon:
    """One plimsolld process. Use as a context manager; stop() drains with SIGTERM."""

    def __init__(self, env=None, expect_start=True, timeout=60):
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "PLIMSOLL_ADDR": "127.0.0.1:0", "PLIMSOLL_METRICS_ADDR": "127.0.0.1:0"}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                full[k] = os.environ[k]
        full.update(env or {})
        self.proc = subprocess.Popen([DAEMON], env=full, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = []
        self.port = None
        self.metrics_port = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if expect_start:
            if not self._ready.wait(timeout) or self.port is None:
                self.kill()
                raise RuntimeError("daemon did not start:\n" + "\n".join(self.lines))

    def _read(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("event") == "listening":
                self.port = obj["port"]
                self.metrics_port = obj.get("metrics_port")
                self._ready.set()
        self._ready.set()

    def events(self, name):
        out = []
        for line in list(self.lines):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("event") == name:
                out.append(obj)
        return out

    def settled_count(self, name, quiet=0.3):
        """How many `name` events there are once none has arrived for `quiet` seconds: a count taken
        as a baseline must not miss a line of an earlier call that is still on its way."""
        n, since = len(self.events(name)), time.monotonic()
        while time.monotonic() - since < quiet:
            time.sleep(0.05)
            m = len(self.events(name))
            if m != n:
                n, since = m, time.monotonic()
        return n

    def wait_events(self, name, pred=lambda e: True, n=1, timeout=5):
        """The matching events once there are at least n: the audit line of a run may follow its
        answer by a moment, since stderr is read on a thread. Returns what there is at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            got = [e for e in self.events(name) if pred(e)]
            if len(got) >= n or time.monotonic() >= deadline:
                return got
            time.sleep(0.02)

    def wait_exit(self, timeout=30):
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait_exit(60)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait_exit(30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        rc = self.stop()
        # A daemon that crashed or leaked under ASan exits non-zero: that fails the test.
        if rc != 0 and exc[0] is None:
            raise AssertionError("daemon exited %d:\n%s" % (rc, "\n".join(self.lines[-30:])))

    # --- HTTP ---------------------------------------------------------------------------------
    def request(self, method, path, body=b"", headers=None, port=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def headers_only(self, path, headers):
        """Sends a POST's headers (with a declared length) and no body: the answer must come
        before the body is read (authentication, the body limit)."""
        import socket
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path
            head += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
            s.sendall(head.encode())
            resp = http.client.HTTPResponse(s)
            resp.begin()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    def call(self, procedure, message, token=None, rid=None, ctype="application/json", extra=None):
        headers = {"Content-Type": ctype, "Connect-Protocol-Version": "1"}
        if rid is not False:
            headers["Plimsoll-Request-Id"] = rid or secrets.token_hex(16)
        if token:
            headers["Authorization"] = "Bearer " + token
        headers.update(extra or {})
        body = message if isinstance(message, (bytes, bytearray)) else json.dumps(message).encode()
        status, hdrs, data = self.request("POST", PROC + procedure, body, headers)
        return status, hdrs, data, headers.get("Plimsoll-Request-Id")

    def metrics(self, token=None):
        """The scrape; a daemon with authentication needs a token with the metrics scope."""
        headers = {"Authorization": "Bearer " + token} if token else None
        status, _, data = self.request("GET", "/metrics", port=self.metrics_port, headers=headers)
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


# Issue 19: a stack overflow is a catchable RangeError at every tier (the same snippets run in
# test_quickjs.py and test_microvm.py).
STACK_SNIPPETS = (
    "try { (function f(n) { return f(n + 1) + 1 })(0) } catch (e) { console.log('caught', e instanceof RangeError) }",
    "try { JSON.parse('['.repeat(200000)) } catch (e) { console.log('caught', e instanceof RangeError) }",
)


def js(code, **kw):
    msg = {"protocol": 3, "javascript": {"code": code}}
    msg.update(kw)
    return msg


class WireCase(unittest.TestCase):
    def assertRefused(self, answer, code, reason, status=None):
        st, hdrs, data, rid = answer
        body = json.loads(data)
        self.assertEqual(body["code"], code, body)
        if status is not None:
            self.assertEqual(st, status)
        details = body.get("details", [])
        self.assertEqual(len(details), 1, body)
        self.assertEqual(details[0]["type"], "plimsoll.v1.NotDispatched")
        self.assertEqual(details[0]["value"], DETAIL[reason])
        raw = base64.b64decode(details[0]["value"] + "==")
        self.assertEqual(raw, bytes([0x08, list(DETAIL).index(reason) + 1]))
        self.assertEqual(hdrs.get("content-type"), "application/json")
        if rid:
            self.assertEqual(hdrs.get("plimsoll-request-id"), rid)
        return body


# --- run records, recomputed independently of the C code (wire.md §13) --------------------------
import hashlib as _hashlib
import struct as _struct


def _value(b):
    return _struct.pack(">Q", len(b)) + b


class _Stream:
    def __init__(self, domain):
        self.h = _hashlib.sha256(_value(domain.encode()))

    def field(self, name, content):
        if isinstance(content, bool):
            content = b"true" if content else b"false"
        elif isinstance(content, int):
            content = str(content).encode()
        elif isinstance(content, str):
            content = content.encode()
        self.h.update(_value(name.encode()) + _value(content))

    def hex(self):
        return self.h.hexdigest()


def request_digest(req):
    """Digest of a javascript RunRequest dict as sent (protocol >= 2)."""
    s = _Stream("plimsoll.run-request.v2" if req.get("protocol", 0) >= 2 else "plimsoll.run-request.v1")
    s.field("protocol", req.get("protocol", 0))
    s.field("minimum_isolation", req.get("minimumIsolation", ""))
    s.field("timeout_ms", req.get("timeoutMs", 0))
    if req.get("protocol", 0) >= 2:
        rule = req.get("softwareRule", {})
        s.field("software_mode", rule.get("mode", ""))
        ids = rule.get("identities", [])
        s.field("software_identities", len(ids))
        for i in ids:
            s.field("software_identity", i)
    js_ = req["javascript"]
    s.field("kind", "javascript")
    s.field("code", js_.get("code", ""))
    s.field("grant_profile", js_.get("grantProfile", ""))
    return s.hex()


def result_digest(resp):
    s = _Stream("plimsoll.run-result.v1")
    j = resp["javascript"]
    s.field("kind", "javascript")
    s.field("exit_code", j.get("exitCode", 0))
    s.field("timed_out", j.get("timedOut", False))
    s.field("stdout", base64.b64decode(j.get("stdout", "")))
    s.field("stderr", base64.b64decode(j.get("stderr", "")))
    s.field("stdout_truncated", j.get("stdoutTruncated", False))
    s.field("stderr_truncated", j.get("stderrTruncated", False))
    return s.hex()


def record_digest(rec):
    s = _Stream("plimsoll.run-record.v%d" % rec["version"])
    for name, key in (("request_sha256", "requestSha256"), ("result_sha256", "resultSha256"),
                      ("provider", "provider"), ("isolation", "isolation"), ("environment", "environment"),
                      ("policy", "policy"), ("software_identity", "softwareIdentity"),
                      ("software_rule_id", "softwareRuleId")):
        s.field(name, rec.get(key, ""))
    s.field("started_unix_ms", int(rec.get("startedUnixMs", "0")))
    s.field("ended_unix_ms", int(rec.get("endedUnixMs", "0")))
    s.field("session", rec.get("session", ""))
    s.field("sequence", int(rec.get("sequence", "0")))
    s.field("previous_sha256", rec.get("previousSha256", ""))
    return s.hex()


def check_record(testcase, req, resp):
    """The client's checks of wire.md §13.8 for a javascript run."""
    rec = resp["record"]
    testcase.assertEqual(rec["version"], 2)
    testcase.assertEqual(rec["requestSha256"], request_digest(req))
    testcase.assertEqual(rec["resultSha256"], result_digest(resp))
    testcase.assertEqual(rec["provider"], resp["sandbox"])
    testcase.assertEqual(rec["isolation"], resp["isolation"])
    testcase.assertEqual(rec.get("environment", ""), resp.get("environment", ""))
    testcase.assertEqual(rec["recordSha256"], record_digest(rec))
    testcase.assertLessEqual(int(rec["startedUnixMs"]), int(rec["endedUnixMs"]))


def descendants(pid):
    """Pids of every live descendant of pid (workers may be grandchildren of the daemon)."""
    parents = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    stat = f.read()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
                parents.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in parents.get(p, []):
            out.append(c)
            todo.append(c)
    return out


class Upstream:
    """A loopback HTTP API for grant tests. It records every request (method, path, headers, body)
    and how many were in flight at once. /v1/items/redirect answers 302 to another host,
    /v1/items/hang never answers (until close), /v1/slow/* waits 0.4 s, /v1/items/* answers JSON
    with a Set-Cookie the broker must drop, anything else 404."""

    def __init__(self):
        self.seen = []
        self.hung = threading.Event()
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with outer.lock:
                    outer.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                       "body": body})
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                try:
                    if self.path == "/v1/items/redirect":
                        self.send_response(302)
                        self.send_header("Location", "http://127.0.0.1:1/steal")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    if self.path == "/v1/items/hang":
                        outer.hung.wait(20)
                        return
                    if self.path.startswith("/v1/slow/"):
                        time.sleep(0.4)
                    if self.path.startswith(("/v1/items/", "/v1/slow/")):
                        data = json.dumps({"id": self.path.rsplit("/", 1)[1], "method": self.command}).encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Set-Cookie", "session=leak")
                    else:
                        data = b"nope"
                        self.send_response(404)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with outer.lock:
                        outer.inflight -= 1

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # the default 5 would cap concurrency below the broker's 16

        self.httpd = Server(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def since(self, n0):
        with self.lock:
            return list(self.seen[n0:])

    def count(self):
        with self.lock:
            return len(self.seen)

    def close(self):
        self.hung.set()
        self.httpd.shutdown()
        self.httpd.server_close()
