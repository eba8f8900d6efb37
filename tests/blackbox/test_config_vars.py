"""Config honesty (issue 14 item 3): every variable, set alone, is implemented or stops startup.

The table is tests/data/config_vars.json, one row per variable. This test checks it against
`plimsolld -h` and against the reference's list (tests/data/reference_env.txt, itself checked
against the spec when PLIMSOLL_SPEC_DIR or the checkout's sibling ../shared/spec holds it), so a variable cannot be
added to either side without a row. Then, row by row, through the real daemon:
- implemented: the daemon starts with the row's value (unless the start needs a backend another
  suite owns, named in start_note), shows the row's effect, and every probe value stops startup
  with a message naming the variable; a provider-scoped variable stops startup on a provider
  that does not read it;
- absent: setting it stops startup, naming it;
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import DAEMON, Daemon  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
TOKEN = "t" * 40
STATUSES = {"implemented", "absent"}
PROVIDERS = {"disabled", "quickjs", "docker", "microvm", "e2b"}


LOGFMT_PAIR = re.compile(r'([a-z_][a-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^ "=]+)(?: |$)')
LOGFMT_ESC = re.compile(r'\\(x[0-9a-f]{2}|.)')


def unescape(m):
    e = m.group(1)
    if len(e) == 3 and e[0] == "x":
        return chr(int(e[1:], 16))
    return {"n": "\n", "t": "\t"}.get(e, e)


def parse_logfmt(line):
    """A logfmt line as a dict; None when the line is not wholly key=value pairs."""
    out, pos = {}, 0
    while pos < len(line):
        m = LOGFMT_PAIR.match(line, pos)
        if not m:
            return None
        v = m.group(2)
        out[m.group(1)] = LOGFMT_ESC.sub(unescape, v[1:-1]) if v.startswith('"') else v
        pos = m.end()
    return out


def load_table():
    with open(os.path.join(DATA, "config_vars.json")) as f:
        return json.load(f)["vars"]


def reference_names():
    names, not_vars = [], []
    with open(os.path.join(DATA, "reference_env.txt")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#not "):
                not_vars.append(line[5:])
            elif line and not line.startswith("#"):
                names.append(line)
    return names, not_vars


def help_names():
    out = subprocess.run([DAEMON, "-h"], capture_output=True, text=True, timeout=30, check=True).stdout
    return re.findall(r"^  ([A-Z][A-Z0-9_]+) ", out, re.M)


class Table(unittest.TestCase):
    """The table is whole: every variable of -h and of the reference has exactly one row."""

    def test_rows_are_well_formed(self):
        rows = load_table()
        names = [r["name"] for r in rows]
        self.assertEqual(len(names), len(set(names)), "duplicate rows")
        for r in rows:
            self.assertIn(r["status"], STATUSES, r["name"])
            self.assertIn("value", r, r["name"])
            if r["status"] == "implemented":
                # demonstrably read: an effect or at least one probe that stops startup
                self.assertTrue(r.get("effect") or r.get("probes"), r["name"])
                if r.get("start") is False:
                    self.assertTrue(r.get("start_note"), r["name"])
            for p in [r.get("provider", "disabled")] + r.get("readers", []):
                self.assertIn(p, PROVIDERS, r["name"])

    def test_every_help_variable_has_a_row(self):
        rows = {r["name"] for r in load_table()}
        listed = help_names()
        self.assertGreater(len(listed), 40)
        self.assertEqual(sorted(set(listed) - rows), [], "listed by plimsolld -h without a row")
        # and the other way round: nothing the daemon reads or refuses is missing from -h
        self.assertEqual(sorted(rows - set(listed)), [], "a row plimsolld -h does not list")

    def test_every_reference_variable_has_a_row(self):
        rows = {r["name"] for r in load_table()}
        names, _ = reference_names()
        self.assertEqual(sorted(set(names) - rows), [], "reference variables without a row")

    def test_reference_list_matches_the_spec(self):
        # The checkout's sibling ../shared/spec (a worktree one level deeper also finds it).
        spec = os.environ.get("PLIMSOLL_SPEC_DIR") or next(
            (d for d in (os.path.join(HERE, *[".."] * n, "shared", "spec") for n in (3, 4))
             if os.path.isfile(os.path.join(d, "wire.md"))), "")
        if not spec or not os.path.isfile(os.path.join(spec, "wire.md")):
            self.skipTest("the spec is not at hand (set PLIMSOLL_SPEC_DIR); tests/data/reference_env.txt is its copy")
        found = set()
        for f in ("wire.md", "providers.md", "sessions.md"):
            with open(os.path.join(spec, f)) as fh:
                found |= set(re.findall(r"\b(?:SANDBOX|PLIMSOLL|E2B|DOCKER_SBX)_[A-Z0-9_]+|\bDOCKER_HOST\b", fh.read()))
        names, not_vars = reference_names()
        self.assertEqual(sorted(found - set(names) - set(not_vars)), [], "spec variables missing from reference_env.txt")


class Rows(unittest.TestCase):
    """Each row through the real daemon."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="plimsoll-cfgvars-")
        with open(os.path.join(cls.tmp, "clients.json"), "w") as f:
            json.dump({"clients": [{"id": "ops", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                                    "scopes": ["code:run", "metrics"]}]}, f)
        with open(os.path.join(cls.tmp, "grants.json"), "w") as f:
            json.dump({"profiles": {"p": {"base_url": "https://api.example", "allow": ["GET /v1/*"],
                                          "allowed_callers": ["ops"]}}}, f)

    def fill(self, v):
        return v.replace("{tmp}", self.tmp).replace("{token}", TOKEN) if isinstance(v, str) else v

    def env_for(self, provider, extra):
        env = {"SANDBOX_PROVIDER": provider}
        if provider != "disabled":
            env["PLIMSOLL_INSECURE"] = "1"
        env.update({k: self.fill(v) for k, v in extra.items()})
        return env

    def stops(self, name, env, expect):
        d = Daemon(env, expect_start=False)
        try:
            rc = d.wait_exit(120)
        except subprocess.TimeoutExpired:
            d.kill()
            self.fail("%s: the daemon did not stop with %s" % (name, env))
        text = "\n".join(d.lines)
        self.assertNotEqual(rc, 0, "%s: started with %s:\n%s" % (name, env, text[-2000:]))
        self.assertIn(self.fill(expect), text, "%s: the startup error does not name it" % name)
        return text

    def check_effect(self, row, d, env):
        effect = row.get("effect") or {}
        authed = env.get("PLIMSOLL_TOKEN") or env.get("PLIMSOLL_CLIENTS_FILE")
        for k, want in effect.get("listening", {}).items():
            self.assertEqual(d.events("listening")[0].get(k), want, row["name"])
        if effect.get("no_metrics"):
            self.assertIsNone(d.metrics_port, row["name"])
        if effect.get("auth_required"):
            st, _, _, _ = d.call("Describe", {})
            self.assertEqual(st, 401, row["name"])
        if effect.get("ui"):
            st, hdrs, _ = d.request("GET", "/")
            self.assertEqual(st, 200, row["name"])
            self.assertIn("text/html", hdrs.get("content-type", ""))
        if "describe" in effect:
            st, _, data, _ = d.call("Describe", {}, token=TOKEN if authed else None)
            self.assertEqual(st, 200, data)
            body = json.loads(data)
            for path, want in effect["describe"].items():
                cur = body
                for part in path.split("."):
                    cur = cur.get(part) if isinstance(cur, dict) else None
                self.assertEqual(cur, want, "%s: Describe %s" % (row["name"], path))

    def check_log_text(self, env):
        """PLIMSOLL_LOG_FORMAT=text: every line the daemon writes is logfmt with ts, level and event,
        through startup, a refused run's audit line and the drain."""
        import signal
        import time
        d = Daemon(env, expect_start=False)
        try:
            deadline = time.monotonic() + 60
            listening = None
            while listening is None and time.monotonic() < deadline and d.proc.poll() is None:
                for line in list(d.lines):
                    f = parse_logfmt(line)
                    if f and f.get("event") == "listening":
                        listening = f
                time.sleep(0.05)
            self.assertIsNotNone(listening, "no logfmt listening line:\n" + "\n".join(d.lines))
            d.port = int(listening["port"])
            st, _, _, rid = d.call("Run", {"protocol": 3, "javascript": {"code": "1"}})
            self.assertEqual(st, 400)  # disabled provider: refused, with an audit line
            time.sleep(0.3)
            d.proc.send_signal(signal.SIGTERM)
            self.assertEqual(d.wait_exit(60), 0)
        finally:
            d.kill()
        parsed = [parse_logfmt(line) for line in d.lines]
        for line, f in zip(d.lines, parsed):
            self.assertIsNotNone(f, "not logfmt: %r" % line)
            for k in ("ts", "level", "event"):
                self.assertIn(k, f, line)
        events = [f["event"] for f in parsed]
        self.assertIn("stopped", events)
        runs = [f for f in parsed if f["event"] == "run"]
        self.assertEqual(len(runs), 1, d.lines)
        self.assertEqual(runs[0]["request_id"], rid)
        self.assertEqual(runs[0]["outcome"], "refused")

    def run_row(self, row):
        name = row["name"]
        provider = row.get("provider", "disabled")
        if row["status"] == "absent":
            env = self.env_for(provider, dict(row.get("env", {}), **{name: row["value"]}))
            self.stops(name, env, name)
            return "absent: stops startup"
        notes = []
        if row.get("start", True) and (row.get("effect") or {}).get("log_text"):
            self.check_log_text(self.env_for(provider, dict(row.get("env", {}), **{name: row["value"]})))
            notes.append("starts with its effect")
        elif row.get("start", True):
            env = self.env_for(provider, dict(row.get("env", {}), **{name: row["value"]}))
            with Daemon(env) as d:
                self.check_effect(row, d, env)
            notes.append("starts" + (" with its effect" if row.get("effect") else ""))
        else:
            notes.append("start in " + row["start_note"])
        for p in row.get("probes", []):
            env = self.env_for(p.get("env", {}).get("SANDBOX_PROVIDER", "disabled"),
                               dict(p.get("env", {}), **{name: p["value"]}))
            self.stops(name, env, p.get("expect", name))
        notes.append("%d probes stop startup" % len(row.get("probes", [])))
        readers = row.get("readers")
        if readers:
            other = "disabled" if "disabled" not in readers else "quickjs"
            self.stops(name, self.env_for(other, {name: row["value"]}), name)
            notes.append("stops on %s" % other)
        return ", ".join(notes)

    def test_every_row(self):
        for row in load_table():
            with self.subTest(var=row["name"]):
                note = self.run_row(row)
                print("%-32s %-11s %s" % (row["name"], row["status"], note), file=sys.stderr)


