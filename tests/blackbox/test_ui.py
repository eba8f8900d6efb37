"""The PLIMSOLL_UI page in a real browser (issue 15): Debian's headless chromium driven over the
DevTools protocol against the real daemon. The page loads with no console error and no request
to another origin; a floor above the proven tier shows the refusal verdict, at or below shows
admission (live, and without JavaScript); runs made with the CLI appear as cards identical to
the ones `plimsoll run` printed. Screenshots go to <build>/ui-screenshots/."""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cdp import Browser  # noqa: E402
from harness import CLI, DAEMON, Daemon  # noqa: E402

ENV = {"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1", "PLIMSOLL_UI": "1", "SANDBOX_RATE_PER_MIN": "0"}
TOKEN = "u" * 40
# <build>/src/daemon/plimsolld -> <build>/ui-screenshots
SHOTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(DAEMON)))), "ui-screenshots")
REFUSAL = "Run refused before dispatch: actual wall process is below the floor %s."
NO_EVIDENCE = "No runtime evidence exists because the code did not start."


def cli_card(stderr):
    """The card `plimsoll run` printed, without its duration line (the daemon sees no round trip)."""
    card = stderr[stderr.index("--- plimsoll run card ---"):]
    return [l for l in card.splitlines() if not l.startswith("duration:")]


def page_card(text):
    return [l for l in text.splitlines() if not l.startswith("duration:")]


