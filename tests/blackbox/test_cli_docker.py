"""`plimsoll project` against the docker provider (issue 19, item 4): a directory's files run with
shell steps, the answer checked, artifacts (binary too) written into --out and nowhere else, a
step's failure as the exit status, the floor refusing before dispatch, and `--grant` reaching the
API from a project step. Needs dockerd and the images (scripts/docker-setup.sh); a missing
prerequisite is a failure, never a skip."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon, Upstream  # noqa: E402

UP_TOKEN = "upstream-secret-token-0123456789"
ENV = {"SANDBOX_PROVIDER": "docker", "SANDBOX_RATE_PER_MIN": "0",
       "SANDBOX_DOCKER_IMAGE": os.environ.get("PLIMSOLL_TEST_SNIPPET_IMAGE", "plimsoll/snippet:latest"),
       "SANDBOX_DOCKER_PROJECT_IMAGE": os.environ.get("PLIMSOLL_TEST_PROJECT_IMAGE", "plimsoll/project:latest")}

MAIN = """const fs = require('fs');
fs.mkdirSync('dist/bin', {recursive: true});
fs.writeFileSync('dist/bin/x.bin', Buffer.from([0, 1, 2, 255]));
fs.writeFileSync('dist/out.txt', require('./lib/value.js') + '\\n');
console.log('built');
"""


class Project(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/var/run/docker.sock"):
            raise AssertionError("dockerd is not running (/var/run/docker.sock): run scripts/docker-setup.sh")
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp()
        clients, grants = os.path.join(cls.tmp, "clients.json"), os.path.join(cls.tmp, "grants.json")
        cls.tok = os.path.join(cls.tmp, "alice.tok")
        with open(cls.tok, "w") as f:
            f.write("alice-tok\n")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": hashlib.sha256(b"alice-tok").hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {"base_url": "http://127.0.0.1:%d" % cls.up.port,
                                              "allow": ["GET /v1/items/*"], "allowed_callers": ["alice"],
                                              "token": {"type": "static", "env": "ITEMS_TOKEN"}}}}, f)
        cls.d = Daemon(dict(ENV, PLIMSOLL_CLIENTS_FILE=clients, PLIMSOLL_GRANTS_FILE=grants, ITEMS_TOKEN=UP_TOKEN),
                       timeout=180)
        cls.url = "http://127.0.0.1:%d" % cls.d.port

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        cls.up.close()
        shutil.rmtree(cls.tmp)

    def c(self, *args):
        return subprocess.run([CLI] + list(args) + ["--url", self.url, "--token-file", self.tok],
                              capture_output=True, timeout=180)

    def tree(self):
        p = tempfile.mkdtemp(dir=self.tmp)
        os.makedirs(os.path.join(p, "lib"))
        with open(os.path.join(p, "main.js"), "w") as f:
            f.write(MAIN)
        with open(os.path.join(p, "lib", "real.js"), "w") as f:
            f.write("module.exports = 42\n")
        os.symlink("real.js", os.path.join(p, "lib", "value.js"))  # inside: sent as the file
        return p

    def test_project_writes_artifacts_into_out(self):
        p = self.tree()
        out = os.path.join(self.tmp, "out")
        r = self.c("project", p, "--step", "node main.js", "--step", "cat dist/out.txt; echo warn >&2",
                   "--artifact", "dist/bin/x.bin", "--artifact", "dist/out.txt", "--out", out)
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 0, err)
        self.assertEqual(r.stdout, b"built\n42\n")
        self.assertIn("warn\n", err)
        self.assertIn("verdict:         ran", err)
        self.assertIn("(checked)", err)
        self.assertIn("2 of 2 artifacts written into " + out, err)
        with open(os.path.join(out, "dist/bin/x.bin"), "rb") as f:
            self.assertEqual(f.read(), b"\x00\x01\x02\xff")
        with open(os.path.join(out, "dist/out.txt"), "rb") as f:
            self.assertEqual(f.read(), b"42\n")
        # the same --out again: refused before sending, nothing overwritten
        r = self.c("project", p, "--step", "node main.js", "--artifact", "dist/out.txt", "--out", out)
        self.assertEqual(r.returncode, 204)
        self.assertIn(b"is not empty", r.stderr)

    def test_json_carries_steps_and_artifacts(self):
        p = self.tree()
        r = self.c("project", p, "--step", "node main.js", "--artifact", "dist/bin/x.bin", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["verdict"], "ran")
        self.assertEqual(j["project"]["outcome"], "completed")
        self.assertEqual(j["project"]["steps"][0]["stdout"], "built\n")
        art = j["project"]["artifacts"][0]
        self.assertEqual((art["path"], art["encoding"], art["content"]), ("dist/bin/x.bin", "base64", "AAEC/w=="))

    def test_failing_step_is_the_exit_status(self):
        p = self.tree()
        out = os.path.join(self.tmp, "out-fail")
        r = self.c("project", p, "--step", "echo one; exit 7", "--step", "echo never",
                   "--artifact", "main.js", "--out", out)
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertEqual(r.stdout, b"one\n")
        self.assertIn(b"step 1:          exit 7", r.stderr)
        # the run checked, so the artifacts (here the file sent) are still written
        with open(os.path.join(out, "main.js")) as f:
            self.assertEqual(f.read(), MAIN)

    def test_floor_above_the_tier_is_refused(self):
        p = self.tree()
        r = self.c("project", p, "--step", "touch /tmp/ran", "--min-isolation", "vm")
        self.assertEqual(r.returncode, 200, r.stderr)
        self.assertIn(b"refused before dispatch: isolation (no code ran)", r.stderr)

    def test_grant_from_a_project_step(self):
        p = self.tree()
        with open(os.path.join(p, "call.js"), "w") as f:
            f.write('host.get("/v1/items/9").then(r => console.log("got", r.id))\n')
        n0 = len(self.up.seen)
        r = self.c("project", p, "--step", "node call.js", "--grant", "items")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"got 9\n")
        self.assertEqual(self.up.seen[n0]["headers"].get("Authorization"), "Bearer " + UP_TOKEN)
        r = self.c("project", p, "--step", "node call.js", "--grant", "other")
        self.assertEqual(r.returncode, 200)
        self.assertIn(b"refused before dispatch: permission", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
