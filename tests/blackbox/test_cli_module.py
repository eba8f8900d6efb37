"""`plimsoll module` and the MCP tool run_module (issue 21, item 4) against the docker provider with
the module image plimsoll/module:latest (scripts/build-images.py): the CLI's CSV and JSON doubles are
bit for bit the doubles the RPC returns for the same request (-0.0, subnormals, 17-digit values), a
below-floor run exits with the refusal code, a bad rows file is refused before anything is sent, and
run_module is listed (naming the models) on the module daemon and absent on quickjs. Needs dockerd
and the image; a missing prerequisite is a failure, never a skip. Standard library only."""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import shutil
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import CLI, Daemon  # noqa: E402
from test_mcp import Host, texts  # noqa: E402
from test_module import BASE_ENV, loads  # noqa: E402

ROWS = [[1, 2], [-0.0, 5e-324], [0.30000000000000004, 1.0000000000000002], [2.2250738585072009e-308, -3.5]]
CSV = "# mu, x0\n1,2\n-0.0, 5e-324\n\n0.30000000000000004,1.0000000000000002\n2.2250738585072009e-308,-3.5\n"


def bits(x):
    return struct.pack("<d", float(x))


def rpc_runs(d, model, rows, end, step):
    msg = {"protocol": 3, "module": {"model": model, "rows": [{"values": r} for r in rows], "endTime": end,
                                     "step": step}}
    st, _, data, _ = d.call("Run", msg)
    assert st == 200, data
    m = loads(data)["module"]
    return [(r.get("status", 0), [bits(v) for v in r.get("outputs", [])]) for r in m["runs"]]


