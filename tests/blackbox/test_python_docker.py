"""Python at the docker tiers (issue 20; docs/python.md): the project image's data libraries under
runc (tier container) and runsc (tier kernel), proven on the card and listed in Describe; a
pandas/NumPy/Matplotlib project whose PNG comes back as an artifact, with no network and no pip;
a project image stripped of NumPy states `python: absent` and refuses Python projects before
anything starts; TypeScript sees node's types (issue 19 item 6).

Needs dockerd, runsc and the images of scripts/docker-setup.sh; a missing prerequisite FAILS.
Standard library only."""
import base64
import json
import os
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from pydata import judge, request  # noqa: E402
from test_docker import PROJECT_IMAGE, DockerCase, engine, project  # noqa: E402
from test_sessions import Client, out  # noqa: E402

SESSION_IMAGE = os.environ.get("PLIMSOLL_TEST_SESSION_IMAGE", "plimsoll/session:latest")

STRIPPED = "plimsoll-test/project-no-numpy:py%d" % os.getpid()
STRIPPED_SESSION = "plimsoll-test/session-no-numpy:py%d" % os.getpid()


def b64(s):
    return base64.b64decode(s or "")


class PythonChecks:
    """Shared by the runc and runsc classes."""
    TIER = ""

    def test_describe_and_card(self):
        st, _, data, _ = self.d.call("Describe", {})
        self.assertEqual(st, 200)
        d = json.loads(data)
        self.assertEqual(d["isolation"], self.TIER)
        self.assertIn("python", d["projectEnvironment"]["languages"])
        checks = {c["name"]: c for c in d["evidence"]["checks"]}
        self.assertTrue(checks["project.python"]["passed"])
        self.assertRegex(checks["project.python"]["observed"],
                         r"^Python 3\.\d+\.\d+, numpy \S+, pandas \S+, matplotlib \S+$")
        self.assertFalse(any(x.startswith("python: absent") for x in d["evidence"]["confinement"]))

    def test_data_project(self):
        msg = request(minimumIsolation=self.TIER)
        body = self.run_ok(msg)
        self.assertEqual(body["isolation"], self.TIER)
        judge(self, body)

    def test_typescript_node_types(self):  # issue 19 item 6: @types/node in the image
        files = [("main.ts", 'import { readFileSync } from "node:fs";\n'
                             'const n: number = readFileSync("main.ts").length;\nconsole.log("bytes", n > 0);\n')]
        body = self.run_ok(project(["tsc --strict --noEmit main.ts", "tsx main.ts"], files, timeoutMs=90000))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED", p)
        self.assertEqual([s.get("exitCode", 0) for s in p["steps"]], [0, 0], p)
        self.assertEqual(b64(p["steps"][1].get("stdout")), b"bytes true\n")


class A_Runc(PythonChecks, DockerCase):
    TIER = "container"


class B_Runsc(PythonChecks, DockerCase):
    TIER = "kernel"
    ENV = {"SANDBOX_DOCKER_RUNTIME": "runsc"}


def make_stripped(base=PROJECT_IMAGE, name=STRIPPED):
    """The image with NumPy deleted: a container of it removes the package, and the container is
    committed as a new image (the Engine API's commit; the test removes both)."""
    cfg = {"Image": base, "Cmd": ["/bin/sh", "-c", "rm -rf /usr/lib/python3/dist-packages/numpy"],
           "User": "0", "NetworkDisabled": True, "HostConfig": {"NetworkMode": "none"}}
    st, body = engine("POST", "/containers/create", json.dumps(cfg).encode(), {"Content-Type": "application/json"})
    assert st == 201, body
    cid = json.loads(body)["Id"]
    try:
        st, body = engine("POST", "/containers/%s/start" % cid)
        assert st == 204, body
        st, body = engine("POST", "/containers/%s/wait" % cid, timeout=120)
        assert st == 200 and json.loads(body)["StatusCode"] == 0, body
        repo, _, tag = name.rpartition(":")
        q = urllib.parse.urlencode({"container": cid, "repo": repo, "tag": tag})
        st, body = engine("POST", "/commit?" + q)
        assert st == 201, body
    finally:
        engine("DELETE", "/containers/%s?force=1" % cid)


