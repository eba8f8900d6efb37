"""`plimsoll mcp` driven over stdio like an MCP host would (issue 15): initialize, tools/list,
tools/call for a snippet (output and card), a below-floor call (a tool error: refused, no code
ran), a daemon that is down (a clear tool error), and hostile framing from the host."""
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon  # noqa: E402

ENV = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0"}
TOKEN = "t" * 40


class Host:
    """One `plimsoll mcp` process spoken to line by line, as an MCP host does."""

    def __init__(self, *args, env=None):
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                full[k] = os.environ[k]
        full.update(env or {})
        self.proc = subprocess.Popen([CLI, "mcp", *args], env=full, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def answer(self, timeout=60):
        raw = self.lines.get(timeout=timeout)
        assert raw is not None, "plimsoll mcp closed its output"
        assert raw.endswith(b"\n")
        return json.loads(raw)

    def no_answer(self, wait=0.5):
        try:
            raw = self.lines.get(timeout=wait)
        except queue.Empty:
            return True
        raise AssertionError("unexpected answer: %r" % raw)

    def request(self, method, params=None):
        i = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": i, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        a = self.answer()
        assert a.get("id") == i and a.get("jsonrpc") == "2.0", a
        return a

    def initialize(self, version="2025-06-18"):
        a = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "test-host", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return a

    def call(self, name, arguments):
        a = self.request("tools/call", {"name": name, "arguments": arguments})
        assert "result" in a, a
        return a["result"]

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(30)
        err = self.proc.stderr.read().decode("utf-8", "replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, err


def texts(result):
    return [c["text"] for c in result["content"] if c["type"] == "text"]


class Mcp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(ENV)
        cls.url = "http://127.0.0.1:%d" % cls.d.port

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def host(self, *args, **kw):
        h = Host("--url", self.url, *args, **kw)
        self.addCleanup(self._close, h)
        return h

    def _close(self, h):
        if h.proc.poll() is None:
            rc, err = h.close()
            self.assertEqual(rc, 0, err)

    def runs(self):
        return len(self.d.events("run"))

    def test_initialize_and_list(self):
        h = self.host()
        a = h.initialize("2025-06-18")
        r = a["result"]
        self.assertEqual(r["protocolVersion"], "2025-06-18")
        self.assertIn("tools", r["capabilities"])
        self.assertEqual(r["serverInfo"]["name"], "plimsoll")
        tools = {t["name"]: t for t in h.request("tools/list")["result"]["tools"]}
        self.assertEqual(set(tools), {"run_javascript", "describe"})
        schema = tools["run_javascript"]["inputSchema"]
        self.assertEqual(schema["required"], ["code"])
        self.assertEqual(schema["properties"]["min_isolation"]["enum"], ["process", "container", "kernel", "vm"])
        self.assertIn("timeout", schema["properties"])
        self.assertEqual(h.request("ping")["result"], {})

    def test_version_negotiation(self):
        h = self.host()
        self.assertEqual(h.initialize("2025-11-25")["result"]["protocolVersion"], "2025-11-25")
        h2 = self.host()
        self.assertEqual(h2.initialize("1999-01-01")["result"]["protocolVersion"], "2025-11-25")

    def test_snippet_output_and_card(self):
        h = self.host()
        h.initialize()
        res = h.call("run_javascript", {"code": 'console.log("mcp", 6*7); console.error("e")', "timeout": 5})
        self.assertIs(res["isError"], False, res)
        text, card = texts(res)
        self.assertIn("stdout:\nmcp 42\n", text)
        self.assertIn("stderr:\ne\n", text)
        self.assertIn("--- plimsoll run card ---", card)
        self.assertRegex(card, r"verdict:\s+ran\n")
        self.assertRegex(card, r"actual tier:\s+process\n")
        self.assertRegex(card, r"record:\s+v2 [0-9a-f]{64} \(checked\)")
        sc = res["structuredContent"]
        self.assertEqual(sc["verdict"], "ran")
        self.assertEqual(sc["code_ran"], "yes")
        self.assertEqual(sc["stdout"], "mcp 42\n")
        self.assertTrue(sc["record"]["verified"])
        self.assertIn(sc["request_id"], card)
        # The daemon saw this very request id (the card is bound to it).
        self.assertTrue(self.d.wait_events("run", lambda e: e.get("request_id") == sc["request_id"]))

    def test_guest_failure_is_a_result_not_a_tool_error(self):
        h = self.host()
        h.initialize()
        res = h.call("run_javascript", {"code": 'throw new Error("boom")'})
        self.assertIs(res["isError"], False)
        self.assertNotEqual(res["structuredContent"]["exit_code"], 0)
        self.assertIn("boom", res["structuredContent"]["stderr"])

    def test_below_floor_is_refused_no_code_ran(self):
        h = self.host()
        h.initialize()
        res = h.call("run_javascript", {"code": 'console.log("must not run")', "min_isolation": "container"})
        self.assertIs(res["isError"], True)
        text, card = texts(res)
        self.assertIn("no code ran", text)
        self.assertIn("Refused before dispatch (isolation)", text)
        self.assertIn("refused before dispatch: isolation (no code ran)", card)
        self.assertNotIn("must not run", json.dumps(res))
        sc = res["structuredContent"]
        self.assertEqual((sc["verdict"], sc["code_ran"], sc["refusal_reason"]), ("refused", "no", "isolation"))
        ev = self.d.wait_events("run", lambda e: e.get("request_id") == sc["request_id"])
        self.assertEqual(ev[0]["outcome"], "refused")

    def test_daemon_down_is_a_clear_tool_error(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again before use: nothing listens there
        h = Host("--url", "http://127.0.0.1:%d" % port)
        self.addCleanup(self._close, h)
        h.initialize()
        res = h.call("run_javascript", {"code": "1"})
        self.assertIs(res["isError"], True)
        self.assertIn("could not be reached", texts(res)[0])
        self.assertIn("Nothing was sent; no code ran", texts(res)[0])
        self.assertEqual(res["structuredContent"]["verdict"], "transport_error")
        self.assertEqual(res["structuredContent"]["code_ran"], "no")
        d = h.call("describe", {})
        self.assertIs(d["isError"], True)
        self.assertIn("could not be described", texts(d)[0])

    def test_describe(self):
        h = self.host()
        h.initialize()
        res = h.call("describe", {})
        self.assertIs(res["isError"], False)
        self.assertRegex(texts(res)[0], r"provider:\s+quickjs")
        self.assertRegex(texts(res)[0], r"\[pass\] ")
        self.assertEqual(res["structuredContent"]["sandbox"], "quickjs")
        self.assertEqual(res["structuredContent"]["isolation"], "process")

    def test_bad_arguments_send_nothing(self):
        h = self.host()
        h.initialize()
        before = self.runs()
        for args in ({"code": 5}, {}, {"code": "1", "timeout": 0}, {"code": "1", "timeout": 301},
                     {"code": "1", "timeout": "5"}, {"code": "1", "min_isolation": "none"},
                     {"code": "1", "min_isolation": "VM"}, {"code": "1", "extra": True},
                     {"code": "x" * (256 * 1024 + 1)}):
            res = h.call("run_javascript", args)
            self.assertIs(res["isError"], True, args)
            self.assertIn("Nothing was sent; no code ran", texts(res)[0], args)
        # A NUL inside a JSON string is refused by the parser itself (jansson without ALLOW_NUL).
        h.send_raw(b'{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"run_javascript",'
                   b'"arguments":{"code":"a\\u0000b"}}}\n')
        self.assertEqual(h.answer()["error"]["code"], -32700)
        self.assertEqual(self.runs(), before)
        self.assertIs(h.call("describe", {"x": 1})["isError"], True)

    def test_protocol_errors(self):
        h = self.host()
        # Before initialize, tools are not served.
        a = h.request("tools/list")
        self.assertEqual(a["error"]["code"], -32600)
        h.initialize()
        h.send_raw(b"{not json\n")
        self.assertEqual(h.answer(), {"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32700, "message": "parse error"}})
        h.send_raw(b'[{"jsonrpc":"2.0","id":9,"method":"ping"}]\n')
        self.assertEqual(h.answer()["error"]["code"], -32600)
        h.send_raw(b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n')
        a = h.answer()
        self.assertEqual((a["id"], a["error"]["code"]), (None, -32600))
        h.send_raw(b'{"jsonrpc":"1.0","id":3,"method":"ping"}\n')
        self.assertEqual(h.answer()["error"]["code"], -32600)
        h.send_raw(b'{"jsonrpc":"2.0","id":"a","method":"ping","id":"b"}\n')  # duplicate key
        self.assertEqual(h.answer()["error"]["code"], -32700)
        self.assertEqual(h.request("no/such/method")["error"]["code"], -32601)
        self.assertEqual(h.request("tools/call", {"name": "rm_rf", "arguments": {}})["error"]["code"], -32602)
        self.assertEqual(h.request("tools/call", {"arguments": {}})["error"]["code"], -32602)
        self.assertEqual(h.request("tools/call", ["run_javascript"])["error"]["code"], -32602)
        # Notifications and responses are never answered; blank lines are skipped.
        h.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        h.send({"jsonrpc": "2.0", "id": 77, "result": {}})
        h.send_raw(b"\n  \r\n")
        h.no_answer()
        # An overlong line is skipped whole (one parse error), and the session goes on.
        h.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":"' + b"x" * (5 << 20) + b'"}}\n')
        a = h.answer()
        self.assertEqual((a["id"], a["error"]["code"]), (None, -32700))
        self.assertIn("longer than", a["error"]["message"])
        self.assertEqual(h.request("ping")["result"], {})
        # Control characters in ids and strings come back escaped: still one line per answer.
        h.send({"jsonrpc": "2.0", "id": "x\ny", "method": "ping"})
        self.assertEqual(h.answer()["id"], "x\ny")

    def test_eof_without_newline_and_exit(self):
        h = Host("--url", self.url)
        h.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        h.proc.stdin.close()
        self.assertEqual(h.answer()["result"], {})
        self.assertEqual(h.proc.wait(30), 0)
        h.proc.stdout.close()
        h.proc.stderr.close()

    def test_usage(self):
        out = subprocess.run([CLI, "mcp", "--bogus"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 204)
        out = subprocess.run([CLI, "mcp", "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0)
        self.assertIn("run_javascript", out.stdout)


class McpToken(unittest.TestCase):
    def test_token_file_and_missing_token(self):
        with Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_TOKEN": TOKEN}) as d:
            url = "http://127.0.0.1:%d" % d.port
            with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
                f.write(TOKEN + "\n")
                f.flush()
                h = Host("--url", url, "--token-file", f.name)
                h.initialize()
                res = h.call("run_javascript", {"code": "console.log(1)"})
                self.assertIs(res["isError"], False, res)
                self.assertEqual(h.close()[0], 0)
            # PLIMSOLL_URL and no token at all: refused before dispatch, no code ran.
            h = Host(env={"PLIMSOLL_URL": url})
            h.initialize()
            res = h.call("run_javascript", {"code": "console.log(1)"})
            self.assertIs(res["isError"], True)
            self.assertEqual(res["structuredContent"]["code"] if "code" in res["structuredContent"]
                             else res["structuredContent"]["error"]["code"], "unauthenticated")
            self.assertEqual(res["structuredContent"]["code_ran"], "no")
            self.assertEqual(h.close()[0], 0)


class McpSessions(unittest.TestCase):
    """Tools shaped by Describe (issue 19): runtime words, the grant argument, the session tools on
    a quickjs daemon with sessions on, and every open session closed when the host goes away."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(dict(ENV, SANDBOX_MAX_SESSIONS="4", SANDBOX_SESSION_IDLE="1m"))
        cls.url = "http://127.0.0.1:%d" % cls.d.port

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0

    def host(self):
        h = Host("--url", self.url)
        h.initialize()
        return h

    def test_descriptions_and_tools_follow_describe(self):
        h = self.host()
        tools = {t["name"]: t for t in h.request("tools/list")["result"]["tools"]}
        self.assertEqual(set(tools), {"run_javascript", "describe", "open_session", "run_cell", "close_session"})
        desc = tools["run_javascript"]["description"]
        self.assertIn("provider quickjs, isolation tier process", desc)
        self.assertIn("QuickJS", desc)
        self.assertIn("no require()", desc)
        self.assertIn("Time limit up to 30 s", desc)
        self.assertIn("grant", tools["run_javascript"]["inputSchema"]["properties"])  # quickjs proves grants
        self.assertEqual(tools["open_session"]["inputSchema"]["properties"]["language"]["enum"], ["javascript"])
        self.assertNotIn("run_python", tools)  # quickjs sessions list javascript only
        rc, err = h.close()
        self.assertEqual(rc, 0, err)

    def test_session_keeps_state_and_is_closed_at_eof(self):
        h = self.host()
        opened = self.d.events("session_opened")
        closed_before = self.d.settled_count("session_closed")
        r = h.call("open_session", {})
        self.assertIs(r["isError"], False, r)
        self.assertEqual(r["structuredContent"]["session"], "s1")
        self.assertNotRegex(texts(r)[0], r"[0-9a-f]{32}")  # the daemon's session id is never shown
        r = h.call("run_cell", {"session": "s1", "code": "globalThis.n = 20"})
        self.assertIs(r["isError"], False, r)
        r = h.call("run_cell", {"session": "s1", "code": "console.log(n + 1)"})
        self.assertIn("stdout:\n21\n", texts(r)[0])
        self.assertIn("[cell 2] exit 0", texts(r)[0])
        self.assertIn("chain ok", texts(r)[0])
        r = h.call("run_cell", {"session": "s1", "code": "throw new Error('x')"})
        self.assertIs(r["isError"], False, r)  # a guest failure is a result
        self.assertIn("[cell 3] exit 1", texts(r)[0])
        r = h.call("run_cell", {"session": "s9", "code": "1"})
        self.assertIs(r["isError"], True)
        self.assertIn("Nothing was sent", texts(r)[0])
        r = h.call("open_session", {"language": "cobol"})
        self.assertIs(r["isError"], True)
        r = h.call("open_session", {"min_isolation": "vm"})
        self.assertIs(r["isError"], True)
        self.assertIn("refused", texts(r)[0])
        r = h.call("open_session", {})
        self.assertEqual(r["structuredContent"]["session"], "s3")
        r = h.call("close_session", {"session": "s1"})
        self.assertIs(r["isError"], False, r)
        self.assertIn("3 calls", texts(r)[0])
        self.assertIs(h.call("run_cell", {"session": "s1", "code": "1"})["isError"], True)
        # the daemon's stderr is read on a thread: s1's audit line is waited for, not assumed
        self.assertEqual(len(self.d.wait_events("session_closed", n=closed_before + 1)), closed_before + 1)
        rc, err = h.close()  # s3 is still open: closed by the server at end of input
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(self.d.wait_events("session_closed", n=closed_before + 2)), closed_before + 2)
        self.assertEqual(len(self.d.wait_events("session_opened", n=len(opened) + 2)), len(opened) + 2)

    def test_grant_argument_checked(self):
        h = self.host()
        r = h.call("run_javascript", {"code": "1", "grant": "a b"})
        self.assertIs(r["isError"], True)
        self.assertIn("Nothing was sent", texts(r)[0])
        r = h.call("run_javascript", {"code": "1", "grant": "nope"})  # no grants file: refused
        self.assertIs(r["isError"], True)
        self.assertIn("no code ran", texts(r)[0])
        rc, err = h.close()
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