class ReferenceZeros(unittest.TestCase):
    """Issue 19 item 9: the reference's zeros mean "no per-caller cap" and "a burst of the rate"."""

    def test_rate_burst_zero_is_the_rate(self):
        # disabled runs spend a rate token (admission precedes its refusal), so the bucket shows
        with Daemon({"SANDBOX_RATE_PER_MIN": "2", "SANDBOX_RATE_BURST": "0"}) as d:
            self.assertEqual(d.events("listening")[0]["rate_burst"], 2)
            codes = []
            for _ in range(3):
                _, _, data, _ = d.call("Run", {"protocol": 3, "javascript": {"code": "1"}})
                codes.append((json.loads(data)["code"], json.loads(data)["message"]))
            self.assertEqual([c for c, _ in codes[:2]], ["failed_precondition"] * 2, codes)
            self.assertEqual(codes[2], ("resource_exhausted", "rate limit: 2 runs/min per caller"))

    def per_key(self, value):
        """Two runs of one caller at once (the second sent while the first holds its slot)."""
        import threading
        import time
        env = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
               "SANDBOX_MAX_CONCURRENT": "2", "SANDBOX_PER_KEY_CONCURRENT": value}
        with Daemon(env) as d:
            first = {}
            slow = {"protocol": 3, "timeoutMs": 20000,
                    "javascript": {"code": "const t = Date.now(); while (Date.now() - t < 3000) {}"}}
            th = threading.Thread(target=lambda: first.update(ans=d.call("Run", slow)))
            th.start()
            deadline = time.monotonic() + 15
            while d.metrics()["plimsoll_inflight"] < 1:
                self.assertLess(time.monotonic(), deadline, "the first run never held its slot")
                time.sleep(0.02)
            st, _, data, _ = d.call("Run", {"protocol": 3, "javascript": {"code": "console.log(2)"}})
            th.join()
            self.assertEqual(first["ans"][0], 200, first["ans"][2])
            return d.events("listening")[0]["per_key_concurrent"], st, json.loads(data)

    def test_per_key_zero_is_no_cap(self):
        cap, st, body = self.per_key("0")
        self.assertEqual(cap, 2)  # the global cap is the only one
        self.assertEqual(st, 200, body)
        cap, st, body = self.per_key("1")  # the contrast: a cap of 1 sheds the second run
        self.assertEqual((cap, st, body["code"]), (1, 429, "resource_exhausted"), body)
        self.assertIn("per-caller concurrency limit", body["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
