"""The caller's context through the real daemon on the quickjs provider (issue 23, sessions.md
checklist items 14 and 37; docs/protocol.md "Deadlines and a caller gone").

- Connect-Timeout-Ms is read strictly: 1 to 10 digits, sent once, else invalid_argument, marked
  `request` by header, before any handler.
- An open whose client went away leaves no session: the daemon logs the abandoned open, holds no
  slot, and the only place (SANDBOX_MAX_SESSIONS=1) is free for the next open.
- A close past its deadline answers 504 deadline_exceeded; a later close collects the session.
- A Run whose deadline is shorter than its timeout ends at the deadline as a timed-out result.
"""
import json
import os
import secrets
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import DETAIL, PROC, Daemon, WireCase, js  # noqa: E402

ENV = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0", "SANDBOX_MAX_CONCURRENT": "4",
       "SANDBOX_PER_KEY_CONCURRENT": "4", "SANDBOX_MAX_SESSIONS": "1", "SANDBOX_SESSION_IDLE": "1m"}


class Deadlines(WireCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(ENV)

    @classmethod
    def tearDownClass(cls):
        cls.d.__exit__(None, None, None)

    def open(self):
        st, _, data, _ = self.d.call("OpenSession", {"protocol": 3})
        self.assertEqual(st, 200, data)
        return json.loads(data)["sessionId"]

    def close(self, sid, extra=None):
        return self.d.call("CloseSession", {"protocol": 3, "sessionId": sid}, extra=extra)

    def inflight(self):
        return self.d.metrics().get("plimsoll_inflight", 0)

    def test_bad_timeout_header_is_refused_before_the_handler(self):
        opened = self.d.settled_count("session_opened")
        for bad in ("abc", "-5", "+5", "12345678901", "5ms", "1.5", "0x10", ""):
            with self.subTest(value=bad):
                st, hdrs, data, _ = self.d.call("OpenSession", {"protocol": 3},
                                                extra={"Connect-Timeout-Ms": bad})
                self.assertEqual(st, 400, data)
                self.assertEqual(json.loads(data)["code"], "invalid_argument")
                self.assertEqual(hdrs.get("plimsoll-not-dispatched"), "request")
        # sent twice: which one would count is not for the daemon to guess
        head = ("POST %sDescribe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Connect-Timeout-Ms: 1000\r\nConnect-Timeout-Ms: 2000\r\nContent-Length: 2\r\n"
                "Connection: close\r\n\r\n{}" % PROC)
        with socket.create_connection(("127.0.0.1", self.d.port), timeout=30) as s:
            s.sendall(head.encode())
            got = b""
            while chunk := s.recv(65536):
                got += chunk
        self.assertTrue(got.startswith(b"HTTP/1.1 400 "), got[:200])
        self.assertIn(b"Plimsoll-Not-Dispatched: request", got)
        self.assertEqual(self.d.settled_count("session_opened"), opened)
        # a well-formed one is a deadline like any other
        st, _, data, _ = self.d.call("Describe", {}, extra={"Connect-Timeout-Ms": "60000"})
        self.assertEqual(st, 200, data)

    def test_open_whose_caller_went_away_leaves_no_session(self):
        rid = secrets.token_hex(16)
        body = json.dumps({"protocol": 3}).encode()
        head = ("POST %sOpenSession HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Plimsoll-Request-Id: %s\r\nContent-Length: %d\r\n\r\n" % (PROC, rid, len(body)))
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=30)
        # corked: the request and the FIN leave in one segment, so the daemon reads the request
        # with the client already gone (whatever the scheduler does between the two calls)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        s.sendall(head.encode() + body)
        s.shutdown(socket.SHUT_WR)
        s.close()
        gone = self.d.wait_events("session_open_abandoned", lambda e: e.get("request_id") == rid, timeout=30)
        self.assertEqual(len(gone), 1, "\n".join(self.d.lines[-20:]))
        self.assertEqual(gone[0]["code"], "canceled")
        self.assertIn(gone[0]["found_at"], ("admission", "opened"))
        self.assertEqual([e for e in self.d.events("session_opened") if e.get("request_id") == rid], [])
        self.assertEqual(self.inflight(), 0)
        # the only place is free: an open succeeds, and is closed again
        sid = self.open()
        st, _, data, _ = self.close(sid)
        self.assertEqual(st, 200, data)

    def test_close_past_its_deadline_then_a_later_close_collects(self):
        # A 1 ms deadline usually passes while the sandbox goes; a close that is done within it is
        # a plain success (the session is gone). Try again until one is late (a few tries at most).
        for _ in range(5):
            sid = self.open()
            st, hdrs, data, _ = self.close(sid, extra={"Connect-Timeout-Ms": "1"})
            if st != 200:
                break
            self.assertEqual(json.loads(data)["ended"], "SESSION_END_CLOSED")
        self.assertEqual(st, 504, data)
        body = json.loads(data)
        self.assertEqual(body["code"], "deadline_exceeded")
        details = body.get("details", [])
        if details:  # the deadline passed before the turn: refused, the session untouched
            self.assertEqual(details[0]["value"], DETAIL["capacity"])
        else:        # it passed while the sandbox went: unmarked, the entry kept for a later close
            self.assertIn("close it again", body["message"])
        st, _, data, _ = self.close(sid)
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data)["ended"], "SESSION_END_CLOSED")
        st, _, data, _ = self.close(sid)  # collected: a third close finds nothing
        self.assertEqual(st, 404, data)
        body = json.loads(data)
        self.assertEqual(body["code"], "not_found")
        self.assertEqual(body["details"][0]["value"], DETAIL["request"])
        self.assertEqual(self.inflight(), 0)

    def test_run_deadline_shorter_than_its_timeout(self):
        st, _, data, _ = self.d.call("Run", js("while(true){}", timeoutMs=60000),
                                     extra={"Connect-Timeout-Ms": "1500"})
        self.assertEqual(st, 200, data)
        self.assertTrue(json.loads(data)["javascript"]["timedOut"])

    def test_deadline_already_passed_refuses_a_run(self):
        st, hdrs, data, _ = self.d.call("Run", js("console.log(1)"), extra={"Connect-Timeout-Ms": "0"})
        self.assertEqual(st, 504, data)
        body = json.loads(data)
        self.assertEqual(body["code"], "deadline_exceeded")
        self.assertEqual(body["details"][0]["value"], DETAIL["capacity"])


if __name__ == "__main__":
    unittest.main()
