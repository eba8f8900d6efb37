"""`plimsoll --backends FILE` against two real quickjs daemons, each with its own token (issue 24,
item 3): a run lands on the first backend that can take it and its card names it; each daemon is
sent its own token; a daemon that stops is passed over because the connection was refused before any
byte of the request (a long-lived `plimsoll mcp` that had described it: the card names it as refused
before), and a new client skips it because its Describe fails; a floor no backend states is refused before
anything is sent, naming each backend and why; `describe --backends` lists every daemon; an https daemon is verified against the CA its entry names
(without it, it is skipped); a bad
backends file or --backends with --url is a usage error. The four-provider fleet (docker runc,
runsc, microvm) is test_fleet.py's."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon  # noqa: E402
from test_tls import make_pki  # noqa: E402

TOK_A = "backend-a-token-0123456789abcdef0123"
TOK_B = "backend-b-token-0123456789abcdef0123"


def cli(*args, timeout=120):
    return subprocess.run([CLI] + list(args), capture_output=True, text=True, timeout=timeout)


class Backends(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        for name, tok in (("a.tok", TOK_A), ("b.tok", TOK_B)):
            with open(os.path.join(cls.tmp, name), "w") as f:
                f.write(tok + "\n")
        # b serves https with a certificate of the test's own CA: its entry names that CA.
        make_pki(cls.tmp)
        cls.a = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_TOKEN": TOK_A})
        cls.b = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_TOKEN": TOK_B,
                        "PLIMSOLL_TLS_CERT": os.path.join(cls.tmp, "b.pem"),
                        "PLIMSOLL_TLS_KEY": os.path.join(cls.tmp, "b.key")})
        cls.file = os.path.join(cls.tmp, "backends.json")
        with open(cls.file, "w") as f:
            # Relative token files are read against the backends file's own directory.
            json.dump([{"name": "a", "url": "http://127.0.0.1:%d" % cls.a.port, "token_file": "a.tok"},
                       {"name": "b", "url": "https://127.0.0.1:%d" % cls.b.port, "token_file": "b.tok",
                        "ca": "ca.pem"}], f)

    @classmethod
    def tearDownClass(cls):
        cls.b.stop()
        if cls.a.proc.poll() is None:
            cls.a.stop()
        shutil.rmtree(cls.tmp)

    def test_1_run_lands_on_the_first_with_its_own_token(self):
        a0, b0 = self.a.settled_count("run"), self.b.settled_count("run")
        r = cli("run", "--backends", self.file, "-e", "console.log(7)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "7\n")
        self.assertRegex(r.stderr, r"\nbackend: +a\n")
        self.assertNotIn("refused before:", r.stderr)
        self.a.wait_events("run", n=a0 + 1, timeout=10)
        self.assertEqual(self.b.settled_count("run"), b0)
        j = json.loads(cli("run", "--backends", self.file, "--json", "-e", "1").stdout)
        self.assertEqual((j["verdict"], j["backend"], j["refused_before"]), ("ran", "a", []))

    def test_2_floor_no_backend_states_is_refused_before_sending(self):
        a0, b0 = self.a.settled_count("run"), self.b.settled_count("run")
        r = cli("run", "--backends", self.file, "--min-isolation", "vm", "--json", "-e", "1")
        self.assertEqual(r.returncode, 200, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["verdict"], "refused")
        self.assertIsNone(j["backend"])
        self.assertEqual([(s["backend"], s["why"]) for s in j["skipped"]],
                         [("a", "isolation process is below the floor vm"),
                          ("b", "isolation process is below the floor vm")])
        self.assertIn("nothing was sent", j["error"]["message"])
        self.assertEqual((self.a.settled_count("run"), self.b.settled_count("run")), (a0, b0))

    def test_3_describe_lists_every_backend(self):
        r = cli("describe", "--backends", self.file)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("== backend a (http://127.0.0.1:%d) ==" % self.a.port, r.stdout)
        self.assertIn("== backend b (https://127.0.0.1:%d) ==" % self.b.port, r.stdout)
        j = json.loads(cli("describe", "--backends", self.file, "--json").stdout)
        self.assertEqual(sorted(j), ["a", "b"])
        self.assertEqual(j["a"]["sandbox"], "quickjs")

    def test_4_usage_errors(self):
        self.assertEqual(cli("run", "--backends", self.file, "--url", "http://x", "-e", "1").returncode, 204)
        bad = os.path.join(self.tmp, "bad.json")
        for content, words in (('[{"name": "a"}]', "entry 1"), ('{"name": "a"}', "non-empty JSON array"),
                               ('[{"name": "a", "url": "http://x", "tokenfile": "t"}]', "unknown key"),
                               ('[{"name": "a", "url": "http://x", "token_file": "missing.tok"}]', "missing.tok")):
            with open(bad, "w") as f:
                f.write(content)
            r = cli("run", "--backends", bad, "-e", "1")
            self.assertEqual(r.returncode, 204, r.stderr)
            self.assertIn(words, r.stderr)

    def test_4b_tls_needs_the_named_ca(self):
        # b's certificate verifies only against the CA its entry names; without it b's Describe fails
        # the TLS handshake and b is skipped: nothing is sent to a daemon that was not verified.
        plain = os.path.join(self.tmp, "no-ca.json")
        with open(plain, "w") as f:
            json.dump([{"name": "b", "url": "https://127.0.0.1:%d" % self.b.port, "token_file": "b.tok"}], f)
        b0 = self.b.settled_count("run")
        r = cli("run", "--backends", plain, "--json", "-e", "1")
        self.assertEqual(r.returncode, 200, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual([s["backend"] for s in j["skipped"]], ["b"])
        self.assertIn("Describe failed", j["skipped"][0]["why"])
        self.assertEqual(self.b.settled_count("run"), b0)

    def test_5_a_stopped_daemon_is_passed_over(self):
        # The last test: daemon a stops. A long-lived `plimsoll mcp` described it while it was up;
        # its next call reaches a's port, the connection is refused before any byte of the request,
        # so nothing ran there and b takes the call: the card names a as refused before.
        mcp = subprocess.Popen([CLI, "mcp", "--backends", self.file], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        try:
            def call(i, msg):
                mcp.stdin.write(json.dumps(dict(msg, jsonrpc="2.0", id=i)) + "\n")
                mcp.stdin.flush()
                return json.loads(mcp.stdout.readline())

            call(1, {"method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                        "clientInfo": {"name": "t", "version": "1"}}})
            run = {"method": "tools/call", "params": {"name": "run_javascript", "arguments": {"code": "1"}}}
            first = call(2, run)["result"]["structuredContent"]
            self.assertEqual((first["verdict"], first["backend"]), ("ran", "a"))
            self.assertEqual(self.a.stop(), 0)
            b0 = self.b.settled_count("run")
            second = call(3, run)["result"]["structuredContent"]
            self.assertEqual((second["verdict"], second["backend"]), ("ran", "b"))
            self.assertEqual([r["backend"] for r in second["refused_before"]], ["a"])
            self.assertIn("not reached", second["refused_before"][0]["why"])
            self.b.wait_events("run", n=b0 + 1, timeout=10)
        finally:
            mcp.stdin.close()
            self.assertEqual(mcp.wait(timeout=60), 0)
            mcp.stdout.close()
        b0 = self.b.settled_count("run")
        r = cli("run", "--backends", self.file, "-e", "console.log(8)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "8\n")
        self.assertRegex(r.stderr, r"\nbackend: +b\n")
        self.b.wait_events("run", n=b0 + 1, timeout=10)
        # A fresh client describes a again, cannot reach it, and skips it without sending.
        j = json.loads(cli("run", "--backends", self.file, "--json", "-e", "1").stdout)
        self.assertEqual(j["backend"], "b")
        self.assertEqual([s["backend"] for s in j["skipped"]], ["a"])
        self.assertIn("Describe failed", j["skipped"][0]["why"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
