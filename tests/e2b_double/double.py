#!/usr/bin/env python3
"""A loopback double of the E2B API: the control plane (POST/GET/DELETE /sandboxes, the list with a
metadata filter, POST /sandboxes/{id}/timeout, PUT /sandboxes/{id}/network: the egress replaced
whole, as E2B's network update does) and each sandbox's envd (POST/GET /files, Connect
server-streaming process.Process/Start with JSON envelopes, stdin kept open when the request says
"stdin": true, and the unary Connect calls process.Process/SendInput and SendSignal with the JSON
codec), as E2B documents them. It really runs what it is asked
to run: each sandbox is a scratch directory, and each process runs with the local `node`/`sh` in a
private mount namespace in which the scratch directories appear at the guest paths /home/user and
/tmp. Each sandbox has one PID namespace, as a VM has one process table: its first process starts
an init (pid 1, which reaps orphans) in new user, mount and PID namespaces (unshare -Urmpf
--mount-proc), and every process of that sandbox enters them (nsenter) with a /proc of its own, so
guest code sees, and can signal, only its sandbox's processes. Pids in start events and in
SendInput/SendSignal are the sandbox's, as envd's are the VM's. A sandbox without allowOut also gets a private network namespace (unshare -n):
nothing is reachable, which is what E2B's denyOut 0.0.0.0/0 promises. A sandbox with allowOut keeps
the host network but runs node with an emulation of E2B's egress proxy (egress_hook.mjs): fetch()
to an allowed host goes to this double, which adds the sandbox's transform headers *outside the
guest* and forwards to the mapped upstream (--egress host=http://127.0.0.1:port); every other
fetch fails. That emulation is a test device, not a wall.

It is NOT E2B: no VM, no hypervisor. It exists so the daemon's E2B client can be tested end to end.

Usage: double.py [--api-key K] [--egress host=url ...] ; prints {"port": N} on stdout, then serves
until killed. Control endpoints (no authentication, loopback only):
  POST /_double/faults  JSON {name: value}: create_5xx (count), create_no_id, missing_envd_token,
        missing_traffic_token, cut_stream, trailer_error, slow_stream (seconds between frames),
        delete_fail (count), delete_404, age_skew_s (listed startedAt moved back), oversized_stream, oversized_frame, memory_mb, cpu_count,
        disk_size_mb (null removes the field), files_500, get_500 (GET /sandboxes/{id} answers 500),
        network_fail (count: PUT .../network answers 500), network_off_fail (count: the same for an
        update that allows nothing out), start_fail (count: process.Process/Start answers 503, nothing
        started);
        {} resets them all
  GET  /_double/state   JSON: live sandboxes, running processes, deleted ids, create bodies, signals
        sent through SendSignal, network updates, request log (headers)
  POST /_double/plant   JSON {metadata, age_s}: a sandbox that nobody tracks (an orphan)
  POST /_double/reset   clears the logs and faults
"""
import argparse
import base64
import http.server
import json
import os
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST_ROOTS = {"/home/user": "home", "/tmp": "tmp"}
GUEST_HOOK = "/home/.e2b-double/egress_hook.mjs"  # outside both guest roots
FRAME_END = 0x02
# pid 1 of a sandbox's PID namespace: reaps whatever is orphaned there, as a VM's init does
NS_INIT = ("import os, time\nprint('ready', flush=True)\nwhile True:\n    try:\n        os.wait()\n"
           "    except ChildProcessError:\n        time.sleep(0.1)\n")


class State:
    def __init__(self, api_key, egress):
        self.lock = threading.Lock()
        self.api_key = api_key
        self.egress = egress  # host -> base url
        self.sandboxes = {}
        self.deleted = []
        self.creates = []
        self.network_updates = []  # PUT /sandboxes/{id}/network bodies, in order
        self.signals = []
        self.log = []
        self.faults = {}
        self.root = tempfile.mkdtemp(prefix="e2b-double-")

    def fault(self, name, default=None):
        with self.lock:
            return self.faults.get(name, default)

    def take(self, name):
        """Counts down a counted fault; true while it is still active."""
        with self.lock:
            n = self.faults.get(name, 0)
            if n:
                self.faults[name] = n - 1
                return True
            return False