class C_Stripped(DockerCase):
    """A project image without NumPy: the card says python is absent; Python projects are refused."""

    @classmethod
    def setUpClass(cls):
        make_stripped()
        cls.ENV = {"SANDBOX_DOCKER_PROJECT_IMAGE": STRIPPED}
        try:
            super().setUpClass()
        except BaseException:
            engine("DELETE", "/images/%s?force=1" % urllib.parse.quote(STRIPPED, safe=""))
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            st, _ = engine("DELETE", "/images/%s?force=1" % urllib.parse.quote(STRIPPED, safe=""))
            assert st in (200, 404), st

    def test_absent_on_card_and_describe(self):
        st, _, data, _ = self.d.call("Describe", {})
        d = json.loads(data)
        self.assertNotIn("python", d["projectEnvironment"].get("languages", []))
        self.assertIn("shell", d["projectEnvironment"]["languages"])
        lines = [x for x in d["evidence"]["confinement"] if x.startswith("python: ")]
        self.assertEqual(len(lines), 1, d["evidence"]["confinement"])
        self.assertTrue(lines[0].startswith("python: absent: exit 1: "), lines[0])
        self.assertIn("numpy", lines[0])  # the import error, from the probe's stderr
        self.assertNotIn("project.python", [c["name"] for c in d["evidence"]["checks"]])

    def test_python_project_refused(self):
        for steps in (["python3 main.py"], ["echo hi", "cd . && /usr/bin/python3 -c 'print(1)'"]):
            msg = request()
            msg["project"]["steps"] = steps
            body = self.assertRefused(self.d.call("Run", msg), "unimplemented", "unsupported")
            self.assertIn("nothing ran", body["message"])

    def test_node_project_still_runs(self):
        body = self.run_ok(project(["node -e 'console.log(6*7)'"]))
        self.assertEqual(b64(body["project"]["steps"][0]["stdout"]), b"42\n")


class D_Session(DockerCase):
    """A docker Python session (runc): pandas imports in a cell; a DataFrame made in one cell is
    read by the next; a chart saved in one cell is still in /work in the next."""
    ENV = {"SANDBOX_DOCKER_SESSION_IMAGE": SESSION_IMAGE, "SANDBOX_MAX_SESSIONS": "2",
           "SANDBOX_SESSION_DISK_MB": "16"}

    def test_session_python_proven(self):
        st, _, data, _ = self.d.call("Describe", {})
        d = json.loads(data)
        self.assertEqual(d["sessionEnvironment"]["languages"], ["javascript", "python"])
        checks = {c["name"]: c for c in d["evidence"]["checks"]}
        self.assertTrue(checks["session.python"]["passed"])
        self.assertRegex(checks["session.python"]["observed"],
                         r"^Python 3\.\d+\.\d+, numpy \S+, pandas \S+, matplotlib \S+$")

    def test_pandas_cells_keep_state(self):
        c = Client(self, self.d)
        c.open(languages=["python"])
        r = c.cell("import pandas as pd, numpy as np\ndf = pd.DataFrame({'x': np.arange(5)})\n"
                   "df['y'] = df['x'] ** 2", language="python", timeoutMs=60000)
        self.assertEqual(r["run"]["cell"].get("exitCode", 0), 0, r)
        r = c.cell("print(int(df['y'].sum()), pd.__version__ == pd.__version__)\nlen(df)", language="python")
        self.assertEqual(out(r), "30 True\n5\n")
        r = c.cell("import matplotlib.pyplot as plt\nplt.plot(df['x'], df['y'])\nplt.savefig('p.png')\n"
                   "import matplotlib\nmatplotlib.get_backend()", language="python", timeoutMs=60000)
        self.assertEqual(out(r), "'agg'\n")
        r = c.cell("open('p.png', 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n'", language="python")
        self.assertEqual(out(r), "True\n")
        c.close()


class E_StrippedSession(DockerCase):
    """A session image without NumPy: sessions still open and run JavaScript, but the card says
    session python is absent, Describe's session languages leave python out, and a Python cell
    is refused unsupported before it reaches the container."""

    @classmethod
    def setUpClass(cls):
        make_stripped(SESSION_IMAGE, STRIPPED_SESSION)
        cls.ENV = {"SANDBOX_DOCKER_SESSION_IMAGE": STRIPPED_SESSION, "SANDBOX_MAX_SESSIONS": "2"}
        try:
            super().setUpClass()
        except BaseException:
            engine("DELETE", "/images/%s?force=1" % urllib.parse.quote(STRIPPED_SESSION, safe=""))
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            st, _ = engine("DELETE", "/images/%s?force=1" % urllib.parse.quote(STRIPPED_SESSION, safe=""))
            assert st in (200, 404), st

    def test_python_absent_cells_refused(self):
        st, _, data, _ = self.d.call("Describe", {})
        d = json.loads(data)
        self.assertEqual(d["sessionEnvironment"]["languages"], ["javascript"])
        self.assertIn("python", d["projectEnvironment"]["languages"])  # the project image is whole
        lines = [x for x in d["evidence"]["confinement"] if x.startswith("session python: ")]
        self.assertEqual(len(lines), 1, d["evidence"]["confinement"])
        self.assertTrue(lines[0].startswith("session python: absent: exit 1: "), lines[0])
        self.assertIn("numpy", lines[0])
        c = Client(self, self.d)
        c.open()
        self.assertEqual(out(c.cell("console.log(6 * 7)")), "42\n")
        body = self.assertRefused(self.d.call("SessionRun", {"protocol": 3, "sessionId": c.id,
                                                             "cell": {"language": "python", "code": "print(1)"}}),
                                  "unimplemented", "unsupported")
        self.assertIn("nothing ran", body["message"])
        self.assertEqual(out(c.cell("console.log(7 * 6)")), "42\n")  # the session goes on
        c.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
