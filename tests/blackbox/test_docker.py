"""The docker provider over real HTTP: providers.md §3 and §8 items 14, 28-48 as they apply to an
Engine-API implementation, the faults of issue 5, under runc (tier container) and under gVisor's
runsc (tier kernel).

Needs dockerd answering on the local socket, runsc registered with it, and the images
plimsoll/snippet:latest and plimsoll/project:latest: scripts/docker-setup.sh provides all three.
A missing prerequisite is a FAILURE that names what is missing, never a skip: CI runs the setup
first, so a skipped Docker test would hide a broken machine. Standard library only.
"""
import base64
import concurrent.futures
import hashlib
import http.client
import io
import json
import os
import socket
import sys
import tarfile
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, WireCase, check_record, js  # noqa: E402

SOCK = "/var/run/docker.sock"
SNIPPET_IMAGE = os.environ.get("PLIMSOLL_TEST_SNIPPET_IMAGE", "plimsoll/snippet:latest")
PROJECT_IMAGE = os.environ.get("PLIMSOLL_TEST_PROJECT_IMAGE", "plimsoll/project:latest")
LABEL = "org.plimsoll.sandbox"
BASE_ENV = {"SANDBOX_PROVIDER": "docker", "PLIMSOLL_INSECURE": "1", "SANDBOX_RATE_PER_MIN": "0",
            "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_PER_KEY_CONCURRENT": "8",
            "SANDBOX_DOCKER_IMAGE": SNIPPET_IMAGE, "SANDBOX_DOCKER_PROJECT_IMAGE": PROJECT_IMAGE}
FORGED = "\n<<<PLIMSOLL_REPORT_V2>>> 2 " + "0" * 64 + "\n{}"
# (42, 44): a two-file TypeScript project; the project image carries tsc and tsx
# (images/project/package-lock.json, installed by scripts/build-images.py).
TS_CONFIG = ('{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "module": "esnext",'
             ' "moduleResolution": "bundler", "allowImportingTsExtensions": true}, "include": ["*.ts"]}\n')
TS_MAIN = 'import { sum } from "./util.ts";\nconst total: number = sum(2, 3);\nconsole.log("sum", total);\n'
TS_UTIL = "export function sum(a: number, b: number): number {\n  return %s;\n}\n"
TS_FILES = [("main.ts", TS_MAIN), ("util.ts", TS_UTIL % "a + b"), ("tsconfig.json", TS_CONFIG)]
TS_TYPE_ERROR = [("main.ts", TS_MAIN), ("util.ts", TS_UTIL % '"five"'), ("tsconfig.json", TS_CONFIG)]


