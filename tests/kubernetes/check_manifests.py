"""The Kubernetes manifests (contrib/kubernetes/) checked against the daemon built from this tree
(issue 24 item 4; docs/fleet.md, "What the test checks"). No cluster is involved: the checks are
yamllint, the manifests' own consistency, the daemon's `-h` listing, its source's drain bound, the
security-context table of docs/fleet.md, and a real quickjs daemon started with the quickjs pod's
environment, uid and (empty) capability set, asked the probe and metrics paths over HTTPS.

Usage: check_manifests.py SOURCE_ROOT PLIMSOLLD QJS_WORKER GUESTIO (the build's daemon and the two
helpers it finds beside itself). Exit 1 naming every failed check; a check that
cannot run (yamllint or PyYAML missing, not root) fails too, naming why."""
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import http.client

try:
    import yaml
except ImportError:
    print("check_manifests: PyYAML is missing (Debian python3-yaml; scripts/install-deps.sh)", file=sys.stderr)
    sys.exit(1)

ROOT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
PLIMSOLLD = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else ""
HELPERS = [os.path.abspath(a) for a in sys.argv[3:5]]
KDIR = os.path.join(ROOT, "contrib", "kubernetes")
FLEET_MD = os.path.join(ROOT, "docs", "fleet.md")
DRAIN_MARGIN_S = 30          # docs/fleet.md, "Drain": sessions' end before, teardown after
POD_OVERHEAD_MB = 512        # docs/fleet.md: the daemon, zygote/templates' share and helpers
MICROVM_READY_VMS = 3        # two snippet VMs and one project VM kept ready (docs/microvm.md)
PROBE_HOST = "10.244.0.7"    # what a kubelet sends as Host: the pod's IP and the probe's port

failures = []


def fail(what):
    failures.append(what)


def load_all():
    """{file name: [documents]} of every *.yaml under contrib/kubernetes."""
    docs = {}
    for name in sorted(os.listdir(KDIR)):
        if name.endswith(".yaml"):
            with open(os.path.join(KDIR, name), encoding="utf-8") as f:
                docs[name] = [d for d in yaml.safe_load_all(f) if d is not None]
    return docs


