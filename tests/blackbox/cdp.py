"""A minimal Chrome DevTools Protocol client over the standard library only: starts Debian's
headless chromium with a fresh profile and speaks to one page target over a WebSocket (RFC 6455,
client side: masked frames, fragmented and large frames, ping and close)."""
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")

# Headless as root on a closed network: no sandbox (root), no GPU, and every background
# service that would dial out switched off (QUIC, sync, component updates, first-run pings).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--no-default-browser-check",
         "--disable-domain-reliability", "--disable-client-side-phishing-detection",
         "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
         "--disable-dev-shm-usage", "--mute-audio", "--remote-debugging-port=0",
         "--remote-allow-origins=*"]


class WebSocket:
    def __init__(self, url, timeout=30):
        assert url.startswith("ws://"), url
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key))
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError("websocket handshake refused: %r" % head[:200])
        self.buf = b""

    def _recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        head = bytes([0x81])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)

    def recv(self):
        """The next text message (fragments joined); pings are answered, close raises."""
        parts = []
        while True:
            b0, b1 = self._recv_exact(2)
            op, fin = b0 & 0x0F, b0 & 0x80
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            payload = self._recv_exact(n)
            if op == 0x9:  # ping: pong with the same payload (masked, client side)
                mask = os.urandom(4)
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask +
                                  bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
                continue
            if op == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if op in (0x1, 0x0):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Browser:
    """One headless chromium with a fresh profile and one page, closed (process group killed,
    profile removed) by close()."""

    def __init__(self, timeout=60):
        self.profile = tempfile.mkdtemp(prefix="plimsoll-chromium-")
        # Its log goes to a file, never a pipe nobody drains (a full pipe would stall it).
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, "--user-data-dir=" + self.profile, "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        self.events = []
        self.next_id = 1
        self.ws = None
        try:
            port = self._devtools_port(timeout)
            page = None
            deadline = time.monotonic() + timeout
            while page is None and time.monotonic() < deadline:
                with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
                    targets = json.load(r)
                page = next((t for t in targets if t.get("type") == "page"), None)
                if page is None:
                    time.sleep(0.1)
            if page is None:
                raise RuntimeError("chromium offered no page target")
            self.ws = WebSocket(page["webSocketDebuggerUrl"])
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, timeout):
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("chromium exited %d: %s" % (self.proc.returncode,
                                                               self.log.read().decode("utf-8", "replace")[-2000:]))
            try:
                with open(path) as f:
                    first = f.readline().strip()
                if first:
                    return int(first)
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method, params=None, timeout=30):
        i = self.next_id
        self.next_id += 1
        self.ws.send(json.dumps({"id": i, "method": method, "params": params or {}}))
        self.ws.sock.settimeout(timeout)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def pump(self, seconds):
        """Collects events for a while (console messages, network requests)."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.ws.sock.settimeout(left)
            try:
                msg = json.loads(self.ws.recv())
            except (socket.timeout, TimeoutError):
                return
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method, timeout=30):
        start = len(self.events)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events[start:]:
                if e["method"] == method:
                    return e
            self.pump(0.1)
        raise TimeoutError("no %s within %ss" % (method, timeout))

    def navigate(self, url, timeout=30):
        start = len(self.events)
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e["method"] == "Page.loadEventFired" for e in self.events[start:]):
                self.pump(0.3)  # late console messages and requests
                return
            self.pump(0.1)
        raise TimeoutError("page did not load: " + url)

    def eval(self, expression, await_promise=False):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": await_promise})
        if "exceptionDetails" in r:
            raise RuntimeError("evaluate %r: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expression, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval(expression):
                return True
            self.pump(0.1)
        raise TimeoutError("never true: " + expression)

    def screenshot(self, path, clip=None):
        """The whole page, or clip = (x, y, width, height) of it, as PNG."""
        params = {"format": "png", "captureBeyondViewport": True}
        if clip:
            params["clip"] = dict(zip(("x", "y", "width", "height"), clip), scale=1)
        r = self.call("Page.captureScreenshot", params)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return path

    def close(self):
        if self.ws:
            self.ws.close()
        # The whole process group: chromium's zygote and renderers too, even if the main
        # process is already gone.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                continue
            time.sleep(0.2)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
