"""`plimsoll mcp`'s run_project against the docker provider (issue 15): listed only when the
daemon runs projects, steps' output, artifacts and the card in the result, a below-floor project
refused with no code run. Needs dockerd and the images (scripts/docker-setup.sh); a missing
prerequisite is a failure, never a skip."""
import base64
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon  # noqa: E402
from test_mcp import Host, texts  # noqa: E402

ENV = {"SANDBOX_PROVIDER": "docker", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
       "SANDBOX_DOCKER_IMAGE": os.environ.get("PLIMSOLL_TEST_SNIPPET_IMAGE", "plimsoll/snippet:latest"),
       "SANDBOX_DOCKER_PROJECT_IMAGE": os.environ.get("PLIMSOLL_TEST_PROJECT_IMAGE", "plimsoll/project:latest")}


class McpProject(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/var/run/docker.sock"):
            raise AssertionError("dockerd is not running (/var/run/docker.sock): run scripts/docker-setup.sh")
        cls.d = Daemon(ENV, timeout=180)
        cls.h = Host("--url", "http://127.0.0.1:%d" % cls.d.port)
        cls.h.initialize()

    @classmethod
    def tearDownClass(cls):
        rc, err = cls.h.close()
        assert rc == 0, err
        assert cls.d.stop() == 0

    def test_listed(self):
        tools = {t["name"]: t for t in self.h.request("tools/list")["result"]["tools"]}
        self.assertEqual(set(tools), {"run_javascript", "run_project", "describe"})
        self.assertEqual(tools["run_project"]["inputSchema"]["required"], ["steps"])

    def test_project_output_artifacts_card(self):
        res = self.h.call("run_project", {
            "files": [{"path": "main.js", "content": 'console.log("sum", 2 + 3)'}],
            "steps": ["node main.js", "node main.js > out.txt && printf '\\377' > bin.dat"],
            "artifacts": ["out.txt", "bin.dat"], "timeout": 60})
        self.assertIs(res["isError"], False, res)
        text, card = texts(res)
        self.assertIn("outcome: completed", text)
        self.assertIn("step 1 `node main.js`: exit 0\nstdout:\nsum 5\n", text)
        self.assertIn("artifact out.txt (6 bytes", text)
        self.assertRegex(card, r"verdict:\s+ran\n")
        self.assertRegex(card, r"actual tier:\s+container\n")
        self.assertRegex(card, r"outcome:\s+completed\n")
        self.assertRegex(card, r"step 2:\s+exit 0, ")
        self.assertRegex(card, r"artifacts:\s+2, 7 bytes\n")
        self.assertRegex(card, r"record:\s+v2 [0-9a-f]{64} \(checked\)")
        sc = res["structuredContent"]
        self.assertEqual((sc["verdict"], sc["exit_status"]), ("ran", 0))
        arts = {a["path"]: a for a in sc["project"]["artifacts"]}
        self.assertEqual(arts["out.txt"]["content"], "sum 5\n")
        self.assertEqual((arts["bin.dat"]["encoding"], base64.b64decode(arts["bin.dat"]["content"])),
                         ("base64", b"\xff"))

    def test_failing_step_is_a_result(self):
        res = self.h.call("run_project", {"steps": ["echo before; exit 3", "echo never"]})
        self.assertIs(res["isError"], False, res)
        self.assertEqual(res["structuredContent"]["exit_status"], 3)
        self.assertNotIn("never\n", texts(res)[0])

    def test_below_floor_refused(self):
        res = self.h.call("run_project", {"steps": ["echo must-not-run"], "min_isolation": "vm"})
        self.assertIs(res["isError"], True)
        self.assertIn("no code ran", texts(res)[0])
        self.assertIn("refused before dispatch: isolation (no code ran)", texts(res)[1])
        self.assertEqual(res["structuredContent"]["code_ran"], "no")

    def test_bad_project_arguments(self):
        for args in ({}, {"steps": []}, {"steps": "ls"}, {"steps": ["ls"], "files": [{"path": "a"}]},
                     {"steps": ["ls"], "artifacts": [1]}, {"steps": ["ls"] * 21}):
            res = self.h.call("run_project", args)
            self.assertIs(res["isError"], True, args)
            self.assertIn("Nothing was sent; no code ran", texts(res)[0], args)


class McpPython(unittest.TestCase):
    """run_python where the daemon's session environment lists python (docker sessions), and the
    descriptions naming node with tsc/tsx for docker projects (issue 19)."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/var/run/docker.sock"):
            raise AssertionError("dockerd is not running (/var/run/docker.sock): run scripts/docker-setup.sh")
        cls.d = Daemon(dict(ENV, SANDBOX_MAX_SESSIONS="2", SANDBOX_DOCKER_SESSION_IMAGE=os.environ.get(
            "PLIMSOLL_TEST_SESSION_IMAGE", "plimsoll/session:latest")), timeout=240)
        cls.h = Host("--url", "http://127.0.0.1:%d" % cls.d.port)
        cls.h.initialize()

    @classmethod
    def tearDownClass(cls):
        rc, err = cls.h.close()
        assert rc == 0, err
        assert cls.d.stop() == 0

    def test_tools_and_words(self):
        tools = {t["name"]: t for t in self.h.request("tools/list")["result"]["tools"]}
        self.assertEqual(set(tools), {"run_javascript", "run_project", "describe", "open_session", "run_cell",
                                      "close_session", "run_python"})
        self.assertIn("Node.js", tools["run_javascript"]["description"])
        self.assertIn("tsc (TypeScript) and tsx", tools["run_project"]["description"])
        self.assertEqual(sorted(tools["open_session"]["inputSchema"]["properties"]["language"]["enum"]),
                         ["javascript", "python"])

    def test_run_python(self):
        r = self.h.call("run_python", {"code": "def f(x):\n    return x * 3\nprint(f(14))"})
        self.assertIs(r["isError"], False, r)
        text = texts(r)[0]
        self.assertIn("stdout:\n42\n", text)
        self.assertIn("chain ok", text)
        self.assertIn("closed: SESSION_END_CLOSED] 1 calls", text)
        r = self.h.call("run_python", {"code": "print(1)", "min_isolation": "vm"})
        self.assertIs(r["isError"], True)
        self.assertIn("refused", texts(r)[0])
        self.assertEqual(self.h.call("run_python", {"code": 5})["isError"], True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
