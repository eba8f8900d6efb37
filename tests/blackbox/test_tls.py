"""TLS on the RPC and metrics listeners (issue 14 item 1), through the real daemon.

The test makes its own CA and server certificates with openssl at run time (ECDSA P-256, the
server's for IP 127.0.0.1), then talks to the daemon as the reference Python client does:
urllib over https with the CA file, Connect JSON headers. It checks that TLS 1.1 is refused
(with a client that offers only TLS 1.1 and would otherwise accept it), that SIGHUP swaps the
pair for new handshakes while an open keep-alive connection goes on, that a bad pair on reload
is logged and the old one kept, that /metrics is served over TLS, and that a half, unreadable
or mismatched pair stops startup naming the variable.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import PROC, Daemon, js  # noqa: E402

TOKEN = "tls-test-token-0123456789abcdef0123456789"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_pki(d):
    """ca.pem; server pairs a (CN plimsoll-a) and b (CN plimsoll-b), both for IP 127.0.0.1."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=plimsoll test CA", "-keyout", "ca.key", "-out", "ca.pem",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    for name in ("a", "b"):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
                "/CN=plimsoll-%s" % name, "-keyout", "%s.key" % name, "-out", "%s.csr" % name, cwd=d)
        openssl("x509", "-req", "-in", "%s.csr" % name, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "ext.cnf", "-out", "%s.pem" % name, cwd=d)


def client_context(ca):
    return ssl.create_default_context(cafile=ca)


