"""Grants on the docker provider over real HTTP (issue 6 item 5; providers.md §5.4): the per-run
unix socket bind-mounted at /run/host-api.sock, the node client preloaded into snippets and into
every project step, under runc (tier container) and under gVisor's runsc (tier kernel).

A loopback upstream records every request it receives, so each test states exactly what left
the host: an allowed call arrives once with the host's credential; refused targets never arrive;
a call made after the run ended never arrives; at most 16 calls are in flight at once. The guest
is hostile: it dumps its environment, reads every file it can, and talks raw HTTP to the socket;
the credential must appear nowhere in what it sees.

Needs what tests/blackbox/test_docker.py needs (dockerd, runsc registered with --host-uds=open,
the images plimsoll/snippet and plimsoll/project: scripts/docker-setup.sh). A missing
prerequisite is a FAILURE, never a skip. Standard library only.
"""
import base64
import hashlib
import json
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Daemon, Upstream, WireCase  # noqa: E402
from test_docker import BASE_ENV, prerequisites  # noqa: E402

# The token's prefix is not secret: the guest searches for it without knowing the token.
TOKEN_PREFIX = "plimsoll-upstream-credential-"
TOKEN = TOKEN_PREFIX + secrets.token_hex(16)
CALLER_TOKEN = "alice-docker-grants-token-0123456789"


def setUpModule():
    missing = prerequisites()
    if missing:
        raise AssertionError("the docker grants suite cannot run on this machine; missing:\n  - " +
                             "\n  - ".join(missing))


def out_of(body):
    j = body.get("javascript") or {}
    return (base64.b64decode(j.get("stdout", "")), base64.b64decode(j.get("stderr", "")))


# Raw HTTP over the socket, bypassing the client's own gate: what the broker says to a guest that
# skips the client. Prints one JSON line per target: {target, status, body}.
RAW = r"""
const http = require('http');
function raw(method, path, body) {
  return new Promise(res => {
    const h = body === undefined ? {} : {'content-length': Buffer.byteLength(body)};
    const r = http.request({socketPath: process.env.HOST_API_SOCKET, method, path, headers: h, agent: false},
      rs => { let b = ''; rs.on('data', c => b += c); rs.on('end', () => res({status: rs.statusCode, body: b})); });
    r.on('error', e => res({status: 0, body: String(e.code || e.message)}));
    if (body !== undefined) r.write(body);
    r.end();
  });
}
"""

# The hostile guest: environment, every readable file (bounded), the socket, searched for the
# token's public prefix; it prints what it found, never the file contents.
SNOOP = RAW + r"""
const fs = require('fs');
const PREFIX = %s.join('-') + '-';  // assembled here: the script's own file must not match
const found = [];
let files = 0, bytes = 0;
const t0 = Date.now();
function look(where, text) { if (text.includes(PREFIX) || text.includes('Bear' + 'er ')) found.push(where); }
look('env', JSON.stringify(process.env));
function walk(dir, depth) {
  if (depth > 12 || Date.now() - t0 > 8000 || files > 20000) return;
  let ents; try { ents = fs.readdirSync(dir, {withFileTypes: true}); } catch (e) { return; }
  for (const e of ents) {
    const p = (dir === '/' ? '' : dir) + '/' + e.name;
    if (p === '/proc' || p === '/sys' || p === '/dev') continue;
    if (e.isDirectory()) { walk(p, depth + 1); continue; }
    if (!e.isFile()) continue;
    try {
      const fd = fs.openSync(p, 'r'); const buf = Buffer.alloc(1 << 20);
      const n = fs.readSync(fd, buf, 0, buf.length, 0); fs.closeSync(fd);
      files++; bytes += n; look(p, buf.subarray(0, n).toString('latin1'));
    } catch (e) {}
  }
}
walk('/', 0);
for (const p of fs.readdirSync('/proc').filter(x => /^[0-9]+$/.test(x)).map(x => '/proc/' + x)
       .concat(['/proc/self'])) {
  for (const f of ['environ', 'cmdline', 'mountinfo']) {
    try { look(p + '/' + f, fs.readFileSync(p + '/' + f, 'latin1')); files++; } catch (e) {}
  }
}
(async () => {
  const answers = [];
  for (const [m, t, b] of [['GET', '/'], ['GET', '/v1/items/1'], ['POST', '/v1/items/2', '{}'],
                           ['GET', '/v1/items/%%2e%%2e'], ['OPTIONS', '*'], ['GET', '/../../etc/passwd']]) {
    const a = await raw(m, t, b); answers.push(a.status); look('socket ' + m + ' ' + t, a.body);
  }
  console.log(JSON.stringify({env: process.env, files, bytes, found, answers}));
})();
""" % json.dumps(TOKEN_PREFIX.rstrip("-").split("-"))


