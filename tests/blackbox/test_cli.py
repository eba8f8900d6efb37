"""`plimsoll` against a real quickjs daemon (issue 19, item 4): the command table and help, the
`project` command's local checks (directory, symlinks, --out, --grant) and its refusal path,
`--grant` on `run` end to end through the broker, and the repl's multi-line cells, piped and on a
terminal (libedit). The project runs themselves need docker: test_cli_docker.py."""
import hashlib
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon, Upstream  # noqa: E402

UP_TOKEN = "upstream-secret-token-0123456789"


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


def cli(*args, inp=None, timeout=60):
    return subprocess.run([CLI] + list(args), input=inp, capture_output=True, text=True, timeout=timeout)


class Help(unittest.TestCase):
    def test_every_command_is_listed_and_has_help(self):
        top = cli("--help")
        self.assertEqual(top.returncode, 0)
        for name in ("describe", "run", "project", "repl", "mcp"):
            self.assertIn("\n  %s " % name, top.stdout)
            h = cli("help", name)
            self.assertEqual(h.returncode, 0, h.stderr)
            self.assertTrue(h.stdout.startswith("usage: plimsoll %s" % name), h.stdout)
            self.assertEqual(cli(name, "--help").stdout, h.stdout)
        self.assertIn("blank line", cli("help", "repl").stdout)
        self.assertIn("--grant PROFILE", cli("help", "run").stdout)
        self.assertIn("--grant PROFILE", cli("help", "project").stdout)
        bad = cli("help", "nope")
        self.assertEqual(bad.returncode, 204)
        self.assertEqual(cli("nope").returncode, 204)


