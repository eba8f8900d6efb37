"""docs/dependencies.md against what runs (issue 26 §3): the version of every security-critical
component in the table must be what the daemons' evidence cards state (quickjs, docker under runc
and runsc, microvm, each started for real), what the fetch scripts pin, and what the build links.
A missing row, a missing card field or an unreadable pin fails: nothing here is skipped.
"""
import os
import re
import subprocess
import unittest
import json

from harness import Daemon

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(ROOT, "docs", "dependencies.md")
COMPONENTS = ("runsc (gVisor)", "runsc-bookworm (gVisor, old)", "docker / dockerd", "runc", "QEMU", "guest kernel",
              "QuickJS-ng", "libseccomp", "GnuTLS")


def table():
    """{component: version} from the table's first two columns (the version in backticks)."""
    rows = {}
    with open(DOC, encoding="utf-8") as f:
        lines = f.readlines()
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0] in COMPONENTS:
            m = re.fullmatch(r"`([^`]+)`", cells[1])
            if m:
                rows[cells[0]] = m.group(1)
    return rows


def pin(script, var):
    with open(os.path.join(ROOT, "scripts", script), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^%s=(\S+)" % var, text, re.M)
    if not m:
        raise AssertionError("%s: no %s= line" % (script, var))
    return m.group(1)


def card(env, timeout=60):
    with Daemon(dict({"PLIMSOLL_INSECURE": "1", "PLIMSOLL_METRICS_ADDR": "off"}, **env), timeout=timeout) as d:
        st, _, data, _ = d.call("Describe", {})
        if st != 200:
            raise AssertionError("Describe answered %d: %r" % (st, data[:200]))
        return json.loads(data)["evidence"]


class Dependencies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.v = table()

    def test_every_component_has_a_row(self):
        self.assertEqual(sorted(self.v), sorted(COMPONENTS))

    def test_pins_match_the_table(self):
        self.assertEqual(pin("fetch-runsc.sh", "RUNSC_VERSION"), self.v["runsc (gVisor)"])
        self.assertTrue(pin("fetch-runsc.sh", "DEB_VERSION").startswith(self.v["runsc (gVisor)"] + "-"))
        self.assertEqual(pin("microvm-setup.sh", "KREL"), self.v["guest kernel"])
        self.assertEqual(pin("fetch-quickjs-ng.sh", "VERSION"), self.v["QuickJS-ng"])

    def test_linked_libraries_match_the_table(self):
        for name, pc in (("libseccomp", "libseccomp"), ("GnuTLS", "gnutls")):
            got = subprocess.run(["pkg-config", "--modversion", pc], capture_output=True, text=True, check=True)
            self.assertEqual(got.stdout.strip(), self.v[name], name)

    def test_quickjs_card(self):
        ev = card({"SANDBOX_PROVIDER": "quickjs"})
        self.assertTrue(ev["runtimeVersion"].startswith(self.v["QuickJS-ng"] + " "), ev["runtimeVersion"])

    def test_docker_runc_card(self):
        ev = card({"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": "runc"})
        self.assertTrue(ev["runtimeVersion"].startswith(self.v["runc"] + "+"), ev["runtimeVersion"])
        engine = [c for c in ev["confinement"] if c.startswith("dockerd ")]
        self.assertEqual(len(engine), 1, ev["confinement"])
        self.assertTrue(engine[0].startswith("dockerd %s+" % self.v["docker / dockerd"]), engine[0])

    def test_docker_runsc_cards(self):
        for name, runtime, platform in (("runsc (gVisor)", "runsc", "systrap"),
                                        ("runsc-bookworm (gVisor, old)", "runsc-bookworm", "ptrace")):
            ev = card({"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": runtime})
            self.assertEqual(ev["isolation"], "kernel")
            self.assertEqual(ev["runtimeVersion"], "runsc version %s, platform %s" % (self.v[name], platform))

    def test_microvm_card(self):
        ev = card({"SANDBOX_PROVIDER": "microvm", "SANDBOX_MICROVM_ACCEL": "tcg"}, timeout=600)
        self.assertRegex(ev["runtimeVersion"], r"^QEMU emulator version %s\.[0-9]+ " % re.escape(self.v["QEMU"]))
        self.assertEqual(ev["kernelRelease"], self.v["guest kernel"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