class GrantsDocker(WireCase):
    """One daemon per class; subclasses set ENV and ISOLATION."""
    ENV = {}
    ISOLATION = None

    @classmethod
    def setUpClass(cls):
        cls.up = Upstream()
        cls.tmp = tempfile.mkdtemp(prefix="plimsoll-grants-docker-")
        clients = os.path.join(cls.tmp, "clients.json")
        grants = os.path.join(cls.tmp, "grants.json")
        with open(clients, "w") as f:
            json.dump({"clients": [{"id": "alice", "token_sha256": hashlib.sha256(CALLER_TOKEN.encode()).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        with open(grants, "w") as f:
            json.dump({"profiles": {"items": {
                "base_url": "http://127.0.0.1:%d" % cls.up.port,
                "allow": ["GET /v1/items/*", "POST /v1/items/*", "GET /v1/slow/*"],
                "allowed_callers": ["alice"],
                "token": {"type": "static", "env": "ITEMS_TOKEN"},
                "max_calls": 200}}}, f)
        env = {k: v for k, v in BASE_ENV.items() if k != "PLIMSOLL_INSECURE"}
        # Each run's socket directory goes under the service's runtime directory (systemd's
        # RuntimeDirectory=); a private one here lets the tests watch it come and go.
        cls.rundir = os.path.join(cls.tmp, "run")
        os.mkdir(cls.rundir, 0o700)
        env.update({"PLIMSOLL_CLIENTS_FILE": clients, "PLIMSOLL_GRANTS_FILE": grants, "ITEMS_TOKEN": TOKEN,
                    "RUNTIME_DIRECTORY": cls.rundir})
        env.update(cls.ENV)
        cls.d = Daemon(env, timeout=180)

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        cls.up.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert rc == 0, "\n".join(cls.d.lines[-30:])
        assert not any(TOKEN in line for line in cls.d.lines), "the token reached the daemon's log"

    def run_ok(self, msg):
        st, _, data, _ = self.d.call("Run", msg, token=CALLER_TOKEN)
        body = json.loads(data)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["isolation"], self.ISOLATION)
        return body

    def snippet(self, code, timeout_ms=None):
        msg = {"protocol": 3, "javascript": {"code": code, "grantProfile": "items"}}
        if timeout_ms:
            msg["timeoutMs"] = timeout_ms
        return self.run_ok(msg)

    def test_describe(self):
        st, _, data, _ = self.d.call("Describe", {}, token=CALLER_TOKEN)
        d = json.loads(data)
        self.assertEqual(d["isolation"], self.ISOLATION)
        self.assertTrue(d.get("supportsJavascriptGrants"), d)
        self.assertTrue(d.get("supportsProjectGrants"), d)
        checks = {c["name"]: c for c in d["evidence"]["checks"]}
        for name in ("grants.snippet", "grants.project"):
            self.assertTrue(checks[name]["passed"], checks.get(name))
            self.assertIn("%2e%2e?q=1", checks[name]["observed"])  # the raw target crossed unchanged
        self.assertTrue(any("/run/host-api.sock" in line for line in d["evidence"]["confinement"]))

    def test_allowed_call_reaches_upstream_once_with_the_host_credential(self):
        n0 = self.up.count()
        body = self.snippet('host.post("/v1/items/42", {"a": 1}).then(r => console.log(JSON.stringify(r)))'
                            '.catch(e => console.log("ERR", e.message))')
        out, err = out_of(body)
        self.assertEqual(json.loads(out), {"id": "42", "method": "POST"}, (out, err))
        seen = self.up.since(n0)
        self.assertEqual(len(seen), 1, seen)
        self.assertEqual(seen[0]["path"], "/v1/items/42")
        self.assertEqual(seen[0]["method"], "POST")
        self.assertEqual(seen[0]["headers"].get("Authorization"), "Bearer " + TOKEN)
        self.assertEqual(json.loads(seen[0]["body"]), {"a": 1})
        self.assertNotIn("Host-Api-Socket", seen[0]["headers"])
        self.assertNotIn(TOKEN.encode(), out + err)

    def test_forbidden_targets_never_leave(self):
        n0 = self.up.count()
        code = RAW + r"""
(async () => {
  const r = {};
  for (const t of ['/v1/items/%2e%2e', '/v1/items/../x', '/v1/items/1?x=1', '/v1/items/%2F', '/v1/admin/1',
                   '/v1/items/1#f', '//v1/items/1', '/v1/items/./1'])
    r[t] = await raw('GET', t);
  r['DELETE'] = await raw('DELETE', '/v1/items/1');
  r.gate = await host.get('/v1/items/%2e%2e').then(() => 'sent', e => e.message);
  console.log(JSON.stringify(r));
})();
"""
        out, err = out_of(self.snippet(code))
        r = json.loads(out)
        for t, a in r.items():
            if t == "gate":
                continue
            self.assertEqual(a["status"], 403, (t, a))
            self.assertEqual(a["body"], "forbidden by sandbox capability allowlist\n", (t, a))
        self.assertIn("not permitted by sandbox capability", r["gate"])
        self.assertEqual(self.up.since(n0), [])

    def test_project_steps_call_host(self):
        n0 = self.up.count()
        call = ('host.get("/v1/items/" + process.argv[2]).then(r => console.log("got", r.id))'
                '.catch(e => { console.log("ERR", e.message); process.exit(3) })\n')
        msg = {"protocol": 3, "project": {"files": [{"path": "call.js", "content": call}],
                                          "steps": ["node call.js 7", "node call.js 8 && echo $HOST_API_SOCKET"],
                                          "grantProfile": "items"}}
        body = self.run_ok(msg)
        p = body["project"]
        self.assertEqual(p.get("outcome"), "PROJECT_OUTCOME_COMPLETED", p)
        outs = [base64.b64decode(s.get("stdout", "")) for s in p["steps"]]
        self.assertEqual(outs, [b"got 7\n", b"got 8\n/run/host-api.sock\n"], p)
        seen = self.up.since(n0)
        self.assertEqual(sorted(s["path"] for s in seen), ["/v1/items/7", "/v1/items/8"])
        self.assertTrue(all(s["headers"].get("Authorization") == "Bearer " + TOKEN for s in seen))

    def snooped(self, out, err, min_files):
        self.assertNotIn(TOKEN.encode(), out + err)
        self.assertNotIn(TOKEN[len(TOKEN_PREFIX):].encode(), out + err)
        r = json.loads(out)
        self.assertEqual(r["found"], [], r["found"])
        self.assertGreater(r["files"], min_files)  # it really looked
        self.assertEqual(r["env"].get("HOST_API_SOCKET"), "/run/host-api.sock")
        self.assertFalse(any(TOKEN_PREFIX in v for v in r["env"].values()))
        self.assertEqual(r["answers"], [403, 200, 200, 403, 403, 403])

    def test_token_never_reaches_the_guest(self):
        out, err = out_of(self.snippet(SNOOP, timeout_ms=25000))
        self.snooped(out, err, 20)
        msg = {"protocol": 3, "timeoutMs": 30000,
               "project": {"files": [{"path": "snoop.js", "content": SNOOP}], "steps": ["node snoop.js"],
                           "grantProfile": "items"}}
        step = self.run_ok(msg)["project"]["steps"][0]
        self.snooped(base64.b64decode(step.get("stdout", "")), base64.b64decode(step.get("stderr", "")), 100)

    def test_late_call_after_the_run_never_arrives(self):
        n0 = self.up.count()
        # A detached background process keeps calling after the snippet returned.
        bg = (RAW + "let n = 0; setInterval(() => { raw('GET', '/v1/items/late' + (n++)); }, 25);"
              "setTimeout(() => process.exit(0), 4000);")
        code = ("const cp = require('child_process');"
                "const c = cp.spawn('node', ['-e', %s], {detached: true, stdio: 'ignore'}); c.unref();"
                "host.get('/v1/items/early').then(r => console.log('early', r.id));") % json.dumps(bg)
        out, _ = out_of(self.snippet(code))
        self.assertEqual(out, b"early early\n")
        ended = self.up.count()
        time.sleep(2.5)
        late = [s["path"] for s in self.up.since(ended) if "/late" in s["path"]]
        self.assertEqual(late, [], "a call made after the run ended reached the upstream")
        # Only the calls made while the run lived (the early one, and any the background process
        # made before the end) reached it; nothing after.
        self.assertIn("/v1/items/early", [s["path"] for s in self.up.since(n0)])

    def test_run_ends_with_calls_in_flight(self):
        # The guest leaves while 8 calls wait on a slow upstream: the run returns without
        # waiting for them (their threads hold the broker run), the broker ends them, and the
        # daemon carries on (under ASan: without touching freed memory).
        code = ("for (let i = 0; i < 8; i++) host.get('/v1/slow/f' + i).catch(() => {});"
                "setTimeout(() => process.exit(0), 150);")
        t0 = time.time()
        out, _ = out_of(self.snippet(code))
        self.assertLess(time.time() - t0, 5)
        time.sleep(1.5)
        out, _ = out_of(self.snippet('host.get("/v1/items/after").then(r => console.log(r.id))'))
        self.assertEqual(out, b"after\n")

    def test_64_concurrent_calls(self):
        with self.up.lock:
            self.up.max_inflight = 0
        n0 = self.up.count()
        code = r"""
(async () => {
  const t0 = Date.now();
  const rs = await Promise.all(Array.from({length: 64}, (_, i) =>
    host.get('/v1/slow/' + i).then(() => 'ok', e => e.message.slice(0, 40))));
  const tally = {};
  for (const r of rs) tally[r] = (tally[r] || 0) + 1;
  console.log(JSON.stringify({n: rs.length, tally, ms: Date.now() - t0}));
})();
"""
        t0 = time.time()
        out, err = out_of(self.snippet(code, timeout_ms=20000))
        r = json.loads(out)
        self.assertEqual(r["n"], 64, (out, err))
        # the first 16 to reach the broker get its slots; the rest see its capacity refusal
        self.assertGreaterEqual(r["tally"].get("ok", 0), 16, r)
        self.assertLessEqual(self.up.max_inflight, 16)
        self.assertLessEqual(self.up.count() - n0, 64)
        self.assertEqual(self.up.count() - n0, r["tally"].get("ok", 0))
        # every refusal is the broker's, never a hang: connections past the socket's 32 wait
        # in its backlog and are served in turn
        for k in r["tally"]:
            self.assertTrue(k == "ok" or k.startswith("host api 429: host api broker is at capa"), r)
        self.assertLess(time.time() - t0, 20)

    def test_socket_directory_lives_exactly_as_long_as_the_run(self):
        self.assertEqual(os.listdir(self.rundir), [])
        seen = {}

        def watch():
            deadline = time.time() + 20
            while time.time() < deadline and "dirs" not in seen:
                dirs = [d for d in os.listdir(self.rundir) if d.startswith("plimsoll-broker-")]
                if dirs:
                    p = os.path.join(self.rundir, dirs[0])
                    try:
                        seen["dirs"] = dirs
                        seen["mode"] = oct(os.stat(p).st_mode & 0o777)
                        seen["files"] = sorted(os.listdir(p))
                        seen["sock"] = oct(os.stat(os.path.join(p, "host-api.sock")).st_mode & 0o777)
                        seen["mjs"] = oct(os.stat(os.path.join(p, "host-api.mjs")).st_mode & 0o777)
                    except OSError as e:
                        seen["error"] = str(e)
                time.sleep(0.01)

        w = threading.Thread(target=watch)
        w.start()
        out, _ = out_of(self.snippet('host.get("/v1/items/1").then(() => setTimeout(() => console.log("done"), 1500))'))
        w.join()
        self.assertEqual(out, b"done\n")
        self.assertEqual(len(seen.get("dirs", [])), 1, seen)
        self.assertEqual(seen["mode"], "0o700", seen)
        self.assertEqual(seen["files"], ["host-api.mjs", "host-api.sock"], seen)
        self.assertEqual((seen["sock"], seen["mjs"]), ("0o666", "0o444"), seen)
        self.assertEqual(os.listdir(self.rundir), [])  # gone before the answer came back

    def test_mounts_from_inside(self):
        code = r"""
const fs = require('fs'), r = {};
const t = (k, f) => { try { f(); r[k] = 'ok'; } catch (e) { r[k] = e.code; } };
t('write_preload', () => fs.writeFileSync('/run/plimsoll-host.mjs', 'x'));
t('unlink_sock', () => fs.unlinkSync('/run/host-api.sock'));
t('write_sock', () => fs.writeFileSync('/run/host-api.sock', 'x'));
t('mkdir_run', () => fs.mkdirSync('/run/x'));
r.preload_mode = (fs.statSync('/run/plimsoll-host.mjs').mode & 0o777).toString(8);
r.sock = fs.statSync('/run/host-api.sock').isSocket();
r.ifaces = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).map(l => l.split(':')[0].trim())
  .filter(Boolean).join(',');
console.log(JSON.stringify(r));
"""
        r = json.loads(out_of(self.snippet(code))[0])
        for k in ("write_preload", "unlink_sock", "write_sock", "mkdir_run"):
            self.assertNotEqual(r[k], "ok", r)
        self.assertEqual(r["preload_mode"], "444")
        self.assertTrue(r["sock"])
        self.assertEqual(r["ifaces"], "lo")  # a grant adds no network

    def test_no_grant_no_host(self):
        msg = {"protocol": 3, "javascript": {"code": "console.log(typeof host, process.env.HOST_API_SOCKET)"}}
        out, _ = out_of(self.run_ok(msg))
        self.assertEqual(out, b"undefined undefined\n")


class A_Runc(GrantsDocker):
    ENV = {}
    ISOLATION = "container"


class B_Runsc(GrantsDocker):
    ENV = {"SANDBOX_DOCKER_RUNTIME": "runsc"}
    ISOLATION = "kernel"


del GrantsDocker  # the shared body runs only through the two runtimes above


if __name__ == "__main__":
    unittest.main(verbosity=2)