class Page(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(ENV)
        cls.origin = "http://127.0.0.1:%d" % cls.d.port
        cls.b = Browser()
        cls.b.call("Page.enable")
        cls.b.call("Runtime.enable")
        cls.b.call("Log.enable")
        cls.b.call("Network.enable")
        cls.b.call("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 900, "deviceScaleFactor": 1,
                                                          "mobile": False})

    @classmethod
    def tearDownClass(cls):
        cls.b.close()
        assert cls.d.stop() == 0

    def setUp(self):
        self.mark = len(self.b.events)

    def problems(self):
        """Console errors, uncaught exceptions, error log entries (CSP violations, failed loads)
        and requests to any other origin, since setUp."""
        out = []
        for e in self.b.events[self.mark:]:
            m, p = e["method"], e["params"]
            if m == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert", "warning"):
                out.append("console %s: %s" % (p["type"], [a.get("value") for a in p["args"]]))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: %s" % p["exceptionDetails"].get("text"))
            elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append("log %s: %s" % (p["entry"]["level"], p["entry"]["text"]))
            elif m == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith(self.origin + "/"):
                    out.append("external request: " + url)
        return out

    def requests(self):
        return [e["params"]["request"]["url"] for e in self.b.events[self.mark:]
                if e["method"] == "Network.requestWillBeSent"]

    def choose(self, floor):
        self.b.eval("(() => { const s = document.getElementById('floor'); s.value = %s;"
                    " s.dispatchEvent(new Event('change', {bubbles: true})); })()" % json.dumps(floor))
        want = floor or "not set"
        self.b.wait_for("document.getElementById('floor-cap').textContent === %s && "
                        "location.search === %s" % (json.dumps(want), json.dumps("?floor=" + floor if floor else "")))

    def state(self):
        return self.b.eval("document.getElementById('verdict').dataset.state")

    def text(self, id_):
        return self.b.eval("document.getElementById(%s).textContent" % json.dumps(id_))

    def test_1_interlock_live(self):
        self.b.navigate(self.origin + "/ui")
        self.assertEqual(self.b.eval("document.title"), "plimsoll: quickjs at process")
        self.assertEqual(self.state(), "none")
        self.assertEqual(self.b.eval("document.querySelector('#gauge li.waterline').dataset.tier"), "process")
        # Above the proven tier: the refusal, with the card `plimsoll run` would print.
        for floor in ("vm", "kernel", "container"):
            self.choose(floor)
            self.assertEqual(self.state(), "refused", floor)
            self.assertEqual(self.text("verdict-headline"), REFUSAL % floor)
            self.assertTrue(self.text("verdict-detail").startswith(NO_EVIDENCE))
            card = self.text("verdict-card")
            self.assertIn("verdict:         refused before dispatch: isolation (no code ran)", card)
            self.assertIn("requested floor: " + floor, card)
            self.assertIn("floor-above", self.b.eval("document.querySelector('#gauge li.floor').className"))
            if floor == "vm":
                self.b.screenshot(os.path.join(SHOTS, "ui-refused.png"))
                self.b.screenshot(os.path.join(SHOTS, "ui-interlock.png"), clip=(0, 0, 1200, 680))
        # At or below: admission, and no refusal card.
        self.choose("process")
        self.assertEqual(self.state(), "admitted")
        self.assertEqual(self.text("verdict-headline"), "Admitted: the actual wall process meets the floor process.")
        self.assertTrue(self.b.eval("document.getElementById('verdict-card').hidden"))
        self.b.screenshot(os.path.join(SHOTS, "ui-admitted.png"))
        self.choose("")
        self.assertEqual(self.state(), "none")
        # The verdicts came from the daemon, not from the page.
        self.assertTrue(any("/ui/verdict?floor=vm" in u for u in self.requests()))
        self.assertEqual(self.problems(), [])

    def test_2_cli_runs_appear_as_cards(self):
        ran = subprocess.run([CLI, "run", "--url", self.origin, "-e", 'console.log("card", 6*7)'],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        refused = subprocess.run([CLI, "run", "--url", self.origin, "--min-isolation", "vm", "-e", "1"],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 200, refused.stderr)
        rid_ran = re.search(r"request id:\s+([0-9a-f]{32})", ran.stderr).group(1)
        rid_refused = re.search(r"request id:\s+([0-9a-f]{32})", refused.stderr).group(1)
        self.b.navigate(self.origin + "/ui")
        for rid, cls, out in ((rid_ran, "ran", ran), (rid_refused, "refused", refused)):
            sel = json.dumps("li.run[data-request-id='%s']" % rid)
            self.assertEqual(self.b.eval("document.querySelector(%s).classList.contains(%s)" % (sel, json.dumps(cls))),
                             True, cls)
            shown = self.b.eval("document.querySelector(%s + ' pre.card').textContent" % sel)
            self.assertEqual(page_card(shown), cli_card(out.stderr))
            # Never the code or its output.
            self.assertNotIn("card 42", shown)
            self.assertFalse(self.b.eval("document.querySelector(%s + ' button.copy').hidden" % sel))
        self.assertNotIn("6*7", self.b.eval("document.body.innerHTML"))
        # Refusals look different from runs.
        colours = self.b.eval("[...document.querySelectorAll('li.run.ran, li.run.refused')].map("
                              "l => l.className + ' ' + getComputedStyle(l).borderLeftColor)")
        ran_c = {c.split(" ", 2)[2] for c in colours if " ran " in c + " "}
        ref_c = {c.split(" ", 2)[2] for c in colours if "refused" in c}
        self.assertTrue(ran_c and ref_c and not (ran_c & ref_c), colours)
        self.b.screenshot(os.path.join(SHOTS, "ui-runs.png"))
        self.assertEqual(self.problems(), [])

    def test_3_without_javascript(self):
        self.b.call("Emulation.setScriptExecutionDisabled", {"value": True})
        try:
            self.b.navigate(self.origin + "/ui?floor=kernel")
            self.assertEqual(self.state(), "refused")
            self.assertEqual(self.text("verdict-headline"), REFUSAL % "kernel")
            self.assertIn("refused before dispatch: isolation (no code ran)", self.text("verdict-card"))
            # ui.js never ran: the copy buttons stay hidden, the form is a plain GET.
            self.assertTrue(self.b.eval("document.querySelector('button.copy') === null || "
                                        "document.querySelector('button.copy').hidden"))
            self.b.screenshot(os.path.join(SHOTS, "ui-nojs-refused.png"))
            self.b.navigate(self.origin + "/ui?floor=process")
            self.assertEqual(self.state(), "admitted")
            self.assertEqual(self.b.eval("document.getElementById('floor').value"), "process")
        finally:
            self.b.call("Emulation.setScriptExecutionDisabled", {"value": False})
        self.assertEqual(self.problems(), [])

    def test_4_accessible(self):
        self.b.navigate(self.origin + "/ui")
        # Every form control has a label; the language is set; the verdict is a live region.
        unlabeled = self.b.eval("[...document.querySelectorAll('select, input')].filter("
                                "c => !c.labels || c.labels.length === 0).map(c => c.id)")
        self.assertEqual(unlabeled, [])
        self.assertEqual(self.b.eval("document.documentElement.lang"), "en")
        self.assertEqual(self.b.eval("document.getElementById('verdict').getAttribute('aria-live')"), "polite")
        self.assertTrue(self.b.eval("[...document.querySelectorAll('button')].every(b => b.textContent.trim())"))
        # Keyboard: Tab reaches the floor selector.
        tabbed = []
        for _ in range(6):
            self.b.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Tab", "code": "Tab",
                                                   "windowsVirtualKeyCode": 9})
            self.b.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Tab", "code": "Tab",
                                                   "windowsVirtualKeyCode": 9})
            tabbed.append(self.b.eval("document.activeElement.id || document.activeElement.tagName"))
        self.assertIn("floor", tabbed)
        # Text contrast: the headline colours against their backgrounds, WCAG AA (4.5:1).
        ratio = self.b.eval("""(() => {
          const lum = c => { const v = c.match(/\\d+/g).slice(0, 3).map(x => { x /= 255;
            return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
            return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
          const el = document.getElementById('verdict-headline');
          const fg = lum(getComputedStyle(el).color);
          const bg = lum(getComputedStyle(document.getElementById('verdict')).backgroundColor);
          return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05); })()""")
        self.assertGreaterEqual(ratio, 4.5)
        self.assertEqual(self.problems(), [])

    def test_5_the_checks_can_fail(self):
        """Controls for the collectors above: an inline script is blocked by the CSP and the
        violation is seen as an error; a request elsewhere is blocked and seen too."""
        self.b.navigate(self.origin + "/ui")
        self.b.eval("(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1';"
                    " document.body.appendChild(s); })()")
        self.b.eval("fetch('http://192.0.2.1/x').catch(() => {})")
        self.b.pump(1.0)
        self.assertIsNone(self.b.eval("window.__inline"))
        got = self.problems()
        self.assertTrue(any("Content Security Policy" in p for p in got), got)