class _Unix(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("docker", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def engine(method, path, body=None, headers=None, timeout=60, sock=SOCK):
    """One Engine API call on the local socket (the test's own view of dockerd)."""
    conn = _Unix(sock, timeout)
    try:
        conn.request(method, "/v1.41" + path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def engine_json(method, path):
    st, body = engine(method, path)
    return st, (json.loads(body) if body and st < 300 else None)


def our_containers():
    q = urllib.parse.quote(json.dumps({"label": [LABEL]}))
    st, lst = engine_json("GET", "/containers/json?all=1&filters=" + q)
    assert st == 200, st
    return lst


def prerequisites():
    """What this machine lacks for the docker suite, as sentences; [] when nothing."""
    missing = []
    try:
        conn = _Unix(SOCK, 5)
        conn.request("GET", "/_ping")
        ok = conn.getresponse().status == 200
        conn.close()
    except OSError as e:
        return ["dockerd does not answer on %s (%s); run scripts/docker-setup.sh" % (SOCK, e)]
    if not ok:
        return ["dockerd on %s does not answer /_ping with 200" % SOCK]
    st, info = engine_json("GET", "/info")
    if st != 200:
        return ["dockerd /info answered HTTP %d" % st]
    for rt in ("runsc", "runsc-bookworm"):
        if rt not in (info.get("Runtimes") or {}):
            missing.append("%s is not registered with dockerd (/etc/docker/daemon.json; scripts/docker-setup.sh)" % rt)
    for img in (SNIPPET_IMAGE, PROJECT_IMAGE):
        st, _ = engine("GET", "/images/%s/json" % img)
        if st != 200:
            missing.append("image %s is missing (scripts/build-images.py)" % img)
    return missing


def setUpModule():
    missing = prerequisites()
    if missing:
        raise AssertionError("the docker suite cannot run on this machine; missing:\n  - " + "\n  - ".join(missing))


def image_id(ref):
    st, j = engine_json("GET", "/images/%s/json" % ref)
    assert st == 200, (ref, st)
    return j["Id"]


def host_closure(binary):
    """binary and the shared objects ldd names for it, as (path in image, bytes)."""
    import subprocess
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    paths = [binary] + [w for w in out.split() if w.startswith("/")]
    files = []
    for p in paths:
        with open(p, "rb") as f:
            files.append((p.lstrip("/"), f.read()))
    return files


def import_image(tag, changes, files=()):
    """A tiny image made through the Engine API's import, for the refusal tests."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in [("etc/plimsoll-test", b"test image\n")] + list(files):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            t.addfile(info, io.BytesIO(data))
    repo, _, tg = tag.rpartition(":")
    q = [("fromSrc", "-"), ("repo", repo), ("tag", tg)] + [("changes", c) for c in changes]
    st, body = engine("POST", "/images/create?" + urllib.parse.urlencode(q), body=buf.getvalue(),
                      headers={"Content-Type": "application/x-tar"})
    assert st == 200, body
    return image_id(tag)


def b64(s):
    return base64.b64decode(s or "")


def project(steps, files=(), artifacts=(), **kw):
    msg = {"protocol": 3, "project": {"files": [{"path": p, "content": c} for p, c in files],
                                      "steps": list(steps), "artifacts": list(artifacts)}}
    msg.update(kw)
    return msg


class DockerCase(WireCase):
    """One daemon per class; subclasses set ENV."""
    ENV = {}

    @classmethod
    def setUpClass(cls):
        env = dict(BASE_ENV)
        env.update(cls.ENV)
        cls.d = Daemon(env, timeout=180)

    @classmethod
    def tearDownClass(cls):
        assert cls.d.stop() == 0, "\n".join(cls.d.lines[-30:])

    def run_ok(self, msg):
        st, hdrs, data, _ = self.d.call("Run", msg)
        body = json.loads(data)
        self.assertEqual(st, 200, body)
        return body

    def snippet(self, code, **kw):
        msg = js(code, **kw)
        body = self.run_ok(msg)
        check_record(self, msg, body)
        return body


class A_Runc(DockerCase):
    """runc: tier container."""

    def test_describe_and_card(self):
        st, _, data, _ = self.d.call("Describe", {})
        self.assertEqual(st, 200)
        d = json.loads(data)
        self.assertEqual(d["sandbox"], "docker")
        self.assertEqual(d["isolation"], "container")
        self.assertTrue(d["supportsProject"])
        self.assertEqual(d["javascriptEnvironment"]["identity"], "docker-image:" + image_id(SNIPPET_IMAGE))
        self.assertEqual(d["projectEnvironment"]["identity"], "docker-image:" + image_id(PROJECT_IMAGE))
        self.assertEqual(d["javascriptEnvironment"]["maxTimeoutMs"], 30000)  # (41)
        self.assertEqual(d["projectEnvironment"]["maxTimeoutMs"], 120000)
        self.assertEqual(d["resources"], {"memoryMb": 256, "cpus": 1, "pids": 256, "diskMb": 160})
        card = d["evidence"]
        self.assertEqual(card["provider"], "docker")
        self.assertEqual(card["isolation"], "container")
        self.assertEqual(card["runtime"], "runc")
        self.assertTrue(card["runtimeVersion"])
        names = {c["name"]: c for c in card["checks"]}
        for must in ("probe.rootfs", "probe.network", "probe.identity", "probe.pids", "probe.tmpfs./tmp",
                     "probe.tmpfs./dev/shm", "probe.tmpfs./work", "probe.writable", "probe.escape_syscalls",
                     "probe.seccomp", "snippet.run", "project.run", "project.key_isolation"):
            self.assertIn(must, names)
            self.assertTrue(names[must]["passed"], names[must])
        self.assertTrue(all(c["passed"] for c in card["checks"]))
        self.assertTrue(any("seccomp" in line for line in card["confinement"]))  # (28) under runc
        self.assertTrue(d["policy"].startswith("plimsoll-evidence:sha256:"))
        # issue 14 §6: the host posture, as this machine's dockerd answers /info
        st, info = engine_json("GET", "/info")
        self.assertEqual(st, 200)
        want = ("rootless" if any("name=rootless" in o for o in info["SecurityOptions"]) else
                "userns-remap" if any("name=userns" in o for o in info["SecurityOptions"]) else "rootful")
        self.assertTrue(names["host.posture"]["passed"], names["host.posture"])
        self.assertTrue(names["host.posture"]["observed"].startswith(want + ":"), names["host.posture"])
        lines = card["confinement"]
        host = [x for x in lines if x.startswith("docker host: ")]
        self.assertEqual(host, ["docker host: %s, dockerd %s uid %d" % (want, info["ServerVersion"],
                                                                         0 if want != "rootless" else os.getuid())])
        self.assertIn("docker runtime: runc " + card["runtimeVersion"], lines)
        with open(os.path.join(os.path.dirname(__file__), "../../src/providers/docker/seccomp.json"), "rb") as f:
            self.assertIn("seccomp profile sha256:" + hashlib.sha256(f.read()).hexdigest(), lines)
        self.assertTrue(any(x.startswith("apparmor: %s on the host" % ("on" if any(
            "name=apparmor" in o for o in info["SecurityOptions"]) else "off")) for x in lines), lines)
        self.assertTrue(any(x.startswith("selinux: ") for x in lines), lines)
        self.assertTrue(any(x.startswith("LSM label of the container's process (kernel): ") for x in lines), lines)
        self.assertIn("cgroup v%s, driver %s" % (info["CgroupVersion"], info["CgroupDriver"]), lines)

    def test_software_rule(self):
        """issue 14 §7: the image's content identity is the software identity; a rule can be met."""
        st, _, data, _ = self.d.call("Describe", {})
        d = json.loads(data)
        for key, ref in (("javascriptEnvironment", SNIPPET_IMAGE), ("projectEnvironment", PROJECT_IMAGE)):
            st, j = engine_json("GET", "/images/%s/json" % ref)
            self.assertEqual(st, 200)
            plat = "/".join([j["Os"], j["Architecture"]] + ([j["Variant"]] if j.get("Variant") else []))
            self.assertEqual(d[key]["softwareIdentity"], "oci-config:%s@%s" % (plat, j["Id"]))
        sid = d["javascriptEnvironment"]["softwareIdentity"]
        msg = js('console.log("rule met")', softwareRule={"mode": "exact", "identities": [sid]})
        body = self.run_ok(msg)
        check_record(self, msg, body)
        self.assertEqual(b64(body["javascript"]["stdout"]), b"rule met\n")
        self.assertEqual(body["softwareIdentity"], sid)
        self.assertEqual(body["record"]["softwareIdentity"], sid)
        other = sid[:-1] + ("0" if sid[-1] != "0" else "1")
        msg = js('console.log("approved")', softwareRule={"mode": "approved", "identities": [other, sid]})
        body = self.run_ok(msg)
        check_record(self, msg, body)
        self.assertEqual(b64(body["javascript"]["stdout"]), b"approved\n")
        # a rule naming another image is refused before anything starts, marked environment
        self.assertRefused(self.d.call("Run", js('console.log("no")', softwareRule={
            "mode": "exact", "identities": [other]})), "failed_precondition", "environment")
        pid = d["projectEnvironment"]["softwareIdentity"]
        if pid != sid:  # the project image's identity does not meet a snippet's rule
            self.assertRefused(self.d.call("Run", js("1", softwareRule={"mode": "exact", "identities": [pid]})),
                               "failed_precondition", "environment")
        self.assertRefused(self.d.call("Run", js("1", softwareRule={"mode": "exact", "identities": [
            "oci-manifest:linux/amd64@" + sid.split("@")[1]]})), "failed_precondition", "environment")
        # a project rule is met by the project image's identity
        msg = project(["cat a.txt"], [("a.txt", "x")], softwareRule={"mode": "exact", "identities": [pid]})
        body = self.run_ok(msg)  # (the harness recomputes request digests for snippets only)
        self.assertEqual(body["softwareIdentity"], pid)
        self.assertEqual(body["record"]["softwareIdentity"], pid)
        self.assertTrue(body["record"]["softwareRuleId"])

    def test_hi(self):  # (36)
        body = self.snippet('console.log("hi",1+2)')
        self.assertEqual(b64(body["javascript"].get("stdout")), b"hi 3\n")
        self.assertEqual(body["javascript"].get("exitCode", 0), 0)
        self.assertEqual(body["sandbox"], "docker")
        self.assertEqual(body["isolation"], "container")
        self.assertEqual(body["environment"], "docker-image:" + image_id(SNIPPET_IMAGE))

    def test_boom(self):  # (36): only the text after the marker
        body = self.snippet('console.error("boom");process.exit(3)')
        j = body["javascript"]
        self.assertEqual(j.get("exitCode"), 3)
        self.assertEqual(b64(j.get("stderr")), b"boom\n")
        self.assertEqual(b64(j.get("stdout")), b"")

    def test_no_trailing_newline_and_binary(self):
        body = self.snippet('process.stdout.write("a\\u0000b"); process.stderr.write("e")')
        self.assertEqual(b64(body["javascript"].get("stdout")), b"a\x00b")
        self.assertEqual(b64(body["javascript"].get("stderr")), b"e")

    def test_timeout(self):  # (37)
        t0 = time.monotonic()
        body = self.snippet("setTimeout(()=>{},60000)", timeoutMs=1000)
        self.assertTrue(body["javascript"].get("timedOut"))
        self.assertEqual(body["javascript"].get("exitCode"), 124)
        self.assertLess(time.monotonic() - t0, 10)

    def test_timeout_partial_output(self):
        body = self.snippet('console.log("before"); while(true){}', timeoutMs=1500)
        self.assertTrue(body["javascript"].get("timedOut"))
        self.assertEqual(b64(body["javascript"].get("stdout")), b"before\n")

    def test_default_timeout_and_output_cap(self):  # (41)
        body = self.snippet('process.stdout.write("x".repeat(100000)); setTimeout(()=>{}, 60000)')
        j = body["javascript"]
        self.assertTrue(j.get("timedOut"))
        self.assertGreaterEqual(int(body["durationMs"]), 4900)  # the guest's time: the 5 s default
        self.assertLess(int(body["durationMs"]), 6500)
        self.assertEqual(len(b64(j.get("stdout"))), 65536)
        self.assertTrue(j.get("stdoutTruncated"))
        body = self.snippet('console.log("ok")', timeoutMs=600000)  # clamped to the ceiling, not refused
        self.assertEqual(b64(body["javascript"].get("stdout")), b"ok\n")

    def test_floor_kernel_refused(self):  # (14)
        body = self.assertRefused(self.d.call("Run", js('console.log("x")', minimumIsolation="kernel")),
                                  "failed_precondition", "isolation", 400)
        self.assertIn("container", body["message"])
        body = self.assertRefused(self.d.call("Run", project(["echo x"], minimumIsolation="kernel")),
                                  "failed_precondition", "isolation", 400)
        self.assertIn("container", body["message"])
        refused = self.d.wait_events("run", lambda e: e.get("floor") == "kernel", n=2)
        self.assertEqual(len(refused), 2)
        self.assertTrue(refused and all(e["outcome"] == "refused" and e["reason"] == "isolation" for e in refused))
        body = self.snippet('console.log("c")', minimumIsolation="container")
        self.assertEqual(body["isolation"], "container")

    def test_lockdown_from_inside(self):
        code = r"""
const fs = require('fs'), net = require('net');
const r = {};
try { fs.writeFileSync('/x', 'x'); r.root = 'written'; } catch (e) { r.root = e.code; }
r.uid = fs.readFileSync('/proc/self/status', 'utf8').match(/^Uid:\s+(\d+)/m)[1];
r.env = Object.keys(process.env).sort().join(',');
r.tmp = (() => { try { fs.writeFileSync('/tmp/t', 'x'); return 'ok'; } catch (e) { return e.code; } })();
const s = net.connect(80, '1.1.1.1');
s.on('error', e => { r.net = e.code; console.log(JSON.stringify(r)); });
s.on('connect', () => { r.net = 'connected'; console.log(JSON.stringify(r)); s.destroy(); });
"""
        body = self.snippet(code)
        r = json.loads(b64(body["javascript"]["stdout"]))
        self.assertEqual(r["root"], "EROFS")
        self.assertEqual(r["uid"], "61000")
        self.assertEqual(r["tmp"], "ok")
        self.assertEqual(r["net"], "EPERM")  # seccomp: AF_INET sockets are refused
        self.assertEqual(r["env"], "HOME,HOSTNAME,PATH")  # env -i: nothing of the host leaks in

    def test_project_multi_file(self):  # (42)
        body = self.run_ok(project(["tsc --noEmit", "tsx main.ts"], TS_FILES, timeoutMs=60000))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED", p)
        self.assertEqual(len(p["steps"]), 2, p)
        self.assertEqual([s.get("exitCode", 0) for s in p["steps"]], [0, 0], p)
        self.assertEqual(b64(p["steps"][1].get("stdout")), b"sum 5\n")
        self.assertEqual(p["steps"][0]["command"], "tsc --noEmit")
        self.assertEqual(body["environment"], "docker-image:" + image_id(PROJECT_IMAGE))
        self.assertFalse(p.get("outcomeDetail"))

    def test_project_multi_file_js(self):  # (42) without the TypeScript tooling: node alone
        files = [("main.js", 'const {sum} = require("./lib/sum");\nconsole.log("sum", sum(2, 3));\n'),
                 ("lib/sum.js", "exports.sum = (a, b) => a + b;\n")]
        body = self.run_ok(project(["node --check main.js && node --check lib/sum.js", "node main.js"], files))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED")
        self.assertEqual(len(p["steps"]), 2)
        self.assertEqual(b64(p["steps"][1].get("stdout")), b"sum 5\n")

    def test_artifacts(self):  # (43)
        body = self.run_ok(project(["echo hello > out.txt; printf '\\000\\001\\002\\377' > bin.dat"],
                                   artifacts=["out.txt", "bin.dat", "missing.txt"]))
        arts = {a["path"]: b64(a.get("content")) for a in body["project"]["artifacts"]}
        self.assertEqual(arts, {"out.txt": b"hello\n", "bin.dat": b"\x00\x01\x02\xff"})

    def test_artifacts_no_links_and_after_failure(self):
        body = self.run_ok(project(["echo secret > real.txt; ln -s real.txt link.txt; ln -s /etc/passwd pw; "
                                    "mkdir d; echo in > d/f; exit 4"],
                                   artifacts=["link.txt", "pw", "d", "d/f", "real.txt"]))
        p = body["project"]
        self.assertEqual(p["steps"][0]["exitCode"], 4)
        arts = {a["path"]: b64(a.get("content")) for a in p.get("artifacts", [])}
        self.assertEqual(arts, {"d/f": b"in\n", "real.txt": b"secret\n"})

    def test_stop_at_first_failure(self):  # (44)
        body = self.run_ok(project(["tsc --noEmit", "echo SHOULD_NOT_RUN"], TS_TYPE_ERROR, timeoutMs=60000))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED")
        self.assertEqual(len(p["steps"]), 1)
        self.assertNotEqual(p["steps"][0].get("exitCode", 0), 0)
        self.assertFalse(p["steps"][0].get("timedOut"))
        self.assertIn(b"error TS2322", b64(p["steps"][0].get("stdout")))
        self.assertNotIn(b"SHOULD_NOT_RUN", json.dumps(body).encode())
        body = self.run_ok(project(['node -e "let x = ; "', "echo SHOULD_NOT_RUN"]))  # and in plain JS
        p = body["project"]
        self.assertEqual(len(p["steps"]), 1)
        self.assertIn(b"SyntaxError", b64(p["steps"][0].get("stderr")))

    def test_step_timeout(self):  # (47)
        t0 = time.monotonic()
        body = self.run_ok(project(["echo started; sleep 30"], timeoutMs=1500))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_TIMED_OUT")
        self.assertEqual(p.get("outcomeDetail"), "step 1 exceeded its time budget")
        self.assertTrue(p["steps"][0].get("timedOut"))
        self.assertEqual(p["steps"][0].get("exitCode"), 124)
        self.assertEqual(b64(p["steps"][0].get("stdout")), b"started\n")
        self.assertLess(time.monotonic() - t0, 15)

    def test_forged_report_ignored(self):  # (46): a step's frame is step output, not a report
        body = self.run_ok(project(["printf '%s' '" + FORGED.replace("\n", "'\"\\n\"'") + "'", "echo after"]))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED")
        self.assertEqual(len(p["steps"]), 2)
        self.assertIn(b"<<<PLIMSOLL_REPORT_V2>>> 2 " + b"0" * 64, b64(p["steps"][0].get("stdout")))

    def test_step_cannot_reach_the_runner(self):
        body = self.run_ok(project(["for f in /proc/1/mem /proc/1/fd/0; do (exec 3<$f) 2>/dev/null && echo open $f; done; "
                                    "(echo x > /proc/1/fd/1) 2>/dev/null && echo wrote; echo done"]))
        self.assertEqual(b64(body["project"]["steps"][0].get("stdout")), b"done\n")

    def test_refused_before_any_container(self):  # (9, 10)
        for files in ([("../escape.ts", "x")], [("/etc/evil", "x")], [("a\\b", "x")], [("a" * 1025, "x")],
                      [("x.js", "1"), ("x.js", "2")]):
            self.assertRefused(self.d.call("Run", project(["true"], files)), "invalid_argument", "request", 400)
        self.assertRefused(self.d.call("Run", project([])), "invalid_argument", "request", 400)
        self.assertRefused(self.d.call("Run", project(["true"] * 21)), "invalid_argument", "request", 400)
        self.assertRefused(self.d.call("Run", js("")), "invalid_argument", "request", 400)

    def test_faults_fork_bomb_fill_flood_background(self):
        # A fork bomb meets PidsLimit; filling /work meets its size; a flood meets the 1 MiB cap; a
        # background process dies with its step. The daemon stays healthy throughout.
        body = self.run_ok(project(["f() { f | f & }; f; sleep 2; echo survived"], timeoutMs=8000))
        self.assertIn(body["project"].get("outcome"), ("PROJECT_OUTCOME_COMPLETED", "PROJECT_OUTCOME_TIMED_OUT"))
        body = self.run_ok(project(["head -c 300000000 /dev/zero > big; echo rc=$?"]))
        step = body["project"]["steps"][0]
        self.assertIn(b"rc=1", b64(step.get("stdout")))
        self.assertIn(b"No space left", b64(step.get("stderr")))
        body = self.run_ok(project(["yes plimsoll | head -c 5000000"]))
        step = body["project"]["steps"][0]
        self.assertTrue(step.get("stdoutTruncated"))
        self.assertEqual(len(b64(step.get("stdout"))), 1024 * 1024)
        t0 = time.monotonic()
        body = self.run_ok(project(["sleep 100 & echo started", "echo second"], timeoutMs=20000))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED")
        self.assertEqual(len(p["steps"]), 2)
        self.assertLess(time.monotonic() - t0, 10)
        self.snippet('console.log("still fine")')

    def test_memory_limit_is_a_result(self):
        body = self.snippet("const a=[]; while(true) a.push(new Uint8Array(1<<20).fill(1));", timeoutMs=20000)
        j = body["javascript"]
        self.assertFalse(j.get("timedOut"))
        self.assertNotEqual(j.get("exitCode", 0), 0)

    def test_concurrent(self):
        def one(i):
            return self.snippet("console.log(%d * 2)" % i)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            outs = list(ex.map(one, range(6)))
        self.assertEqual([b64(o["javascript"]["stdout"]) for o in outs], [b"%d\n" % (i * 2) for i in range(6)])


class B_RunscBookworm(DockerCase):
    """The older gVisor kept registered as runsc-bookworm (issue 26's before/after bench): the
    same probe must name a different platform, ptrace, from the same kind of observation."""
    ENV = {"SANDBOX_DOCKER_RUNTIME": "runsc-bookworm"}

    def test_platform_ptrace(self):
        card = json.loads(self.d.call("Describe", {})[2])["evidence"]
        self.assertEqual(card["isolation"], "kernel")
        self.assertIn("0.0~20221219", card["runtimeVersion"])
        self.assertTrue(card["runtimeVersion"].endswith(", platform ptrace"), card["runtimeVersion"])
        plat = {c["name"]: c for c in card["checks"]}["probe.platform"]
        self.assertTrue(plat["passed"], plat)
        self.assertRegex(plat["observed"], r"^ptrace: [1-9][0-9]* stub processes, [0-9]+ threads, [1-9][0-9]* Sentry-traced; ")


class B_Runsc(DockerCase):
    """runsc: tier kernel, proven at startup."""
    ENV = {"SANDBOX_DOCKER_RUNTIME": "runsc"}

    def test_kernel_tier(self):
        st, _, data, _ = self.d.call("Describe", {})
        d = json.loads(data)
        self.assertEqual(d["isolation"], "kernel")
        card = d["evidence"]
        self.assertEqual(card["isolation"], "kernel")
        self.assertEqual(card["runtime"], "runsc")
        self.assertIn("runsc", card["runtimeVersion"])
        # issue 26: Debian trixie's gVisor, on the systrap platform seen in the running sandbox
        self.assertIn("0.0~20240729", card["runtimeVersion"])
        self.assertTrue(card["runtimeVersion"].endswith(", platform systrap"), card["runtimeVersion"])
        names = {c["name"]: c for c in card["checks"]}
        plat = names["probe.platform"]
        self.assertTrue(plat["passed"], plat)
        self.assertRegex(plat["observed"], r"^systrap: [1-9][0-9]* stub processes, [0-9]+ threads, 0 Sentry-traced; "
                                           r"runsc state: systrap$")
        self.assertTrue(names["probe.kernel"]["passed"])
        self.assertIn("gVisor", names["probe.kernel"]["observed"])
        self.assertNotIn("probe.seccomp", names)  # (28) no profile under runsc
        self.assertFalse(any(line.startswith("seccomp ") for line in card["confinement"]))
        self.assertTrue(all(c["passed"] for c in card["checks"]))

    def test_kernel_floor_accepted(self):  # (14, 33)
        body = self.snippet('console.log("hi",1+2)', minimumIsolation="kernel")
        self.assertEqual(body["isolation"], "kernel")
        self.assertEqual(b64(body["javascript"]["stdout"]), b"hi 3\n")
        body = self.run_ok(project(["node -e 'console.log(6*7)'"], minimumIsolation="kernel"))
        self.assertEqual(body["isolation"], "kernel")
        self.assertEqual(b64(body["project"]["steps"][0]["stdout"]), b"42\n")
        self.assertRefused(self.d.call("Run", js("1", minimumIsolation="vm")), "failed_precondition", "isolation")

    def test_typescript_project(self):  # (42, 44) under gVisor
        body = self.run_ok(project(["tsc --noEmit", "tsx main.ts"], TS_FILES, timeoutMs=90000))
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED", p)
        self.assertEqual(len(p["steps"]), 2, p)
        self.assertEqual(b64(p["steps"][1].get("stdout")), b"sum 5\n")
        body = self.run_ok(project(["tsc --noEmit", "echo SHOULD_NOT_RUN"], TS_TYPE_ERROR, timeoutMs=90000))
        p = body["project"]
        self.assertEqual(len(p["steps"]), 1)
        self.assertNotEqual(p["steps"][0].get("exitCode", 0), 0)
        self.assertIn(b"error TS2322", b64(p["steps"][0].get("stdout")))

    def test_timeout_and_lockdown(self):
        body = self.snippet("setTimeout(()=>{},60000)", timeoutMs=1000)
        self.assertTrue(body["javascript"].get("timedOut"))
        code = ("const fs=require('fs');let r;try{fs.writeFileSync('/x','x');r='written'}catch(e){r=e.code}"
                "console.log(r, fs.readFileSync('/proc/self/status','utf8').match(/^Uid:\\s+(\\d+)/m)[1])")
        body = self.snippet(code)
        out = b64(body["javascript"]["stdout"]).split()
        self.assertIn(out[0], (b"EROFS", b"EACCES"))
        self.assertEqual(out[1], b"61000")


class C_Startup(unittest.TestCase):
    """Configurations that must stop startup, with a message that says why."""

    def fails(self, env, needle):
        full = dict(BASE_ENV)
        full.update(env)
        d = Daemon(full, expect_start=False)
        rc = d.wait_exit(120)
        out = "\n".join(d.lines)
        self.assertNotEqual(rc, 0, out)
        self.assertIn(needle, out)

    def test_remote_daemon(self):  # (32)
        for host in ("tcp://127.0.0.1:2375", "ssh://me@host", "https://docker.example:2376", "docker"):
            self.fails({"DOCKER_HOST": host}, "remote daemon")

    def test_dockerd_absent(self):
        self.fails({"DOCKER_HOST": "unix:///nonexistent/plimsoll-docker.sock"}, "nonexistent/plimsoll-docker.sock")

    def test_runtime_not_registered(self):  # (33)
        self.fails({"SANDBOX_DOCKER_RUNTIME": "kata-fc"}, "not registered")

    def test_bad_image_refs(self):  # (40)
        self.fails({"SANDBOX_DOCKER_IMAGE": "--runtime=runc"}, "starts with '-'")
        self.fails({"SANDBOX_DOCKER_PROJECT_IMAGE": "-network=host"}, "starts with '-'")
        self.fails({"SANDBOX_DOCKER_IMAGE": "plimsoll/does-not-exist:never"}, "does-not-exist")

    def test_pinning_required(self):  # (31)
        self.fails({"SANDBOX_REQUIRE_PINNED_IMAGES": "1"}, "not pinned")

    def test_guest_uid_on_host(self):
        self.fails({"SANDBOX_GUEST_UID": "0"}, "SANDBOX_GUEST_UID")

    def test_hostile_images(self):
        tags = []
        try:
            tags.append("plimsoll-test/ldpreload:1")
            import_image(tags[-1], ["ENV LD_PRELOAD=/tmp/evil.so"])
            self.fails({"SANDBOX_DOCKER_IMAGE": tags[-1]}, "LD_PRELOAD")
            tags.append("plimsoll-test/volume:1")
            import_image(tags[-1], ["VOLUME /data"])
            self.fails({"SANDBOX_DOCKER_PROJECT_IMAGE": tags[-1]}, "VOLUME")
            tags.append("plimsoll-test/empty:1")
            import_image(tags[-1], [])
            self.fails({"SANDBOX_DOCKER_IMAGE": tags[-1]}, "start container")  # dockerd cannot exec env
            # (48) env runs but there is no /bin/sh: it exits 127 before our marker, which is an
            # error ("docker failed before our command"), never exit 127 as a result
            tags.append("plimsoll-test/nosh:1")
            import_image(tags[-1], [], host_closure("/usr/bin/env"))
            self.fails({"SANDBOX_DOCKER_IMAGE": tags[-1]}, "before its start marker")
        finally:
            for t in tags:
                engine("DELETE", "/images/%s?force=1" % t)


class _Proxy:
    """A unix-socket relay in front of dockerd, so a test can take "dockerd" away and bring it back
    without touching the real one (which other suites on this machine use)."""

    def __init__(self, path):
        self.path = path
        self.conns = []
        self.lock = threading.Lock()
        self.lsock = None
        self.start()

    def start(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(self.path)
        self.lsock.listen(64)
        threading.Thread(target=self._accept, args=(self.lsock,), daemon=True).start()

    def _accept(self, ls):
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            try:
                u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                u.connect(SOCK)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    b.shutdown(socket.SHUT_WR)
                    return
                b.sendall(data)
        except OSError:
            return

    def cut(self):
        """dockerd "stops": no new connections, every open one dropped."""
        self.lsock.close()
        os.unlink(self.path)
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.conns = []


class D_Outage(unittest.TestCase):
    """dockerd going away mid-run and coming back (through a relay, never the real daemon)."""

    def test_dockerd_stops_mid_run(self):
        tmp = tempfile.mkdtemp(prefix="plimsoll-docker-test-")
        path = os.path.join(tmp, "docker.sock")
        proxy = _Proxy(path)
        env = dict(BASE_ENV)
        env["DOCKER_HOST"] = "unix://" + path
        # Another daemon's leftovers (Z_NoLeftovers judges those) are not this daemon's to reap.
        before = {c["Id"] for c in our_containers()}
        d = Daemon(env, timeout=180)
        try:
            st, _, data, _ = d.call("Run", js('console.log("up")'))
            self.assertEqual(st, 200, data)
            time.sleep(2)  # let the pool settle
            mine = {c["Id"] for c in our_containers()} - before
            result = {}

            def long_run():
                result["answer"] = d.call("Run", js("setTimeout(()=>console.log('late'), 4000)"))
            t = threading.Thread(target=long_run)
            t.start()
            time.sleep(1.5)
            proxy.cut()
            t.join(60)
            st, hdrs, data, _ = result["answer"]
            body = json.loads(data)
            self.assertNotEqual(st, 200, body)  # an infrastructure error, never a result
            self.assertIn(body["code"], ("internal", "unavailable"))
            self.assertFalse(body.get("details"))  # unmarked: code may have run
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and d.request("GET", "/readyz")[0] == 200:
                time.sleep(0.5)
            self.assertEqual(d.request("GET", "/readyz")[0], 503)
            proxy.start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and d.request("GET", "/readyz")[0] != 200:
                time.sleep(0.5)
            self.assertEqual(d.request("GET", "/readyz")[0], 200)
            # every container that lived through the outage is reaped once dockerd is back
            deadline = time.monotonic() + 30
            left = mine
            while time.monotonic() < deadline and left:
                left = mine & {c["Id"] for c in our_containers()}
                time.sleep(0.5)
            self.assertEqual(left, set())
            st, _, data, _ = d.call("Run", js('console.log("back")'))
            self.assertEqual(st, 200, data)
            self.assertEqual(b64(json.loads(data)["javascript"]["stdout"]), b"back\n")
        finally:
            rc = d.stop()
            proxy.cut()
            os.rmdir(tmp)
        self.assertEqual(rc, 0, "\n".join(d.lines[-30:]))


class E_Sweep(unittest.TestCase):
    def test_startup_sweep_reaps_only_expired(self):
        """Labelled containers past deadline + 5 min are reaped at startup; others are left alone."""
        ids = {}
        now = int(time.time())
        for name, deadline in (("expired", now - 301), ("live", now + 3600)):
            spec = {"Image": image_id(SNIPPET_IMAGE), "Entrypoint": ["/usr/bin/env"], "Cmd": ["true"],
                    "Labels": {LABEL: "orphan-test", "org.plimsoll.deadline": str(deadline)},
                    "HostConfig": {"NetworkMode": "none"}}
            st, body = engine("POST", "/containers/create", json.dumps(spec).encode(),
                              {"Content-Type": "application/json"})
            self.assertEqual(st, 201, body)
            ids[name] = json.loads(body)["Id"]
        try:
            with Daemon(dict(BASE_ENV), timeout=180):
                present = {c["Id"] for c in our_containers()}
                self.assertNotIn(ids["expired"], present)
                self.assertIn(ids["live"], present)
        finally:
            for cid in ids.values():
                engine("DELETE", "/containers/%s?force=1" % cid)


class Z_NoLeftovers(unittest.TestCase):
    def test_no_container_left_behind(self):
        # every daemon above has stopped: none of their containers may remain
        left = [(c["Id"][:12], c["State"], c["Labels"].get(LABEL)) for c in our_containers()]
        self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