def check_yamllint():
    exe = shutil.which("yamllint")
    if not exe:
        fail("yamllint is not installed (Debian yamllint; scripts/install-deps.sh)")
        return
    files = [os.path.join(KDIR, n) for n in sorted(os.listdir(KDIR)) if n.endswith((".yaml", ".yamllint"))]
    r = subprocess.run([exe, "-s", "-f", "parsable", "-c", os.path.join(KDIR, ".yamllint")] + files,
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("yamllint -s: " + (r.stdout + r.stderr).strip())


def check_kustomization(docs):
    k = docs.get("kustomization.yaml", [{}])[0]
    listed = set(k.get("resources", []))
    present = set(docs) - {"kustomization.yaml"}
    for n in sorted(listed - present):
        fail("kustomization.yaml lists %s, which does not exist" % n)
    for n in sorted(present - listed):
        fail("kustomization.yaml does not list %s" % n)


def daemon_variables():
    """(listed, stops): every variable `plimsolld -h` lists, and those whose setting stops startup."""
    r = subprocess.run([PLIMSOLLD, "-h"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail("plimsolld -h exited %d" % r.returncode)
        return set(), set()
    listed, stops = set(), set()
    for line in r.stdout.splitlines():
        m = re.match(r"^  ([A-Z][A-Z0-9_]+)\s+default\s", line)
        if m:
            listed.add(m.group(1))
            if "setting it stops startup" in line:
                stops.add(m.group(1))
    if len(listed) < 20:
        fail("plimsolld -h listed only %d variables: the listing's format changed" % len(listed))
    return listed, stops


def drain_bound():
    with open(os.path.join(ROOT, "src", "daemon", "main.c"), encoding="utf-8") as f:
        m = re.search(r"#define DRAIN_MAX_S (\d+)", f.read())
    if not m:
        fail("DRAIN_MAX_S not found in src/daemon/main.c")
        return None
    return int(m.group(1))


def doc_table():
    """The security-context table of docs/fleet.md, {pool: {column: cell}}."""
    with open(FLEET_MD, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- fleet-security-context: begin -->\n(.*?)<!-- fleet-security-context: end -->", text, re.S)
    if not m:
        fail("docs/fleet.md has no fleet-security-context table")
        return {}
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in m.group(1).strip().splitlines()]
    head, rows = rows[0], rows[2:]
    return {r[0].strip("`"): dict(zip(head, r)) for r in rows}


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def mem_mib(q):
    m = re.fullmatch(r"(\d+)(Mi|Gi)", str(q))
    if not m:
        fail("memory quantity %r is not NNNMi or NNGi" % q)
        return 0
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def pod_of(ds):
    return ds["spec"]["template"]["spec"]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_daemonset(name, ds, objs, listed, stops, drain, table):
    pool = ds["metadata"]["labels"].get("plimsoll.dev/pool")
    pod = pod_of(ds)
    where = "DaemonSet %s" % name
    labels = ds["spec"]["template"]["metadata"]["labels"]
    if not selects(ds["spec"]["selector"]["matchLabels"], labels):
        fail("%s: its selector does not select its own pods" % where)
    if len(pod["containers"]) != 1:
        fail("%s: one container expected" % where)
    c = pod["containers"][0]
    if "envFrom" in c:
        fail("%s: envFrom hides variable names from this check; set env one by one" % where)
    env = env_of(c)
    for v in sorted(env):
        if v not in listed:
            fail("%s sets %s, which plimsolld -h does not list" % (where, v))
        elif v in stops:
            fail("%s sets %s, whose setting stops startup" % (where, v))
    # Ports and probes.
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if "PLIMSOLL_ADDR" not in env or ports.get("rpc") != port_of(env["PLIMSOLL_ADDR"]):
        fail("%s: port rpc %s is not PLIMSOLL_ADDR's (%s)" % (where, ports.get("rpc"), env.get("PLIMSOLL_ADDR")))
    if "PLIMSOLL_METRICS_ADDR" not in env or ports.get("metrics") != port_of(env["PLIMSOLL_METRICS_ADDR"]):
        fail("%s: port metrics is not PLIMSOLL_METRICS_ADDR's" % where)
    scheme = "HTTPS" if env.get("PLIMSOLL_TLS_CERT") else "HTTP"
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/healthz")):
        g = c.get(probe, {}).get("httpGet", {})
        if g.get("path") != path or g.get("port") != "rpc" or g.get("scheme", "HTTP") != scheme:
            fail("%s: %s must be GET %s on port rpc over %s, is %s" % (where, probe, path, scheme, g))
    # Files from Secrets.
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for var in ("PLIMSOLL_CLIENTS_FILE", "PLIMSOLL_TLS_CERT", "PLIMSOLL_TLS_KEY"):
        path = env.get(var)
        if not path:
            fail("%s: %s is not set" % (where, var))
            continue
        src = [n for n, m in mounts.items() if os.path.dirname(path) == m["mountPath"].rstrip("/")]
        if not src or "secret" not in vols.get(src[0], {}) or not mounts[src[0]].get("readOnly"):
            fail("%s: %s=%s is not in a read-only Secret volume" % (where, var, path))
    # Drain, API access, environment hygiene.
    if drain is not None and pod.get("terminationGracePeriodSeconds", 30) < drain + DRAIN_MARGIN_S:
        fail("%s: terminationGracePeriodSeconds %s < DRAIN_MAX_S %d + %d" %
             (where, pod.get("terminationGracePeriodSeconds"), drain, DRAIN_MARGIN_S))
    for key in ("automountServiceAccountToken", "enableServiceLinks"):
        if pod.get(key) is not False:
            fail("%s: %s must be false" % (where, key))
    check_security(where, pool, pod, c, vols, table)
    check_resources(where, env, c)
    # Its headless Service.
    svcs = [o for o in objs if o["kind"] == "Service" and o["spec"].get("clusterIP") == "None"
            and selects(o["spec"]["selector"], labels) and "plimsoll.dev/pool" in o["spec"]["selector"]]
    if len(svcs) != 1:
        fail("%s: %d headless pool Services select its pods, want 1" % (where, len(svcs)))
    else:
        sp = svcs[0]["spec"]["ports"]
        if [(p["name"], p["port"], p["targetPort"]) for p in sp] != [("rpc", ports.get("rpc"), "rpc")]:
            fail("%s: its Service's ports %s are not rpc -> rpc" % (where, sp))
        if svcs[0]["spec"].get("publishNotReadyAddresses"):
            fail("%s: its Service publishes pods that are not ready" % where)
    return pool, env, ports, pod


def yes(cell):
    return cell.strip().lower() == "yes"


def check_security(where, pool, pod, c, vols, table):
    row = table.get(pool)
    if not row:
        fail("%s: pool %s has no row in docs/fleet.md's security-context table" % (where, pool))
        return
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    if str(uid) != row["runAsUser"]:
        fail("%s: runAsUser %s, docs/fleet.md says %s" % (where, uid, row["runAsUser"]))
    if uid not in (0, None) and not psc.get("runAsNonRoot"):
        fail("%s: a non-root pool must say runAsNonRoot" % where)
    priv = bool(csc.get("privileged"))
    if priv != yes(row["privileged"]):
        fail("%s: privileged %s, docs/fleet.md says %s" % (where, priv, row["privileged"]))
    if bool(pod.get("hostPID")) != yes(row["hostPID"]):
        fail("%s: hostPID %s, docs/fleet.md says %s" % (where, pod.get("hostPID"), row["hostPID"]))
    if not csc.get("readOnlyRootFilesystem"):
        fail("%s: the root file system must be read-only" % where)
    caps = csc.get("capabilities", {})
    want = row["capabilities added"]
    if priv:
        if not want.startswith("all"):
            fail("%s: privileged, but docs/fleet.md lists capabilities %s" % (where, want))
    else:
        if caps.get("drop") != ["ALL"] or csc.get("allowPrivilegeEscalation") is not False:
            fail("%s: an unprivileged pool must drop ALL and disallow privilege escalation" % where)
        wanted = [] if want == "none" else [w.strip() for w in want.split(",")]
        if sorted(caps.get("add", [])) != sorted(wanted):
            fail("%s: capabilities added %s, docs/fleet.md says %s" % (where, caps.get("add", []), wanted))
    for key, col in (("seccompProfile", "seccomp"), ("appArmorProfile", "AppArmor")):
        got = csc.get(key, psc.get(key, {})).get("type", "RuntimeDefault")
        if got != row[col]:
            fail("%s: %s %s, docs/fleet.md says %s" % (where, key, got, row[col]))
    hostpaths = sorted(v["hostPath"]["path"] for v in vols.values() if "hostPath" in v)
    want_paths = [] if row["host paths"] == "none" else sorted(re.findall(r"`([^`]+)`", row["host paths"]))
    if hostpaths != want_paths:
        fail("%s: host paths %s, docs/fleet.md says %s" % (where, hostpaths, want_paths))
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    for n, v in vols.items():
        if "hostPath" in v and mounts.get(n) != v["hostPath"]["path"]:
            fail("%s: host path %s is mounted at %s, not at its own path" % (where, v["hostPath"]["path"], mounts.get(n)))
    devs = sorted(k for k in c.get("resources", {}).get("limits", {}) if "/" in k)
    want_dev = [] if row["device"] == "none" else re.findall(r"`([^`]+)`", row["device"])
    if devs != want_dev:
        fail("%s: device resources %s, docs/fleet.md says %s" % (where, devs, want_dev))


def check_resources(where, env, c):
    res = c.get("resources", {})
    req, lim = res.get("requests", {}), res.get("limits", {})
    if "memory" not in lim or req.get("memory") != lim.get("memory"):
        fail("%s: memory request must equal its limit" % where)
        return
    if "cpu" not in req:
        fail("%s: no CPU request" % where)
    limit = mem_mib(lim["memory"])
    provider = env.get("SANDBOX_PROVIDER")
    total = int(env.get("SANDBOX_TOTAL_MEMORY_MB", "0"))
    per_run = int(env.get("SANDBOX_MEMORY_MB", "256"))
    if total <= 0:
        fail("%s: SANDBOX_TOTAL_MEMORY_MB must be set: the pod's budget is built on it" % where)
    if total < per_run:
        fail("%s: SANDBOX_TOTAL_MEMORY_MB %d below SANDBOX_MEMORY_MB %d" % (where, total, per_run))
    need = {"quickjs": total + POD_OVERHEAD_MB,
            "microvm": total + MICROVM_READY_VMS * per_run + POD_OVERHEAD_MB}.get(provider)
    if need is not None and limit < need:
        fail("%s: memory limit %d MiB below the %d MiB its runs may hold" % (where, limit, need))


def check_objects(docs, listed, stops, drain, table):
    objs = [d for ds in docs.values() for d in ds if d.get("kind") != "Kustomization"]
    sets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}
    if sorted(table) != sorted(o["metadata"]["labels"].get("plimsoll.dev/pool") for o in sets.values()):
        fail("the DaemonSets' pools %s are not docs/fleet.md's table's %s" %
             (sorted(o["metadata"]["labels"].get("plimsoll.dev/pool") for o in sets.values()), sorted(table)))
    pools = {}
    for name, ds in sorted(sets.items()):
        pool, env, ports, pod = check_daemonset(name, ds, objs, listed, stops, drain, table)
        pools[pool] = (env, ports, pod, ds["spec"]["template"]["metadata"]["labels"])
    # The docker-runsc pool: the gvisor RuntimeClass's nodes, not under it.
    rc = [o for o in objs if o["kind"] == "RuntimeClass" and o["metadata"]["name"] == "gvisor"]
    if "docker-runsc" in pools:
        env, _, pod, _ = pools["docker-runsc"]
        if not rc or rc[0].get("handler") != "runsc":
            fail("RuntimeClass gvisor with handler runsc is missing")
        elif pod.get("nodeSelector") != rc[0].get("scheduling", {}).get("nodeSelector"):
            fail("docker-runsc's nodeSelector is not the RuntimeClass gvisor's")
        if "runtimeClassName" in pod:
            fail("docker-runsc's pod must not run under a RuntimeClass (docs/fleet.md)")
        if env.get("SANDBOX_DOCKER_RUNTIME") != "runsc" or env.get("SANDBOX_MIN_ISOLATION") != "kernel":
            fail("docker-runsc must set SANDBOX_DOCKER_RUNTIME=runsc and SANDBOX_MIN_ISOLATION=kernel")
    # The metrics Service: every pool, the metrics port, annotations that say so.
    ms = [o for o in objs if o["kind"] == "Service" and "plimsoll.dev/pool" not in o["spec"]["selector"]]
    if len(ms) != 1:
        fail("want one metrics Service over every pool, found %d" % len(ms))
    else:
        m = ms[0]
        for pool, (env, ports, _, labels) in pools.items():
            if not selects(m["spec"]["selector"], labels):
                fail("the metrics Service does not select pool %s" % pool)
            if m["spec"]["ports"][0]["targetPort"] != "metrics" or m["spec"]["ports"][0]["port"] != ports.get("metrics"):
                fail("the metrics Service's port is not pool %s's metrics port" % pool)
        a = m["metadata"].get("annotations", {})
        metrics_ports = {p for (_, p, _, _) in pools.values() for p in [p.get("metrics")]}
        if a.get("prometheus.io/path") != "/metrics" or {int(a.get("prometheus.io/port", 0))} != metrics_ports:
            fail("the metrics Service's annotations %s do not name /metrics on %s" % (a, metrics_ports))
    # NetworkPolicy: no egress at all; ingress only from namespaces, to the two ports.
    nps = [o for o in objs if o["kind"] == "NetworkPolicy"]
    for pool, (env, ports, _, labels) in pools.items():
        mine = [n for n in nps if selects(n["spec"]["podSelector"].get("matchLabels", {}), labels)]
        eg = [n for n in mine if "Egress" in n["spec"].get("policyTypes", [])]
        ing = [n for n in mine if "Ingress" in n["spec"].get("policyTypes", [])]
        if not eg or any(n["spec"].get("egress") for n in eg):
            fail("pool %s: a NetworkPolicy must deny it every egress" % pool)
        if not ing:
            fail("pool %s: no ingress NetworkPolicy" % pool)
        for n in ing:
            for rule in n["spec"].get("ingress", []):
                peers = rule.get("from", [])
                if not peers or any(set(p) != {"namespaceSelector"} for p in peers):
                    fail("pool %s: ingress rule %s is not from namespaces only" % (pool, rule))
                rports = {p["port"] for p in rule.get("ports", [])}
                if not rports or not rports <= set(ports.values()):
                    fail("pool %s: ingress rule opens ports %s" % (pool, rports))
    return pools


# ---- the real daemon ---------------------------------------------------------------------------



def make_tls(d):
    cert, key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=plimsoll-quickjs",
                        "-addext", "subjectAltName=DNS:*.plimsoll-quickjs.plimsoll.svc.cluster.local,IP:127.0.0.1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("openssl could not make a certificate: " + r.stderr.strip())
        return None, None
    return cert, key


def ask(port, path, token=None, host=None):
    """GET over TLS without verifying, as a kubelet probe does. (status, body)"""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
    try:
        headers = {"Host": host or "127.0.0.1:%d" % port}
        if token:
            headers["Authorization"] = "Bearer " + token
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def wait_listening(proc, log, deadline_s):
    """The daemon's `listening` line (ports chosen by the kernel: PLIMSOLL_ADDR=127.0.0.1:0), or None."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        log.seek(0)
        for line in log.read().splitlines():
            if line.startswith("{") and '"event":"listening"' in line:
                return json.loads(line)
        if proc.poll() is not None:
            return None
        time.sleep(0.2)
    return None


def run_daemon(pools):
    """The quickjs pool's container, started as its uid with no capability, asked as a kubelet
    and a scraper would ask it."""
    if "quickjs" not in pools:
        fail("no quickjs pool to start a daemon from")
        return
    if os.geteuid() != 0:
        fail("the daemon check needs root, to start plimsolld as the quickjs pod's uid (setpriv)")
        return
    setpriv = shutil.which("setpriv")
    if not setpriv:
        fail("setpriv (util-linux) is missing")
        return
    env, ports, pod, _ = pools["quickjs"]
    psc = pod.get("securityContext", {})
    csc = pod["containers"][0].get("securityContext", {})
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    gid = csc.get("runAsGroup", psc.get("runAsGroup", uid))
    with tempfile.TemporaryDirectory(prefix="plm-k8s-") as d:
        os.chmod(d, 0o755)
        # The daemon and the helpers it finds beside itself, readable by the pod's uid.
        bindir = os.path.join(d, "bin")
        os.mkdir(bindir, 0o755)
        for path in [PLIMSOLLD] + HELPERS:
            dst = os.path.join(bindir, os.path.basename(path))
            shutil.copy(path, dst)
            os.chmod(dst, 0o755)
        secretdir = os.path.join(d, "secrets")
        os.mkdir(secretdir, 0o750)
        os.chown(secretdir, 0, gid)
        cert, key = make_tls(secretdir)
        if not cert:
            return
        caller, scraper = secrets.token_hex(24), secrets.token_hex(24)
        clients = os.path.join(secretdir, "clients.json")
        with open(clients, "w", encoding="utf-8") as f:
            json.dump({"clients": [
                {"id": "platform", "token_sha256": hashlib.sha256(caller.encode()).hexdigest(), "scopes": ["code:run"]},
                {"id": "prometheus", "token_sha256": hashlib.sha256(scraper.encode()).hexdigest(),
                 "scopes": ["metrics"]}]}, f)
        for p in (cert, key, clients):  # mode 0440 and the pod's group, as the Secret volume gives them
            os.chown(p, 0, gid)
            os.chmod(p, 0o440)
        denv = dict(env)
        denv.update({"PLIMSOLL_ADDR": "127.0.0.1:0", "PLIMSOLL_METRICS_ADDR": "127.0.0.1:0",
                     "PLIMSOLL_CLIENTS_FILE": clients, "PLIMSOLL_TLS_CERT": cert, "PLIMSOLL_TLS_KEY": key,
                     "PATH": "/usr/bin:/bin"})
        for v in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):  # the sanitizer build's lane
            if v in os.environ:
                denv[v] = os.environ[v]
        cmd = [setpriv, "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups", "--inh-caps=-all",
               "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", os.path.join(bindir, "plimsolld")]
        log = open(os.path.join(d, "daemon.log"), "w+", encoding="utf-8")
        proc = subprocess.Popen(cmd, env=denv, stdout=log, stderr=subprocess.STDOUT, cwd=d)
        try:
            up = wait_listening(proc, log, 120)
            if not up or not up.get("metrics_port"):
                log.seek(0)
                fail("the quickjs pod's daemon did not listen as uid %d: %s" % (uid, log.read()[-2000:]))
                return
            rpc, metrics = up["port"], up["metrics_port"]
            if up.get("tls") is not True or up.get("auth") != "clients" or up.get("tier") != "process":
                fail("the daemon listens with tls %s, auth %s, tier %s; want TLS, the clients file, process" %
                     (up.get("tls"), up.get("auth"), up.get("tier")))
            status = open("/proc/%d/status" % proc.pid).read()
            if not re.search(r"^CapEff:\s+0+$", status, re.M) or not re.search(r"^Uid:\s+%d\s" % uid, status, re.M):
                fail("the daemon does not run as uid %d without capabilities" % uid)
            for path, kind in (("/readyz", "readinessProbe"), ("/healthz", "livenessProbe")):
                want = pod["containers"][0][kind]["httpGet"]["path"]
                code, body = ask(rpc, want, host="%s:%d" % (PROBE_HOST, ports["rpc"]))
                if code != 200:
                    fail("%s GET %s answered %d %r, want 200" % (kind, want, code, body))
            code, _ = ask(rpc, "/plimsoll-no-such-path", host="%s:%d" % (PROBE_HOST, ports["rpc"]))
            if code != 404:
                fail("an unknown path answered %d, want 404 (the probe check could not fail)" % code)
            code, body = ask(metrics, "/metrics", token=scraper, host="%s:%d" % (PROBE_HOST, ports["metrics"]))
            if code != 200 or "plimsoll_runs_total" not in body:
                fail("GET /metrics with the scraper's token answered %d" % code)
            code, _ = ask(metrics, "/metrics", host="%s:%d" % (PROBE_HOST, ports["metrics"]))
            if code != 401:
                fail("GET /metrics without a token answered %d, want 401" % code)
            code, _ = ask(metrics, "/metrics", token=caller)
            if code != 403:
                fail("GET /metrics with the caller's code:run token answered %d, want 403" % code)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=pod.get("terminationGracePeriodSeconds", 30))
            if rc != 0:
                fail("SIGTERM ended the daemon with %d, want 0" % rc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()


def config_accepted(pools):
    """The docker-runsc and microvm pods' environments pass the daemon's configuration and
    PLIMSOLL_HARDENED checks: started here (as root, listeners on loopback, the Secret files made
    fresh, DOCKER_HOST at a socket that does not exist), the daemon's only complaint must be the
    node it is not on: dockerd's socket, or the microvm files the pod's image would carry."""
    want = {"docker-runsc": "plimsolld: preflight: docker preflight: dockerd on ",
            "microvm": "plimsolld: provider: microvm jail: `/usr/lib/plimsoll/microvm/vmlinuz`"}
    with tempfile.TemporaryDirectory(prefix="plm-k8s-") as d:
        cert, key = make_tls(d)
        if not cert:
            return
        clients = os.path.join(d, "clients.json")
        with open(clients, "w", encoding="utf-8") as f:
            json.dump({"clients": [{"id": "platform", "token_sha256": hashlib.sha256(b"t" * 40).hexdigest(),
                                    "scopes": ["code:run"]}]}, f)
        for pool, prefix in want.items():
            if pool not in pools:
                fail("no %s pool" % pool)
                continue
            denv = dict(pools[pool][0])
            denv.update({"PLIMSOLL_ADDR": "127.0.0.1:0", "PLIMSOLL_METRICS_ADDR": "127.0.0.1:0",
                         "PLIMSOLL_CLIENTS_FILE": clients, "PLIMSOLL_TLS_CERT": cert, "PLIMSOLL_TLS_KEY": key,
                         "PATH": "/usr/bin:/bin"})
            if "DOCKER_HOST" in denv:
                denv["DOCKER_HOST"] = "unix://" + os.path.join(d, "no-dockerd.sock")
            for v in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
                if v in os.environ:
                    denv[v] = os.environ[v]
            r = subprocess.run([PLIMSOLLD], env=denv, capture_output=True, text=True, timeout=120, cwd=d)
            lines = [l for l in r.stderr.splitlines() if l.startswith("plimsolld: ")]
            if r.returncode == 0 or not lines or not lines[-1].startswith(prefix):
                fail("pool %s: the daemon, given its environment, should stop only at the missing node (%r), "
                     "it said (exit %d): %s" % (pool, prefix, r.returncode, r.stderr.strip()[-600:]))


def main():
    if len(sys.argv) != 5:
        print("usage: check_manifests.py SOURCE_ROOT PLIMSOLLD QJS_WORKER GUESTIO", file=sys.stderr)
        return 2
    check_yamllint()
    docs = load_all()
    check_kustomization(docs)
    listed, stops = daemon_variables()
    table = doc_table()
    pools = check_objects(docs, listed, stops, drain_bound(), table)
    run_daemon(pools)
    if os.geteuid() == 0:  # run_daemon already failed, naming why, when not root
        config_accepted(pools)
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if failures:
        return 1
    print("contrib/kubernetes: %d pools checked against %s" % (len(pools), PLIMSOLLD))
    return 0


if __name__ == "__main__":
    sys.exit(main())