class CliModule(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/var/run/docker.sock"):
            raise AssertionError("dockerd is not running (/var/run/docker.sock): run scripts/docker-setup.sh")
        cls.d = Daemon(dict(BASE_ENV, SANDBOX_DOCKER_RUNTIME="runc"), timeout=300)
        cls.url = "http://127.0.0.1:%d" % cls.d.port
        cls.tmp = tempfile.mkdtemp()
        cls.rows = os.path.join(cls.tmp, "rows.csv")
        with open(cls.rows, "w") as f:
            f.write(CSV)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0
        shutil.rmtree(cls.tmp)

    def cli(self, *args, url=None):
        return subprocess.run([CLI, "module", *args, "--url", url or self.url], capture_output=True, timeout=300)

    def test_csv_doubles_equal_the_rpc(self):
        for model, rows, end, step in (("VanDerPol", ROWS, 0.5, 0.01),
                                       ("Lorenz", [r + [1.0] for r in ROWS], 0.2, 0.005)):
            path = os.path.join(self.tmp, model + ".csv")
            with open(path, "w") as f:
                f.write("".join(",".join(repr(float(v)) for v in r) + "\n" for r in rows))
            want = rpc_runs(self.d, model, rows, end, step)
            r = self.cli(model, "--rows", path, "--end", str(end), "--step", str(step), "--csv")
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            got = []
            for line in r.stdout.decode().splitlines():
                fields = line.split(",")
                got.append((int(fields[0]), [bits(v) for v in fields[1:]]))
            self.assertEqual(got, want, model)
            self.assertRegex(r.stderr.decode(), r"record:\s+v2 [0-9a-f]{64} \(checked\)")
            self.assertRegex(r.stderr.decode(), r"module:\s+completed, %d rows" % len(rows))

    def test_json_doubles_equal_the_rpc(self):
        want = rpc_runs(self.d, "VanDerPol", ROWS, 0.3, 0.01)
        r = self.cli("VanDerPol", "--rows", self.rows, "--end", "0.3", "--step", "0.01", "--json")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        j = loads(r.stdout)
        self.assertEqual((j["verdict"], j["exit_status"], j["isolation"]), ("ran", 0, "container"))
        m = j["module"]
        self.assertEqual((m["outcome"], m["width"]), ("completed", 3))
        got = [(x["status"], [bits(v) for v in x["outputs"]]) for x in m["runs"]]
        self.assertEqual(got, want)
        self.assertIn(b"-0,5e-324", r.stdout)  # the shortest forms, -0 kept

    def test_floor_refusal_exit_code(self):
        r = self.cli("VanDerPol", "--rows", self.rows, "--end", "1", "--step", "0.1", "--min-isolation", "vm")
        self.assertEqual(r.returncode, 200, r.stderr.decode())
        self.assertEqual(r.stdout, b"")
        self.assertRegex(r.stderr.decode(), r"verdict:\s+refused before dispatch: isolation \(no code ran\)")

    def test_unknown_model_exit_1(self):
        r = self.cli("NoSuchModel", "--rows", self.rows, "--end", "1", "--step", "0.1")
        self.assertEqual(r.returncode, 1, r.stderr.decode())
        self.assertIn("setup_failed", r.stderr.decode())
        self.assertIn("NoSuchModel", r.stderr.decode())

    def test_bad_rows_refused_before_sending(self):
        # A listener that would see any connection: none may arrive.
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(8)
        ls.setblocking(False)
        url = "http://127.0.0.1:%d" % ls.getsockname()[1]
        cases = {"1,2\n3,x\n": "line 2, column 3: `x` is not a decimal number",
                 "1,2\n3\n": "line 2: 1 values, but the first row has 2",
                 "1,nan\n": "line 1, column 3: `nan` is not a decimal number",
                 "1,1e400\n": "line 1, column 3: `1e400` is out of range",
                 "# nothing\n": "no rows"}
        try:
            for text, why in cases.items():
                path = os.path.join(self.tmp, "bad.csv")
                with open(path, "w") as f:
                    f.write(text)
                r = self.cli("VanDerPol", "--rows", path, "--end", "1", "--step", "0.1", url=url)
                self.assertEqual(r.returncode, 204, text)
                self.assertIn(why, r.stderr.decode())
            for args in (["--rows", self.rows, "--end", "0", "--step", "0.1"],
                         ["--rows", os.path.join(self.tmp, "absent.csv"), "--end", "1", "--step", "0.1"]):
                r = self.cli("VanDerPol", *args, url=url)
                self.assertEqual(r.returncode, 204, r.stderr.decode())
            with self.assertRaises(BlockingIOError):
                ls.accept()
        finally:
            ls.close()

    def test_mcp_run_module(self):
        h = Host("--url", self.url)
        try:
            h.initialize()
            tools = {t["name"]: t for t in h.request("tools/list")["result"]["tools"]}
            self.assertIn("run_module", tools)
            t = tools["run_module"]
            for model in ("BouncingBall", "Lorenz", "VanDerPol"):
                self.assertIn(model, t["description"])
                self.assertIn(model, t["inputSchema"]["properties"]["model"]["enum"])
            res = h.call("run_module", {"model": "VanDerPol", "rows": [[1, 2], [0.30000000000000004, 1]],
                                        "end_time": 0.1, "step": 0.01})
            self.assertIs(res["isError"], False, res)
            text, card = texts(res)
            want = rpc_runs(self.d, "VanDerPol", [[1, 2], [0.30000000000000004, 1]], 0.1, 0.01)
            lines = text.split("rows (status,outputs...):\n")[1].splitlines()
            got = [(int(x.split(",")[0]), [bits(v) for v in x.split(",")[1:]]) for x in lines]
            self.assertEqual(got, want)
            self.assertRegex(card, r"record:\s+v2 [0-9a-f]{64} \(checked\)")
            res = h.call("run_module", {"model": "VanDerPol", "rows": [[1, 2], [3]], "end_time": 1, "step": 0.1})
            self.assertIs(res["isError"], True)
            self.assertIn("Nothing was sent", texts(res)[0])
            res = h.call("run_module", {"model": "VanDerPol", "rows": [[1, 2]], "end_time": 1, "step": 0.1,
                                        "min_isolation": "vm"})
            self.assertIs(res["isError"], True)
            self.assertIn("no code ran", texts(res)[0])
        finally:
            rc, err = h.close()
            self.assertEqual(rc, 0, err)


class NoModuleTool(unittest.TestCase):
    def test_quickjs_lists_no_run_module(self):
        with Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_INSECURE": "1"}) as d:
            h = Host("--url", "http://127.0.0.1:%d" % d.port)
            try:
                h.initialize()
                names = {t["name"] for t in h.request("tools/list")["result"]["tools"]}
                self.assertIn("run_javascript", names)
                self.assertNotIn("run_module", names)
                res = h.call("run_module", {"model": "VanDerPol", "rows": [[1, 2]], "end_time": 1, "step": 0.1})
                self.assertIs(res["isError"], True)
            finally:
                rc, err = h.close()
                self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    unittest.main()