class Sandbox:
    def __init__(self, st, body, age_s=0):
        self.id = "i" + secrets.token_hex(10)
        self.template = body.get("templateID", "base")
        self.metadata = body.get("metadata") or {}
        self.network = body.get("network") or {}
        self.envd_token = "ea_" + secrets.token_hex(16)
        self.traffic_token = "ta_" + secrets.token_hex(16)
        self.started = time.time() - age_s
        self.timeout = int(body.get("timeout", 15))
        self.end_at = time.time() + self.timeout
        self.dir = tempfile.mkdtemp(prefix=self.id + "-", dir=st.root)
        for sub in ("home/user/project", "tmp"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self.procs = []
        self.gone = False
        self.lock = threading.Lock()
        self.init = None  # the PID namespace's holder, started with the first process

    def ns_holder(self):
        """The host pid of the `unshare` whose namespaces this sandbox's processes enter; None once
        the sandbox is gone. Its child, pid 1 of the namespace, reaps the orphans, as an init does."""
        with self.lock:
            if self.init is None and not self.gone:
                self.init = subprocess.Popen(["unshare", "-Urmpf", "--mount-proc", sys.executable, "-c", NS_INIT],
                                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, start_new_session=True)
                self.init.stdout.readline()  # "ready": the namespace exists
            return self.init.pid if self.init and not self.gone else None

    def host_path(self, guest):
        """The scratch path for an absolute guest path under /home/user or /tmp, else None."""
        if not guest.startswith("/") or "\x00" in guest:
            return None
        norm = os.path.normpath(guest)
        for root, sub in GUEST_ROOTS.items():
            if norm == root or norm.startswith(root + "/"):
                rel = norm[len(root):].lstrip("/")
                base = os.path.join(self.dir, sub if sub == "tmp" else "home/user")
                return os.path.join(base, rel) if rel else base
        return None

    def kill(self):
        with self.lock:
            self.gone = True  # its streams end without an end event, as a deleted VM's do
            procs, self.procs = self.procs, []
            init, self.init = self.init, None
        if init:  # pid 1 killed: the kernel kills every process of the namespace
            procs.append(init)
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def listed(self, skew=0):
        return {"sandboxID": self.id, "templateID": self.template, "clientID": "double",
                "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started - skew)),
                "endAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.end_at)),
                "metadata": self.metadata, "cpuCount": 2, "memoryMB": 512, "state": "running"}


def envelope(flags, obj):
    data = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return struct.pack(">BI", flags, len(data)) + data


def make_handler(st):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        # ---- plumbing -----------------------------------------------------------------------
        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def reply(self, status, obj=None, raw=None, ctype="application/json"):
            data = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b"")
            self.send_response(status)
            if data or status not in (204,):
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def record(self):
            entry = {"method": self.command, "path": self.path, "headers": dict(self.headers)}
            with st.lock:
                st.log.append(entry)
            return entry

        def dispatch(self):
            # dur_ms: the double's own time for the request (bench/e2b_bench.py subtracts it)
            entry = self.record()
            t0 = time.perf_counter()
            try:
                return self.route()
            finally:
                entry["dur_ms"] = (time.perf_counter() - t0) * 1000.0

        def route(self):
            u = urllib.parse.urlsplit(self.path)
            parts = [p for p in u.path.split("/") if p]
            q = urllib.parse.parse_qs(u.query)
            if parts[:1] == ["_double"]:
                return self.control(parts[1:])
            if parts[:1] == ["_egress"] and len(parts) >= 3:
                return self.egress(parts[1], parts[2], "/" + "/".join(parts[3:]))
            if parts[:1] == ["envd"] and len(parts) >= 2:
                return self.envd(parts[1], parts[2:], q)
            if parts[:1] == ["sandboxes"]:
                if self.headers.get("X-API-Key") != st.api_key:
                    return self.reply(401, {"code": 401, "message": "Invalid API key"})
                return self.control_plane(parts[1:], q)
            return self.reply(404, {"code": 404, "message": "not found"})

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = dispatch

        # ---- the control plane --------------------------------------------------------------
        def control_plane(self, rest, q):
            if self.command == "POST" and not rest:
                raw = self.body()
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self.reply(400, {"code": 400, "message": "bad json"})
                with st.lock:
                    st.creates.append(body)
                if st.take("create_5xx"):
                    return self.reply(503, {"code": 503, "message": "unavailable"})
                sb = Sandbox(st, body)
                with st.lock:
                    st.sandboxes[sb.id] = sb
                if st.fault("create_no_id"):
                    return self.reply(201, raw=b"<html>oops</html>", ctype="text/html")
                out = {"sandboxID": sb.id, "templateID": sb.template, "clientID": "double",
                       "envdVersion": "0.2.0-double", "envdAccessToken": sb.envd_token,
                       "trafficAccessToken": sb.traffic_token, "domain": "double.local"}
                if st.fault("missing_envd_token"):
                    del out["envdAccessToken"]
                if st.fault("missing_traffic_token"):
                    del out["trafficAccessToken"]
                return self.reply(201, out)
            if self.command == "GET" and not rest:
                want = {}
                for m in q.get("metadata", []):
                    for kv in m.split("&"):
                        k, _, v = kv.partition("=")
                        want[k] = v
                with st.lock:
                    live = [sb.listed(st.faults.get("age_skew_s", 0)) for sb in st.sandboxes.values()
                            if all(sb.metadata.get(k) == v for k, v in want.items())]
                return self.reply(200, live)
            if len(rest) == 2 and rest[1] == "timeout" and self.command == "POST":
                with st.lock:
                    sb = st.sandboxes.get(rest[0])
                try:
                    secs = int(json.loads(self.body() or b"{}").get("timeout"))
                except (ValueError, TypeError, AttributeError):
                    return self.reply(400, {"code": 400, "message": "timeout must be an integer"})
                if not sb:
                    return self.reply(404, {"code": 404, "message": "sandbox not found"})
                sb.end_at = time.time() + secs
                return self.reply(204)
            if len(rest) == 2 and rest[1] == "network" and self.command == "PUT":
                # E2B's network update: the body replaces the running sandbox's egress whole
                with st.lock:
                    sb = st.sandboxes.get(rest[0])
                try:
                    net = json.loads(self.body() or b"{}")
                except ValueError:
                    return self.reply(400, {"code": 400, "message": "bad json"})
                if not isinstance(net, dict):
                    return self.reply(400, {"code": 400, "message": "the network must be an object"})
                if st.take("network_fail") or (not net.get("allowOut") and st.take("network_off_fail")):
                    return self.reply(500, {"code": 500, "message": "network update failed"})
                if not sb:
                    return self.reply(404, {"code": 404, "message": "sandbox not found"})
                with st.lock:
                    sb.network = net
                    st.network_updates.append({"sandboxID": sb.id, "network": net})
                return self.reply(204)
            if len(rest) == 1:
                with st.lock:
                    sb = st.sandboxes.get(rest[0])
                if self.command == "GET":
                    if st.fault("get_500"):
                        return self.reply(500, {"code": 500, "message": "internal error"})
                    if not sb:
                        return self.reply(404, {"code": 404, "message": "sandbox not found"})
                    d = sb.listed()
                    d.update({"memoryMB": st.fault("memory_mb", 512), "cpuCount": st.fault("cpu_count", 2),
                              "diskSizeMB": st.fault("disk_size_mb", 1024), "envdVersion": "0.2.0-double"})
                    if "disk_size_mb" in st.faults and st.faults["disk_size_mb"] is None:
                        del d["diskSizeMB"]
                    return self.reply(200, d)
                if self.command == "DELETE":
                    if st.take("delete_fail"):
                        return self.reply(500, {"code": 500, "message": "delete failed"})
                    if not sb:
                        return self.reply(404, {"code": 404, "message": "sandbox not found"})
                    with st.lock:
                        st.sandboxes.pop(sb.id, None)
                        st.deleted.append(sb.id)
                    sb.kill()
                    if st.fault("delete_404"):
                        return self.reply(404, {"code": 404, "message": "sandbox not found"})
                    return self.reply(204)
            return self.reply(404, {"code": 404, "message": "not found"})

        # ---- envd ---------------------------------------------------------------------------
        def envd(self, sid, rest, q):
            with st.lock:
                sb = st.sandboxes.get(sid)
            if not sb:
                return self.reply(502, {"code": 502, "message": "sandbox not found"})
            if (self.headers.get("X-Access-Token") != sb.envd_token or
                    self.headers.get("e2b-traffic-access-token") != sb.traffic_token):
                return self.reply(401, {"code": 401, "message": "unauthorized"})
            if rest == ["files"]:
                if st.fault("files_500"):
                    self.body()  # consumed, so the kept-alive connection stays in step
                    return self.reply(500, {"code": 500, "message": "files broken"})
                return self.files(sb, q)
            if rest == ["process.Process", "Start"] and self.command == "POST":
                return self.start(sb)
            if rest in (["process.Process", "SendInput"], ["process.Process", "SendSignal"]) and \
                    self.command == "POST":
                return self.unary(sb, rest[1])
            return self.reply(404, {"code": 404, "message": "not found"})

        def files(self, sb, q):
            path = (q.get("path") or [""])[0]
            if self.command == "GET":
                hp = sb.host_path(path)
                if not hp:
                    return self.reply(400, {"code": 400, "message": "bad path"})
                if not os.path.isfile(hp):
                    return self.reply(404, {"code": 404, "message": "file not found"})
                with open(hp, "rb") as f:
                    return self.reply(200, raw=f.read(), ctype="application/octet-stream")
            if self.command != "POST":
                return self.reply(405, {"code": 405, "message": "method"})
            ctype = self.headers.get("Content-Type", "")
            if not ctype.startswith("multipart/form-data") or "boundary=" not in ctype:
                return self.reply(400, {"code": 400, "message": "want multipart"})
            boundary = ctype.split("boundary=", 1)[1].strip().strip('"').encode()
            parts = parse_multipart(self.body(), boundary)
            if parts is None or not parts:
                return self.reply(400, {"code": 400, "message": "bad multipart"})
            written = []
            for name, filename, data in parts:
                if name != "file":
                    return self.reply(400, {"code": 400, "message": "field must be file"})
                target = path if (path and len(parts) == 1) else filename
                hp = sb.host_path(target or "")
                if not hp:
                    return self.reply(400, {"code": 400, "message": "path outside writable roots"})
                os.makedirs(os.path.dirname(hp), exist_ok=True)
                with open(hp, "wb") as f:
                    f.write(data)
                written.append({"name": os.path.basename(target), "type": "file", "path": target})
            return self.reply(200, written)

        def unary(self, sb, method):
            # Connect unary, JSON codec: 200 {} or an error status with {code, message}
            if not self.headers.get("Content-Type", "").startswith("application/json"):
                return self.reply(415, {"code": "invalid_argument", "message": "content type"})
            try:
                req = json.loads(self.body() or b"{}")
                pid = int((req.get("process") or {}).get("pid"))
            except (ValueError, TypeError, AttributeError):
                return self.reply(400, {"code": "invalid_argument", "message": "bad request"})
            with sb.lock:
                p = next((q for q in sb.procs if q.ns_pid == pid and q.poll() is None), None)
            if p is None:
                return self.reply(404, {"code": "not_found", "message": "process with pid %d not found" % pid})
            if method == "SendInput":
                try:
                    data = base64.b64decode((req.get("input") or {}).get("stdin") or "", validate=True)
                except ValueError:
                    return self.reply(400, {"code": "invalid_argument", "message": "stdin is not base64"})
                if p.stdin is None:
                    return self.reply(400, {"code": "failed_precondition", "message": "stdin is not open"})
                try:
                    p.stdin.write(data)
                    p.stdin.flush()
                except (BrokenPipeError, ValueError):
                    return self.reply(404, {"code": "not_found", "message": "process exited"})
                return self.reply(200, {})
            sig = req.get("signal")
            num = {"SIGNAL_SIGKILL": signal.SIGKILL, 9: signal.SIGKILL,
                   "SIGNAL_SIGTERM": signal.SIGTERM, 15: signal.SIGTERM}.get(sig)
            if num is None:
                return self.reply(400, {"code": "invalid_argument", "message": "unknown signal"})
            with st.lock:
                st.signals.append({"sandbox": sb.id, "pid": pid, "signal": sig})
            try:
                os.killpg(p.pid, num)
            except OSError:
                pass
            return self.reply(200, {})

        def start(self, sb):
            if self.headers.get("Content-Type") != "application/connect+json":
                return self.reply(415, {"code": "invalid_argument", "message": "content type"})
            raw = self.body()
            if st.take("start_fail"):
                return self.reply(503, {"code": "unavailable", "message": "envd cannot start a process"})
            if len(raw) < 5:
                return self.reply(400, {"code": "invalid_argument", "message": "short"})
            flags, n = struct.unpack(">BI", raw[:5])
            req = json.loads(raw[5:5 + n])
            proc = req.get("process") or {}
            timeout_ms = int(self.headers.get("Connect-Timeout-Ms") or 0)
            deadline = time.monotonic() + (timeout_ms / 1000.0 if timeout_ms > 0 else 3600)
            self.send_response(200)
            self.send_header("Content-Type", "application/connect+json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def send(b):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                self.wfile.flush()

            def finish():
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            try:
                if st.fault("oversized_frame"):
                    send(struct.pack(">BI", 0, 9 * 1024 * 1024) + b"{" * 65536)
                    return finish()
                p = spawn(st, sb, proc, bool(req.get("stdin")))
                send(envelope(0, {"event": {"start": {"pid": p.ns_pid}}}))
                self.pump(sb, p, send, deadline)
                finish()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def pump(self, sb, p, send, deadline):
            chunks = []
            cv = threading.Condition()
            alive = [2]

            def reader(stream, key):
                while True:
                    b = os.read(stream.fileno(), 65536)
                    if not b:
                        break
                    with cv:
                        chunks.append((key, b))
                        cv.notify()
                with cv:
                    alive[0] -= 1
                    cv.notify()

            if p.stderr_head:
                chunks.append(("stderr", p.stderr_head))
            for s, k in ((p.stdout, "stdout"), (p.stderr, "stderr")):
                threading.Thread(target=reader, args=(s, k), daemon=True).start()
            slow = st.fault("slow_stream")
            if st.fault("oversized_stream"):
                blob = base64.b64encode(b"x" * (1024 * 1024)).decode()
                for _ in range(40):
                    send(envelope(0, {"event": {"data": {"stdout": blob}}}))
            while True:
                with cv:
                    while not chunks and alive[0] and time.monotonic() < deadline:
                        cv.wait(0.05)
                    batch, chunks[:] = list(chunks), []
                    done = not alive[0] and not batch
                for key, b in batch:
                    if slow:
                        time.sleep(slow)
                    send(envelope(0, {"event": {"data": {key: base64.b64encode(b).decode()}}}))
                if time.monotonic() >= deadline:
                    kill_tree(p)
                    send(envelope(FRAME_END, {"error": {"code": "deadline_exceeded",
                                                        "message": "the operation timed out"}}))
                    return
                if done:
                    break
            rc = p.wait()
            if p.stdin:
                try:
                    p.stdin.close()
                except OSError:
                    pass
            with sb.lock:
                if p in sb.procs:
                    sb.procs.remove(p)
            if st.fault("cut_stream") or sb.gone:
                return
            if st.fault("trailer_error"):
                send(envelope(FRAME_END, {"error": {"code": "internal", "message": "envd exploded"}}))
                return
            end = {"terminated": True, "status": "exit status %d" % (rc if rc >= 0 else 128 - rc)}
            code = rc if rc >= 0 else 128 - rc
            if code:
                end["exitCode"] = code  # proto3 JSON leaves a zero out
            send(envelope(0, {"event": {"end": end}}))
            send(envelope(FRAME_END, {}))

        # ---- E2B's egress proxy, emulated ---------------------------------------------------
        def egress(self, sid, host, path):
            with st.lock:
                sb = st.sandboxes.get(sid)
            net = sb.network if sb else {}
            if not sb or host not in (net.get("allowOut") or []) or host not in st.egress:
                return self.reply(403, raw=b"egress denied\n", ctype="text/plain")
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            for rule in (net.get("rules") or {}).get(host, []):
                headers.update((rule.get("transform") or {}).get("headers") or {})
            body = self.body()
            req = urllib.request.Request(st.egress[host] + path, data=body, method=self.command, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
            except OSError:
                return self.reply(502, raw=b"egress upstream unreachable\n", ctype="text/plain")
            return self.reply(status, raw=data, ctype=ctype or "application/octet-stream")

        # ---- control ------------------------------------------------------------------------
        def control(self, rest):
            if rest == ["faults"] and self.command == "POST":
                f = json.loads(self.body() or b"{}")
                with st.lock:
                    if not f:
                        st.faults = {}
                    st.faults.update(f)
                return self.reply(200, {"faults": st.faults})
            if rest == ["reset"]:
                with st.lock:
                    st.faults, st.log, st.creates, st.deleted, st.signals = {}, [], [], [], []
                    st.network_updates = []
                return self.reply(200, {})
            if rest == ["state"]:
                with st.lock:
                    out = {"live": [sb.listed() for sb in st.sandboxes.values()],
                           "procs": sum(len(sb.procs) for sb in st.sandboxes.values()),
                           "deleted": list(st.deleted), "creates": list(st.creates), "log": list(st.log),
                           "signals": list(st.signals), "network_updates": list(st.network_updates)}
                return self.reply(200, out)
            if rest == ["plant"] and self.command == "POST":
                f = json.loads(self.body() or b"{}")
                sb = Sandbox(st, {"metadata": f.get("metadata", {}), "timeout": 600}, age_s=f.get("age_s", 0))
                with st.lock:
                    st.sandboxes[sb.id] = sb
                return self.reply(200, {"sandboxID": sb.id})
            return self.reply(404, {})

    return H


def parse_multipart(data, boundary):
    out = []
    delim = b"--" + boundary
    pieces = data.split(delim)
    if len(pieces) < 3:
        return None
    for piece in pieces[1:-1]:
        piece = piece[2:] if piece.startswith(b"\r\n") else piece
        head, sep, content = piece.partition(b"\r\n\r\n")
        if not sep:
            return None
        if content.endswith(b"\r\n"):
            content = content[:-2]
        name = filename = None
        for line in head.decode("utf-8", "replace").split("\r\n"):
            if line.lower().startswith("content-disposition:"):
                for item in line.split(";")[1:]:
                    k, _, v = item.strip().partition("=")
                    v = v.strip('"')
                    if k == "name":
                        name = v
                    elif k == "filename":
                        filename = v
        out.append((name, filename, content))
    return out


def guest_path_env(v):
    return v


def spawn(st, sb, proc, with_stdin=False):
    cmd = [proc.get("cmd", "")] + list(proc.get("args") or [])
    cwd = proc.get("cwd") or "/home/user"
    envs = dict(proc.get("envs") or {})
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/home/user", "USER": "user"}
    env.update(envs)
    isolated = not (sb.network.get("allowOut"))
    if not isolated:
        # The guest's /tmp is the sandbox's own: the hook is bound at /home/.e2b-double first, so
        # that a checkout under /tmp (whose files the new /tmp hides) works as well as any other.
        env["NODE_OPTIONS"] = ("--import %s %s" % (GUEST_HOOK, env.get("NODE_OPTIONS", ""))).strip()
        env["E2B_DOUBLE_EGRESS"] = "http://127.0.0.1:%d/_egress/%s" % (st.port, sb.id)
        env["E2B_DOUBLE_ALLOW"] = ",".join(sb.network.get("allowOut") or [])
    # Inside the sandbox's namespaces, a private mount namespace shows the scratch directories at
    # the guest paths. Host files the guest needs (the egress hook) are bound in before /tmp is
    # replaced (with the tools a guest PATH has: sh, mkdir, mount). The first line on stderr is the
    # process's pid in the sandbox (read here, before the output is pumped).
    script = ('echo $$ >&2 && mount -t tmpfs none /home && mkdir -p /home/user "${3%/*}" && : >"$3" && '
              'mount --bind "$4" "$3" && mount --bind "$1/home/user" /home/user && mount --bind "$1/tmp" /tmp && '
              'cd "$2" && shift 4 && exec "$@"')
    holder = sb.ns_holder()
    if holder is None:
        raise BrokenPipeError("the sandbox is gone")
    enter = ["nsenter", "-U", "-m", "--preserve-credentials", "-t", str(holder),
             "--pid=/proc/%d/ns/pid_for_children" % holder]
    argv = enter + ["unshare", "-m" + ("n" if isolated else ""), "sh", "-c", script, "sh", sb.dir, cwd, GUEST_HOOK,
                    os.path.join(HERE, "egress_hook.mjs")] + cmd
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    head = b""
    while not head.endswith(b"\n") and len(head) < 32:
        c = os.read(p.stderr.fileno(), 1)
        if not c:
            break
        head += c
    p.ns_pid = int(head) if head.strip().isdigit() else -1
    p.stderr_head = b"" if p.ns_pid > 0 else head  # an early failure's words stay on stderr
    with sb.lock:
        sb.procs.append(p)
    return p


def kill_tree(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    p.wait()


def reaper(st):
    """E2B ends a sandbox at its timeout: so does the double."""
    while True:
        time.sleep(0.5)
        now = time.time()
        with st.lock:
            dead = [sb for sb in st.sandboxes.values() if sb.end_at < now]
            for sb in dead:
                del st.sandboxes[sb.id]
        for sb in dead:
            sb.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api-key", default="e2b_double_key")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--egress", action="append", default=[], help="host=http://127.0.0.1:port")
    a = ap.parse_args()
    # The double's isolation of its guests needs user and mount namespaces: say so plainly when the
    # machine lacks them, instead of failing later inside a run.
    probe = subprocess.run(["unshare", "-Urmnpf", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        sys.stderr.write("e2b double: `unshare -Urmnpf --mount-proc` does not work here (%s); it needs user, "
                         "mount and PID namespaces\n" % probe.stderr.decode(errors="replace").strip())
        sys.exit(2)
    egress = dict(e.split("=", 1) for e in a.egress)
    st = State(a.api_key, egress)

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

        def handle_error(self, request, client_address):
            # the daemon hangs up on purpose (trailer seen, budget or a fault): not an error here
            if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
                super().handle_error(request, client_address)

    httpd = Server(("127.0.0.1", a.port), make_handler(st))
    st.port = httpd.server_address[1]
    threading.Thread(target=reaper, args=(st,), daemon=True).start()

    def stop(*_):
        with st.lock:
            sbs = list(st.sandboxes.values())
            st.sandboxes.clear()
        for sb in sbs:
            sb.kill()
        shutil.rmtree(st.root, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(json.dumps({"port": st.port}), flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
