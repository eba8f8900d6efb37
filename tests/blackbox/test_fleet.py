"""The fleet on loopback (issue 24): four daemons, one per tier, each with its own token (quickjs =
process, docker runc = container, docker runsc = kernel, microvm = vm under TCG), behind one
`--backends` file. Floors process / container / kernel / vm land on the right daemon; a session
opened through the pool stays on its daemon; a stopped daemon is skipped because nothing reached it
and the next one that can take the floor answers; a `vm` floor with no vm daemon in the file is
refused before anything is sent, naming why for each backend. Needs dockerd with runsc and the
images of `make images`, and the microvm build artifacts."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon  # noqa: E402

SNIPPET_IMAGE = os.environ.get("PLIMSOLL_TEST_SNIPPET_IMAGE", "plimsoll/snippet:latest")
PROJECT_IMAGE = os.environ.get("PLIMSOLL_TEST_PROJECT_IMAGE", "plimsoll/project:latest")
SESSION_IMAGE = os.environ.get("PLIMSOLL_TEST_SESSION_IMAGE", "plimsoll/session:latest")
DOCKER = {"SANDBOX_PROVIDER": "docker", "SANDBOX_RATE_PER_MIN": "0", "SANDBOX_MAX_CONCURRENT": "4",
          "SANDBOX_PER_KEY_CONCURRENT": "4", "SANDBOX_DOCKER_IMAGE": SNIPPET_IMAGE,
          "SANDBOX_DOCKER_PROJECT_IMAGE": PROJECT_IMAGE, "SANDBOX_DOCKER_SESSION_IMAGE": SESSION_IMAGE,
          "SANDBOX_MAX_SESSIONS": "2"}
FLEET = [  # name, environment, expected tier, startup timeout
    ("qjs", {"SANDBOX_PROVIDER": "quickjs"}, "process", 60),
    ("runc", dict(DOCKER, SANDBOX_DOCKER_RUNTIME="runc"), "container", 240),
    ("runsc", dict(DOCKER, SANDBOX_DOCKER_RUNTIME="runsc"), "kernel", 240),
    ("vm", {"SANDBOX_PROVIDER": "microvm", "SANDBOX_RATE_PER_MIN": "0"}, "vm", 300),
]


def cli(*args, inp=None, timeout=300):
    return subprocess.run([CLI] + list(args), input=inp, capture_output=True, text=True, timeout=timeout)


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.d, entries, errors = {}, [], []

        def start(name, env, timeout):
            tok = "fleet-%s-token-0123456789abcdef0123456789" % name
            with open(os.path.join(cls.tmp, name + ".tok"), "w") as f:
                f.write(tok + "\n")
            try:
                cls.d[name] = Daemon(dict(env, PLIMSOLL_TOKEN=tok), timeout=timeout)
            except Exception as e:  # noqa: BLE001 - reported below, with every daemon stopped
                errors.append("%s: %s" % (name, e))

        # The four start side by side: the microvm one boots its template under TCG meanwhile.
        threads = [threading.Thread(target=start, args=(n, e, t)) for n, e, _, t in FLEET]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            cls.stop_all()
            raise RuntimeError("; ".join(errors))
        for name, _, _, _ in FLEET:
            entries.append({"name": name, "url": "http://127.0.0.1:%d" % cls.d[name].port,
                            "token_file": name + ".tok"})
        cls.file = os.path.join(cls.tmp, "fleet.json")
        with open(cls.file, "w") as f:
            json.dump(entries, f)
        cls.no_vm = os.path.join(cls.tmp, "no-vm.json")
        with open(cls.no_vm, "w") as f:
            json.dump(entries[:3], f)

    @classmethod
    def stop_all(cls):
        for d in cls.d.values():
            if d.proc.poll() is None:
                d.stop()

    @classmethod
    def tearDownClass(cls):
        cls.stop_all()
        shutil.rmtree(cls.tmp)

    def runs(self):
        return {n: d.settled_count("run") for n, d in self.d.items() if d.proc.poll() is None}

    def placed(self, floor, backends=None):
        r = cli("run", "--backends", backends or self.file, "--min-isolation", floor, "--json", "-e",
                "console.log('on', %r)" % floor)
        return r, json.loads(r.stdout) if r.stdout.strip() else {}

    def test_1_each_floor_lands_on_its_daemon(self):
        for name, _, tier, _ in FLEET:
            before = self.runs()
            r, j = self.placed(tier)
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
            self.assertEqual((j["verdict"], j["backend"], j["isolation"]), ("ran", name, tier))
            self.assertEqual(j["stdout"], "on %s\n" % tier)
            # The weaker daemons were filtered by their Describe: nothing was sent to them.
            self.assertEqual(j["refused_before"], [])
            weaker = [row[0] for row in FLEET[:[row[0] for row in FLEET].index(name)]]
            self.assertEqual([s["backend"] for s in j["skipped"]], weaker)
            self.d[name].wait_events("run", n=before[name] + 1, timeout=30)
            after = self.runs()
            self.assertEqual({n: after[n] - before[n] for n in after if n != name}, {n: 0 for n in after if n != name})

    def test_2_vm_floor_without_a_vm_daemon_is_refused_before_sending(self):
        before = self.runs()
        r, j = self.placed("vm", self.no_vm)
        self.assertEqual(r.returncode, 200, r.stderr)
        self.assertEqual((j["verdict"], j["backend"], j["refusal_reason"]), ("refused", None, "isolation"))
        self.assertIn("nothing was sent", j["error"]["message"])
        self.assertEqual([(s["backend"], s["why"]) for s in j["skipped"]],
                         [("qjs", "isolation process is below the floor vm"),
                          ("runc", "isolation container is below the floor vm"),
                          ("runsc", "isolation kernel is below the floor vm")])
        self.assertEqual(self.runs(), before)

    def test_3_a_session_stays_on_its_daemon(self):
        r = cli("repl", "--backends", self.file, "--min-isolation", "container",
                inp="let x = 20\n\nconsole.log(x + 1)\n\nconsole.log(x + 2)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "21\n22\n")
        self.assertIn("[backend runc]", r.stderr)
        cells = [ln for ln in r.stderr.splitlines() if ln.startswith("[cell ")]
        self.assertEqual(len(cells), 3, r.stderr)
        for ln in cells:
            self.assertIn("docker/container", ln)
        self.assertIn("chain ok", r.stderr.splitlines()[-1])

    def test_4_a_stopped_daemon_is_skipped_where_nothing_ran(self):
        self.assertEqual(self.d["runsc"].stop(), 0)
        before = self.runs()
        r, j = self.placed("kernel")
        self.assertEqual(r.returncode, 0, r.stderr)
        # runsc cannot be reached (its Describe fails: no byte of the run was sent), so the next
        # daemon that meets the floor takes the run.
        self.assertEqual((j["verdict"], j["backend"], j["isolation"]), ("ran", "vm", "vm"))
        skipped = {s["backend"]: s["why"] for s in j["skipped"]}
        self.assertIn("Describe failed", skipped["runsc"])
        self.d["vm"].wait_events("run", n=before["vm"] + 1, timeout=30)
        after = self.runs()
        self.assertEqual((after["qjs"], after["runc"]), (before["qjs"], before["runc"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
