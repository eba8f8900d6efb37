"""pydata.py: the Python data project of issue 20's done-when list, and how its answer is judged,
shared by test_python_docker.py and test_python_microvm.py. Standard library only."""
import base64
import json
import zlib

MAIN_PY = r'''
import socket, subprocess, sys
import numpy as np
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt

df = pd.DataFrame({"x": np.arange(10, dtype=float)})
df["y"] = 3 * df["x"] ** 2 - 2 * df["x"] + 1
coef = np.polyfit(df["x"], df["y"], 2)
fig, ax = plt.subplots(figsize=(4, 3), dpi=80)
ax.plot(df["x"], df["y"], "o-")
ax.set_title("y = 3x^2 - 2x + 1")
fig.savefig("plot.png")
print("rows", len(df), "sum", int(df["y"].sum()), "mean", round(float(df["y"].mean()), 2))
print("coef", " ".join("%.3f" % c for c in coef))
print("backend", matplotlib.get_backend())

# No network: a TCP connect to a public address fails inside the sandbox.
try:
    socket.create_connection(("1.1.1.1", 443), timeout=3).close()
    print("network open")
except OSError as e:
    print("network closed")
# No pip: neither the module nor the command exists, so nothing can be downloaded.
r = subprocess.run([sys.executable, "-m", "pip", "install", "requests"], capture_output=True, text=True)
print("pip-module exit", r.returncode, "no pip" if "No module named pip" in r.stderr else r.stderr[-200:])
r = subprocess.run("pip install requests", shell=True, capture_output=True, text=True)
print("pip-command exit", r.returncode, "not found" if "not found" in r.stderr else r.stderr[-200:])
try:
    import requests  # noqa: F401
    print("requests importable")
except ImportError:
    print("requests absent")
'''

# np.polyfit on exact points of 3x^2 - 2x + 1 gives back the coefficients.
WANT_STDOUT = (b"rows 10 sum 775 mean 77.5\n"
               b"coef 3.000 -2.000 1.000\n"
               b"backend agg\n"
               b"network closed\n"
               b"pip-module exit 1 no pip\n"
               b"pip-command exit 127 not found\n"
               b"requests absent\n")


def request(**kw):
    msg = {"protocol": 3, "project": {"files": [{"path": "main.py", "content": MAIN_PY}],
                                      "steps": ["python3 main.py"], "artifacts": ["plot.png"]}}
    msg.update(kw)
    return msg


def png_size(data):
    """(width, height) of a PNG whose signature and IHDR chunk (with its CRC) are sound, else None."""
    if len(data) < 33 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    if zlib.crc32(data[12:29]) != int.from_bytes(data[29:33], "big"):
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def judge(tc, body):
    """Asserts the answer of request(): completed, stdout as wanted, a real PNG artifact."""
    p = body["project"]
    tc.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED", json.dumps(p)[:2000])
    step = p["steps"][0]
    out = base64.b64decode(step.get("stdout") or "")
    tc.assertEqual(out, WANT_STDOUT, base64.b64decode(step.get("stderr") or "")[-2000:])
    tc.assertEqual(step.get("exitCode", 0), 0)
    arts = {a["path"]: base64.b64decode(a.get("content") or "") for a in p.get("artifacts", [])}
    tc.assertIn("plot.png", arts)
    png = arts["plot.png"]
    tc.assertEqual(png_size(png), (320, 240))
    tc.assertGreater(len(png), 5000)  # axes, a line and text: not a blank image
    return png