class Http(unittest.TestCase):
    """The same page over plain HTTP: headers, methods, authentication, off by default."""

    def test_headers_and_assets(self):
        with Daemon(ENV) as d:
            st, h, body = d.request("GET", "/")
            self.assertEqual(st, 200)
            csp = h["content-security-policy"]
            for part in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"):
                self.assertIn(part, csp)
            self.assertNotIn("unsafe", csp)
            self.assertEqual(h["x-content-type-options"], "nosniff")
            self.assertEqual(h["cache-control"], "no-store")
            html = body.decode()
            self.assertNotRegex(html, r"<script>|<style|\sstyle=|\son[a-z]+=")  # nothing inline
            self.assertNotRegex(html, r"(src|href)=\"(https?:)?//")  # nothing from elsewhere
            for path, ctype in (("/ui/ui.css", "text/css"), ("/ui/ui.js", "text/javascript"),
                                ("/ui/favicon.svg", "image/svg+xml")):
                st, h, _ = d.request("GET", path)
                self.assertEqual((st, h["content-type"].split(";")[0]), (200, ctype), path)
            st, h, _ = d.request("HEAD", "/ui")
            self.assertEqual(st, 200)
            self.assertEqual(d.request("POST", "/ui", b"x")[0], 405)
            self.assertEqual(d.request("GET", "/ui/nothing")[0], 404)
            st, _, body = d.request("GET", "/ui?floor=none")
            self.assertEqual(st, 400)
            self.assertIn(b"not one of process, container, kernel or vm", body)
            st, _, body = d.request("GET", "/ui/verdict?floor=%3Cscript%3E")
            self.assertEqual(st, 400)
            st, _, body = d.request("GET", "/ui/verdict?floor=vm")
            v = json.loads(body)
            self.assertEqual((v["state"], v["admitted"], v["tier"]), ("refused", False, "process"))
            # RPC paths are untouched by the UI.
            st, _, _, _ = d.call("Describe", {})
            self.assertEqual(st, 200)

    def test_same_auth_as_describe(self):
        env = dict(ENV, PLIMSOLL_TOKEN=TOKEN)
        del env["PLIMSOLL_INSECURE"]
        with Daemon(env) as d:
            st, h, _ = d.request("GET", "/ui")
            self.assertEqual(st, 401)
            self.assertEqual(h["www-authenticate"], "Bearer")
            self.assertEqual(d.request("GET", "/ui/ui.js")[0], 401)
            self.assertEqual(d.request("GET", "/ui", headers={"Authorization": "Bearer " + "x" * 40})[0], 401)
            self.assertEqual(d.request("GET", "/ui", headers={"Authorization": "Bearer " + TOKEN})[0], 200)
            # A run by a token holder is shown with its caller id, never the token.
            out = subprocess.run([CLI, "run", "--url", "http://127.0.0.1:%d" % d.port, "-e", "1"],
                                 env={"PLIMSOLL_TOKEN": TOKEN, "PATH": os.environ.get("PATH", "")},
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            _, _, body = d.request("GET", "/ui", headers={"Authorization": "Bearer " + TOKEN})
            self.assertIn(b"<dt>caller</dt><dd>static</dd>", body)
            self.assertNotIn(TOKEN.encode(), body)

    def test_off_by_default_and_bad_value(self):
        env = dict(ENV)
        del env["PLIMSOLL_UI"]
        with Daemon(env) as d:
            st, _, body = d.request("GET", "/ui")
            self.assertEqual(st, 404)
            self.assertEqual(json.loads(body)["code"], "unimplemented")
        d = Daemon(dict(ENV, PLIMSOLL_UI="yes"), expect_start=False)
        self.assertNotEqual(d.wait_exit(30), 0)
        self.assertTrue(any("PLIMSOLL_UI" in l for l in d.lines), d.lines)


if __name__ == "__main__":
    unittest.main(verbosity=2)