class Quickjs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        cls.clients = os.path.join(cls.tmp, "clients.json")
        cls.grants = os.path.join(cls.tmp, "grants.json")
        cls.tok = os.path.join(cls.tmp, "alice.tok")
        with open(cls.tok, "w") as f:
            f.write("alice-tok\n")
        with open(cls.clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": sha("alice-tok"), "scopes": ["code:run"]}]}, f)
        with open(cls.grants, "w") as f:
            json.dump({"profiles": {"items": {"base_url": "http://127.0.0.1:%d" % cls.up.port,
                                              "allow": ["GET /v1/items/*"], "allowed_callers": ["alice"],
                                              "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        cls.d = Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_CLIENTS_FILE": cls.clients,
                        "PLIMSOLL_GRANTS_FILE": cls.grants, "ITEMS_TOKEN": UP_TOKEN, "SANDBOX_RATE_PER_MIN": "0",
                        "SANDBOX_MAX_SESSIONS": "4", "SANDBOX_SESSION_IDLE": "1m"})
        cls.url = "http://127.0.0.1:%d" % cls.d.port

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        cls.up.close()
        shutil.rmtree(cls.tmp)

    def c(self, *args, **kw):
        return cli(*args, "--url", self.url, "--token-file", self.tok, **kw)

    def runs(self):
        return len(self.d.events("run"))

    def settled_runs(self):
        return self.d.settled_count("run")

    def project_dir(self):
        p = tempfile.mkdtemp(dir=self.tmp)
        with open(os.path.join(p, "main.js"), "w") as f:
            f.write("console.log(1)\n")
        return p

    # ---- --grant on run ----
    def test_run_with_a_grant_reaches_the_api(self):
        n0 = len(self.up.seen)
        r = self.c("run", "--grant", "items", "-e",
                   'host.get("/v1/items/7").then(r => console.log(JSON.stringify(r)))')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"id": "7", "method": "GET"})
        self.assertEqual(self.up.seen[n0]["headers"].get("Authorization"), "Bearer " + UP_TOKEN)
        self.assertNotIn(UP_TOKEN, r.stdout + r.stderr)
        # an unknown profile is the daemon's refusal: nothing ran
        m = self.settled_runs()
        r = self.c("run", "--grant", "nope", "-e", "1")
        self.assertEqual(r.returncode, 200, r.stderr)
        self.assertIn("refused before dispatch: permission", r.stderr)
        # a malformed name never leaves the client (counted once the refusal's own audit line is in:
        # the daemon's log is read in the background)
        deadline = time.monotonic() + 10
        while self.runs() == m and time.monotonic() < deadline:
            time.sleep(0.05)
        n = self.runs()
        self.assertEqual(n, m + 1)
        for bad in ("", "a b", "x" * 129, "a/b"):
            r = self.c("run", "--grant", bad, "-e", "1")
            self.assertEqual(r.returncode, 204, (bad, r.stderr))
        r = self.c("run", "--grant", "items", "--grant", "items", "-e", "1")
        self.assertEqual(r.returncode, 204)
        time.sleep(0.2)
        self.assertEqual(self.runs(), n)

    # ---- project: local checks, nothing sent ----
    def test_project_local_refusals_send_nothing(self):
        p = self.project_dir()
        n = self.settled_runs()
        cases = [
            (["project", p], "no --step"),
            (["project", "--step", "ls"], "no DIR"),
            (["project", p, "--step", "ls", "--artifact", "../x"], "--artifact `../x`"),
            (["project", p, "--step", "ls", "--artifact", "/etc/passwd"], "--artifact `/etc/passwd`"),
            (["project", p, "--step", "ls", "--out", os.path.join(self.tmp, "o1")], "--out without --artifact"),
            (["project", p, "--step", "ls", "--grant", "no way"], "--grant"),
            (["project", p, "--step", "ls", "--min-isolation", "none"], "--min-isolation `none`"),
            (["project", p, "--step", "ls", "--timeout", "301"], "--timeout"),
            (["project", p, "--step", ""], "--step must be"),
            (["project", p] + ["--step", "ls"] * 21, "more than 20 steps"),
            (["project", os.path.join(self.tmp, "absent"), "--step", "ls"], "absent"),
        ]
        for args, words in cases:
            r = self.c(*args)
            self.assertEqual(r.returncode, 204, (args, r.stderr))
            self.assertIn(words, r.stderr, args)
        os.symlink("/etc/passwd", os.path.join(p, "leak"))
        r = self.c("project", p, "--step", "cat leak")
        self.assertEqual(r.returncode, 204)
        self.assertIn("symlink `leak` points outside the directory (to /etc/passwd)", r.stderr)
        os.unlink(os.path.join(p, "leak"))
        with open(os.path.join(p, "blob.bin"), "wb") as f:
            f.write(b"\x00\xff")
        r = self.c("project", p, "--step", "ls")
        self.assertEqual(r.returncode, 204)
        self.assertIn("`blob.bin` is not UTF-8 text", r.stderr)
        os.unlink(os.path.join(p, "blob.bin"))
        out = os.path.join(self.tmp, "full")
        os.mkdir(out)
        open(os.path.join(out, "keep"), "w").close()
        r = self.c("project", p, "--step", "ls", "--artifact", "a", "--out", out)
        self.assertEqual(r.returncode, 204)
        self.assertIn("is not empty", r.stderr)
        self.assertEqual(os.listdir(out), ["keep"])
        time.sleep(0.2)
        self.assertEqual(self.runs(), n)

    def test_an_option_given_twice_is_refused_by_every_command(self):
        # One rule in every command (src/cli/options.c): a single-valued option given twice is a
        # usage error naming it, never "the last one wins"; nothing is sent.
        p = self.project_dir()
        n = self.settled_runs()
        cases = [
            (["run", "-e", "1", "--url", "http://127.0.0.1:1", "--url", "http://127.0.0.1:2"], "--url given twice"),
            (["run", "-e", "1", "--min-isolation", "vm", "--min-isolation", "process"], "--min-isolation given twice"),
            (["run", "-e", "1", "-e", "2"], "--eval given twice"),
            (["project", p, "--step", "ls", "--token-file", "/a", "--token-file", "/b"], "--token-file given twice"),
            (["module", "m", "--rows", "1", "--rows", "2"], "--rows given twice"),
            (["describe", "--backends", "/a", "--backends", "/b"], "--backends given twice"),
            (["repl", "--min-isolation", "vm", "--min-isolation=process"], "--min-isolation given twice"),
            (["mcp", "--url", "http://127.0.0.1:1", "--url=http://127.0.0.1:2"], "--url given twice"),
        ]
        for args, words in cases:
            r = cli(*args)  # not self.c: it adds --url and --token-file of its own
            self.assertEqual(r.returncode, 204, (args, r.stderr))
            self.assertIn(words, r.stderr, args)
        self.assertEqual(self.settled_runs(), n)

    def test_project_refused_by_quickjs_leaves_no_out_dir(self):
        p = self.project_dir()
        out = os.path.join(self.tmp, "o2")
        r = self.c("project", p, "--step", "node main.js", "--artifact", "x", "--out", out)
        self.assertEqual(r.returncode, 200, r.stderr)
        self.assertIn("refused before dispatch: unsupported (no code ran)", r.stderr)
        self.assertIn("no artifacts written", r.stderr)
        self.assertFalse(os.path.exists(out))
        j = self.c("project", p, "--step", "ls", "--json")
        self.assertEqual(j.returncode, 200)
        self.assertEqual(json.loads(j.stdout)["verdict"], "refused")

    # ---- repl: multi-line cells ----
    def test_repl_cells_end_at_blank_lines_and_separators(self):
        cells = ("function f(x) {\n  return x + 1\n}\n\n\n"
                 "console.log(f(1))\n%%\n"
                 "let s = 0\nfor (let i = 0; i < 3; i++)\n  s += f(i)\nconsole.log(s)\n")
        r = self.c("repl", inp=cells)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "2\n6\n")
        self.assertEqual(r.stderr.count("chain ok"), 4, r.stderr)  # three cells and the close
        self.assertIn("SESSION_END_CLOSED] 3 calls", r.stderr)

    def test_repl_skips_an_oversize_cell_and_goes_on(self):
        big = "// " + "x" * (300 * 1024) + "\n"
        r = self.c("repl", inp="void (globalThis.k = 3)\n\n" + big + "\nconsole.log(k)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cell skipped: larger than 256 KiB", r.stderr)
        self.assertEqual(r.stdout, "3\n")
        self.assertIn("2 calls", r.stderr)

    def test_repl_on_a_terminal_edits_lines(self):
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(CLI, [CLI, "repl", "--url", self.url, "--token-file", self.tok])
        seen = b""

        def until(word, t=30):
            nonlocal seen
            end = time.monotonic() + t
            while word not in seen and time.monotonic() < end:
                r, _, _ = select.select([fd], [], [], 0.5)
                if r:
                    try:
                        seen += os.read(fd, 4096)
                    except OSError:
                        break
            return word in seen

        def prompt_after(n):
            """The prompt that follows the n-th cell's card line: only then is libedit reading
            again (typed-ahead keys would meet the terminal in cooked mode, as a user's would)."""
            end = time.monotonic() + 60
            while seen.count(b"chain ok\r\n> ") < n and time.monotonic() < end:
                until(b"\0", 0.5)
            return seen.count(b"chain ok\r\n> ") >= n

        try:
            self.assertTrue(until(b"> "), seen)
            os.write(fd, b"function g(x) {\r")
            self.assertTrue(until(b"... "), seen)  # the continuation prompt inside a cell
            os.write(fd, b"  return x * 2 }\r\r")
            self.assertTrue(prompt_after(1), seen)
            os.write(fd, b"console.log(g(21))\r\r")
            self.assertTrue(until(b"42"), seen)
            self.assertTrue(prompt_after(2), seen)
            # history: the up arrow recalls the last line, edited in place (backspace, new digit)
            os.write(fd, b"\x1b[A\x08\x08\x08\x085))\r\r")
            self.assertTrue(until(b"10"), seen)
            self.assertTrue(prompt_after(3), seen)
            os.write(fd, b"\x04")
            self.assertTrue(until(b"closed"), seen)
        finally:
            for _ in range(50):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, 9)
                _, status = os.waitpid(pid, 0)
            os.close(fd)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, seen)
        self.assertIn(b"3 calls", seen)


if __name__ == "__main__":
    unittest.main(verbosity=2)
