"""libplimsoll as a user gets it (issue 24): `make install`'s script installs the shared library,
include/plimsoll.h and plimsoll.pc into a temporary DESTDIR; docs/examples/describe.c is compiled
against them with `pkg-config --cflags --libs plimsoll` (nothing from the build tree) and run against
a real quickjs daemon: Describe, a checked run, and a vm floor refused as a refusal (not as an
evidence mismatch). The exported symbols are the public API's only."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import DAEMON, Daemon  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.path.join(os.path.dirname(DAEMON), "..", ".."))
TOKEN = "library-test-token-0123456789abcdef"


class InstalledLibrary(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.dest = os.path.join(cls.tmp, "dest")
        env = dict(os.environ, DESTDIR=cls.dest, PREFIX="/usr/local", SYSCONFDIR="/etc")
        r = subprocess.run(["sh", os.path.join(SRC, "scripts", "install.sh"), BUILD], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cls.libdir = os.path.join(cls.dest, "usr/local/lib")
        cls.pcenv = dict(os.environ, PKG_CONFIG_PATH=os.path.join(cls.libdir, "pkgconfig"),
                         PKG_CONFIG_SYSROOT_DIR=cls.dest)
        cls.tok = os.path.join(cls.tmp, "tok")
        with open(cls.tok, "w") as f:
            f.write(TOKEN + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def pkg(self, *args):
        r = subprocess.run(["pkg-config"] + list(args) + ["plimsoll"], env=self.pcenv, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def test_installed_files(self):
        for rel in ("usr/local/include/plimsoll.h", "usr/local/lib/libplimsoll.so",
                    "usr/local/lib/libplimsoll.so.0", "usr/local/lib/pkgconfig/plimsoll.pc"):
            self.assertTrue(os.path.exists(os.path.join(self.dest, rel)), rel)
        self.assertEqual(self.pkg("--modversion"), ["0.1.0"])
        nm = subprocess.run(["nm", "-D", "--defined-only", os.path.join(self.libdir, "libplimsoll.so")],
                            capture_output=True, text=True, timeout=30)
        self.assertEqual(nm.returncode, 0, nm.stderr)
        names = [ln.split()[-1].split("@")[0] for ln in nm.stdout.splitlines() if ln.strip()]
        exported = [n for n in names if n != "PLIMSOLL_0"]
        self.assertIn("plimsoll_run_snippet", exported)
        self.assertEqual([n for n in exported if not n.startswith("plimsoll_") or n.startswith("plimsoll__")], [])

    def test_example_compiles_and_runs(self):
        exe = os.path.join(self.tmp, "describe")
        cc = os.environ.get("CC", "cc")
        # The sanitizer build's library needs its runtime first in the program (make check's ASan
        # lane): a user of that library would build the same way.
        lib = subprocess.run(["ldd", os.path.join(self.libdir, "libplimsoll.so")], capture_output=True, text=True,
                             timeout=30).stdout
        san = ["-fsanitize=address,undefined"] if "libasan" in lib else []
        r = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror"] + san +
                           [os.path.join(SRC, "docs", "examples", "describe.c"), "-o", exe]
                           + self.pkg("--cflags", "--libs") + ["-Wl,-rpath," + self.libdir],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        # meson test points LD_LIBRARY_PATH at the build tree: the example must find the installed copy.
        run_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30, env=run_env)
        self.assertIn(os.path.join(self.libdir, "libplimsoll.so.0"), ldd.stdout)
        with Daemon({"SANDBOX_PROVIDER": "quickjs", "PLIMSOLL_TOKEN": TOKEN}) as d:
            url = "http://127.0.0.1:%d" % d.port
            out = subprocess.run([exe, url, self.tok], capture_output=True, text=True, timeout=120, env=run_env)
            self.assertEqual(out.returncode, 0, out.stderr)
            lines = out.stdout.splitlines()
            self.assertEqual(lines[0], "provider quickjs isolation process protocol 3 sessions no")
            self.assertEqual(lines[1], "run: ok, stdout 42")
            self.assertRegex(lines[2], r"^record [0-9a-f]{12}$")
            self.assertEqual(lines[3], "vm floor: refused (isolation)")
            # Without the token the daemon refuses; the example reports the answer, never a success.
            bad = subprocess.run([exe, url], capture_output=True, text=True, timeout=60, env=run_env)
            self.assertEqual(bad.returncode, 1)
            self.assertIn("describe:", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