def peer_cn(sock):
    subject = dict(x[0] for x in sock.getpeercert()["subject"])
    return subject["commonName"]


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("openssl"):
            raise AssertionError("openssl is needed to make the test certificates (scripts/install-deps.sh)")
        cls.tmp = tempfile.mkdtemp()
        make_pki(cls.tmp)
        cls.ca = os.path.join(cls.tmp, "ca.pem")
        cls.cert = os.path.join(cls.tmp, "server.pem")
        cls.key = os.path.join(cls.tmp, "server.key")
        shutil.copy(os.path.join(cls.tmp, "a.pem"), cls.cert)
        shutil.copy(os.path.join(cls.tmp, "a.key"), cls.key)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_TOKEN": TOKEN, "SANDBOX_RATE_PER_MIN": "0",
                        "PLIMSOLL_TLS_CERT": cls.cert, "PLIMSOLL_TLS_KEY": cls.key})

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def url(self, path, port=None):
        return "https://127.0.0.1:%d%s" % (port or self.d.port, path)

    def post(self, procedure, message):
        """As the reference Python client sends a request (wire.md §5.1), over urllib + CA file."""
        req = urllib.request.Request(self.url(PROC + procedure), data=json.dumps(message).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1",
                                              "Accept-Encoding": "identity", "Authorization": "Bearer " + TOKEN,
                                              "User-Agent": "plimsoll-client-python/test"})
        with urllib.request.urlopen(req, context=client_context(self.ca), timeout=30) as r:
            return r.status, json.loads(r.read())

    def test_run_and_describe_over_https(self):
        st, body = self.post("Describe", {})
        self.assertEqual(st, 200)
        self.assertEqual(body["sandbox"], "quickjs")
        st, body = self.post("Run", js("console.log(6*7)"))
        self.assertEqual(st, 200, body)
        self.assertEqual(body["javascript"]["stdout"], "NDIK")  # "42\n"
        self.assertTrue(self.d.events("listening")[0]["tls"])

    def test_tls_1_1_is_refused_and_1_2_and_1_3_are_served(self):
        for version, ok in ((ssl.TLSVersion.TLSv1_1, False), (ssl.TLSVersion.TLSv1_2, True),
                            (ssl.TLSVersion.TLSv1_3, True)):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(self.ca)
            # the client itself would speak the old version (OpenSSL 3 refuses it at its default level)
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            ctx.minimum_version = ctx.maximum_version = version
            with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as raw:
                if ok:
                    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                        self.assertEqual(s.version(), {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                                       ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version])
                else:
                    with self.assertRaises(ssl.SSLError) as cm:
                        ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                    self.assertIn("VERSION", str(cm.exception).upper())

    def test_plain_http_on_the_tls_port_gets_no_answer(self):
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self.assertNotIn(b"HTTP/1.1 200", data)

    def test_metrics_over_tls(self):
        conn = http.client.HTTPSConnection("127.0.0.1", self.d.metrics_port, context=client_context(self.ca), timeout=10)
        conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + TOKEN})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        self.assertEqual(r.status, 200, data)
        self.assertIn(b"plimsoll_runs_total", data)

    def test_sighup_reload_keeps_open_connections(self):
        keep = http.client.HTTPSConnection("127.0.0.1", self.d.port, context=client_context(self.ca), timeout=10)
        try:
            keep.request("GET", "/healthz")
            r = keep.getresponse()
            self.assertEqual((r.status, r.read()), (200, b"ok\n"))
            self.assertEqual(peer_cn(keep.sock), "plimsoll-a")
            before = len(self.d.events("tls_reloaded"))
            shutil.copy(os.path.join(self.tmp, "b.pem"), self.cert)
            shutil.copy(os.path.join(self.tmp, "b.key"), self.key)
            self.d.proc.send_signal(signal.SIGHUP)
            self.assertEqual(len(self.d.wait_events("tls_reloaded", n=before + 1)), before + 1, self.d.lines[-5:])
            # the open keep-alive connection goes on, on its old session
            for _ in range(3):
                keep.request("POST", PROC + "Describe", body=b"{}",
                             headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
                r = keep.getresponse()
                self.assertEqual(r.status, 200)
                r.read()
            self.assertEqual(peer_cn(keep.sock), "plimsoll-a")
            # a new handshake gets the new pair
            with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as raw:
                with client_context(self.ca).wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    self.assertEqual(peer_cn(s), "plimsoll-b")
            # a bad pair on disk: logged, the last good one kept
            failed = len(self.d.events("tls_reload_failed"))
            with open(self.cert, "w") as f:
                f.write("not a certificate\n")
            self.d.proc.send_signal(signal.SIGHUP)
            got = self.d.wait_events("tls_reload_failed", n=failed + 1)
            self.assertEqual(len(got), failed + 1)
            self.assertIn("PLIMSOLL_TLS_CERT", got[-1]["error"])
            with socket.create_connection(("127.0.0.1", self.d.port), timeout=10) as raw:
                with client_context(self.ca).wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    self.assertEqual(peer_cn(s), "plimsoll-b")
            st, _ = self.post("Describe", {})
            self.assertEqual(st, 200)
        finally:
            keep.close()
            shutil.copy(os.path.join(self.tmp, "a.pem"), self.cert)
            shutil.copy(os.path.join(self.tmp, "a.key"), self.key)


class TlsStartup(unittest.TestCase):
    """A half, unreadable or mismatched pair stops startup with a message naming the variable."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        make_pki(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def refused(self, env, needle):
        d = Daemon(dict({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_TOKEN": TOKEN}, **env), expect_start=False)
        rc = d.wait_exit(30)
        text = "\n".join(d.lines)
        self.assertNotEqual(rc, 0, text)
        self.assertIn(needle, text)
        self.assertFalse(d.events("listening"))

    def test_half_pair(self):
        self.refused({"PLIMSOLL_TLS_CERT": os.path.join(self.tmp, "a.pem")}, "PLIMSOLL_TLS_KEY")
        self.refused({"PLIMSOLL_TLS_KEY": os.path.join(self.tmp, "a.key")}, "PLIMSOLL_TLS_CERT")

    def test_unreadable_files(self):
        self.refused({"PLIMSOLL_TLS_CERT": os.path.join(self.tmp, "missing.pem"),
                      "PLIMSOLL_TLS_KEY": os.path.join(self.tmp, "a.key")}, "PLIMSOLL_TLS_CERT=")
        self.refused({"PLIMSOLL_TLS_CERT": os.path.join(self.tmp, "a.pem"),
                      "PLIMSOLL_TLS_KEY": os.path.join(self.tmp, "missing.key")}, "PLIMSOLL_TLS_KEY=")
        self.refused({"PLIMSOLL_TLS_CERT": os.path.join(self.tmp, "a.key"),
                      "PLIMSOLL_TLS_KEY": os.path.join(self.tmp, "a.key")}, "PLIMSOLL_TLS_CERT=")

    def test_mismatched_pair(self):
        self.refused({"PLIMSOLL_TLS_CERT": os.path.join(self.tmp, "a.pem"),
                      "PLIMSOLL_TLS_KEY": os.path.join(self.tmp, "b.key")}, "does not match PLIMSOLL_TLS_CERT")


if __name__ == "__main__":
    unittest.main(verbosity=2)
