#!/usr/bin/env python3
"""build-images.py: builds the docker provider's images from this host's own files, without a
registry, through the Docker Engine API's image import (POST /images/create?fromSrc=-) on the
local unix socket. Never the docker CLI.

  plimsoll/snippet:latest  node and its shared libraries, /bin/sh (dash), /usr/bin/env
  plimsoll/session:latest  node, python3 (Debian's, with its standard library) and the session agent
                           (images/session/: agent.py, kernel.py, kernel.js) for docker sessions
  plimsoll/project:latest  the same plus coreutils, plimsoll-runner and plimsoll-probe (static C,
                           compiled here from src/providers/docker/runner/), and tsc/tsx
                           (/opt/plimsoll/node_modules from images/project/package-lock.json)
  plimsoll/module:latest   /bin/sh, coreutils, the runner and probe, the module worker
                           (/opt/plimsoll/sim-worker) and one static executable per model in /models
                           (compiled here from src/module/; docs/modules.md). No node.

Each image is one deterministic tar (sorted entries, mtime 0, owner root), labelled
org.plimsoll.inputs=<SHA-256 of that tar>; when an image with the wanted tag already carries the
same label nothing is imported. Reading ~200 MB to learn that takes seconds, so a cheap
fingerprint of the inputs (every path, its size, mtime and mode, the runner's sources, CFLAGS and
the compiler's version) is labelled too (org.plimsoll.fingerprint) and checked first. /etc/passwd and /etc/group hold root and nobody only, so the guest
uid never has an entry. There is no /work in either image: the provider mounts a tmpfs there, and
dockerd copies an existing directory's mode (0755, root) onto it, which would make it read-only
for the guest. Standard library only.

Usage: scripts/build-images.py [--snippet-tag T] [--project-tag T] [--session-tag T] [--module-tag T] [--quiet]
"""
import argparse
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RUNNER_SRC = os.path.join(ROOT, "src", "providers", "docker", "runner")
API = "/v1.41"
LABEL = "org.plimsoll.inputs"
FP_LABEL = "org.plimsoll.fingerprint"
# As src/providers/docker/meson.build builds them (static-pie: ASLR for the runner and its key).
CFLAGS = ["-std=gnu17", "-O2", "-static-pie", "-fPIE", "-Wall", "-Wextra", "-Werror", "-Wformat=2", "-Wvla",
          "-D_GNU_SOURCE", "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=3", "-fstack-protector-strong",
          "-fstack-clash-protection", "-Wl,-z,relro,-z,now,-z,noexecstack", "-ffile-prefix-map=%s=." % ROOT]
if os.uname().machine == "x86_64":
    CFLAGS.append("-fcf-protection=full")
PASSWD = b"root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"


def die(msg):
    print("build-images: " + msg, file=sys.stderr)
    sys.exit(1)


def socket_path():
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return "/var/run/docker.sock"
    if host.startswith("unix://"):
        return host[len("unix://"):]
    if host.startswith("/"):
        return host
    die("DOCKER_HOST=%r is not a local unix socket; images are imported only over a local socket" % host)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=600):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def api(sock, method, path, body=None, headers=None, timeout=600):
    conn = UnixConnection(sock, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


LDD_CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "plimsoll",
                         "ldd.json")


def ldd_closure(binaries):
    """{binary: [shared objects]}. ldd runs the loader over each file (seconds for coreutils), so
    answers are cached per binary under its (size, mtime, inode); a changed binary is asked again."""
    try:
        with open(LDD_CACHE) as f:
            cache = json.load(f)
    except (OSError, ValueError):
        cache = {}
    stamps = {}
    for b in binaries:
        st = os.stat(b)
        stamps[b] = "%d:%d:%d" % (st.st_size, st.st_mtime_ns, st.st_ino)
    todo = [b for b in binaries if (cache.get(b) or {}).get("stamp") != stamps[b]]
    if todo:
        for b, libs in ldd_run(todo).items():
            cache[b] = {"stamp": stamps[b], "libs": libs}
        try:
            os.makedirs(os.path.dirname(LDD_CACHE), exist_ok=True)
            with open(LDD_CACHE + ".tmp", "w") as f:
                json.dump(cache, f)
            os.replace(LDD_CACHE + ".tmp", LDD_CACHE)
        except OSError:
            pass  # a cache we cannot write only costs time
    return {b: cache[b]["libs"] for b in binaries}


def ldd_run(binaries):
    """{binary: [shared objects]} from one ldd call (ldd prints a "path:" section per file)."""
    out = subprocess.run(["ldd"] + list(binaries), capture_output=True, text=True).stdout
    libs, cur = {b: [] for b in binaries}, binaries[0] if len(binaries) == 1 else None
    for line in out.splitlines():
        if not line.startswith(("\t", " ")) and line.endswith(":"):
            cur = line[:-1]
            continue
        parts = line.split()
        if "not found" in line:
            die("%s: %s" % (cur, line.strip()))
        if "=>" in parts:
            i = parts.index("=>")
            if i + 1 < len(parts) and parts[i + 1].startswith("/"):
                libs.setdefault(cur, []).append(parts[i + 1])
        elif parts and parts[0].startswith("/"):
            libs.setdefault(cur, []).append(parts[0])
    return libs


class HostFile:
    """A host file whose bytes are read only when the tar is built."""

    def __init__(self, path, st):
        self.path = path
        self.stamp = (path, st.st_size, st.st_mtime_ns, st.st_mode, st.st_ino)

    def __call__(self):
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) != self.stamp[1]:
            die("%s changed while the image was built" % self.path)
        return data


class Tree:
    """The image's file system: path -> ('dir', mode) | ('sym', target) | ('file', mode, bytes)."""

    def __init__(self):
        self.e = {}

    def mkdir(self, path, mode=0o755):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            kind = self.e.get(p)
            if kind is None:
                self.e[p] = ("dir", mode if i == len(parts) else 0o755)
            elif kind[0] == "sym":
                die("%s is a symlink in the image; cannot use it as a directory" % p)

    def data(self, path, content, mode=0o644):
        """content: bytes, or a callable returning them (read only when the tar is built)."""
        self.mkdir(os.path.dirname(path))
        self.e[path] = ("file", mode, content)

    def fingerprint(self, extra=b""):
        h = hashlib.sha256(extra)
        for path in sorted(self.e):
            kind = self.e[path]
            h.update(repr((path, kind[0], kind[1] if kind[0] != "file" else kind[1])).encode())
            if kind[0] == "file":
                c = kind[2]
                h.update(c if isinstance(c, bytes) else repr(c.stamp).encode())
        return h.hexdigest()

    def host(self, path, dest=None, depth=0):
        """Copies a host path, reproducing every symlink on the way (merged /usr, /bin/sh)."""
        if depth > 16:
            die("too many symlinks resolving " + path)
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if os.path.islink(p):
                target = os.readlink(p)
                self.mkdir(os.path.dirname(p)) if i > 1 else None
                self.e[p] = ("sym", target)
                base = os.path.dirname(p)
                resolved = os.path.normpath(target if target.startswith("/") else os.path.join(base, target))
                rest = parts[i:]
                return self.host(resolved + ("/" + "/".join(rest) if rest else ""), dest, depth + 1)
        if os.path.isdir(path):
            self.mkdir(path)
            return
        st = os.stat(path)
        self.data(dest or path, HostFile(path, st), st.st_mode & 0o755)

    def binaries(self, paths):
        for path, libs in ldd_closure(paths).items():
            self.host(path)
            for lib in libs:
                self.host(lib)

    def tar(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
            for path in sorted(self.e):
                kind = self.e[path]
                info = tarfile.TarInfo(path.lstrip("/"))
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if kind[0] == "dir":
                    info.type = tarfile.DIRTYPE
                    info.mode = kind[1]
                    t.addfile(info)
                elif kind[0] == "sym":
                    info.type = tarfile.SYMTYPE
                    info.linkname = kind[1]
                    info.mode = 0o777
                    t.addfile(info)
                else:
                    data = kind[2] if isinstance(kind[2], bytes) else kind[2]()
                    info.mode = kind[1]
                    if isinstance(kind[2], HostFile) and kind[2].path.startswith(PY_LIB_PREFIX):
                        # python's cached bytecode is valid only for its source's mtime; with
                        # mtime 0 every import would recompile (the root is read-only)
                        info.mtime = kind[2].stamp[2] // 1000000000
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def base_tree():
    t = Tree()
    for d, mode in (("/tmp", 0o1777), ("/dev", 0o755), ("/proc", 0o555), ("/sys", 0o555), ("/root", 0o700)):
        t.mkdir(d, mode)
    t.data("/etc/passwd", PASSWD)
    t.data("/etc/group", GROUP)
    for f in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf"):
        t.data(f, b"")
    t.binaries(["/bin/sh", "/usr/bin/env", "/usr/bin/node"])
    return t


def runner_stamp():
    """What the static binaries are made from: sources, flags and the compiler."""
    cc = os.environ.get("CC", "cc")
    h = hashlib.sha256(repr(CFLAGS).encode())
    h.update(subprocess.run([cc, "--version"], capture_output=True).stdout)
    for name in sorted(os.listdir(RUNNER_SRC)):
        with open(os.path.join(RUNNER_SRC, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


class Compiled:
    """A static binary compiled from runner/ only when the tar is built."""

    def __init__(self, name, sources, outdir, stamp):
        self.name, self.sources, self.outdir = name, sources, outdir
        self.stamp = (name, stamp)

    def __call__(self):
        return compile_static(self.name, self.sources, self.outdir)


def compile_static(name, sources, outdir, src_dir=RUNNER_SRC, extra=()):
    out = os.path.join(outdir, name)
    cc = os.environ.get("CC", "cc")
    cmd = [cc] + CFLAGS + list(extra) + ["-o", out] + [os.path.join(src_dir, s) for s in sources]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        die("compiling %s failed:\n%s" % (name, r.stderr))
    with open(out, "rb") as f:
        return f.read()


def coreutils():
    r = subprocess.run(["dpkg", "-L", "coreutils"], capture_output=True, text=True)
    if r.returncode != 0:
        die("coreutils is not installed (dpkg -L coreutils failed)")
    out = []
    for p in r.stdout.split():
        if (p.startswith("/usr/bin/") or p.startswith("/bin/")) and os.path.isfile(p) and os.access(p, os.X_OK):
            out.append(p)
    return sorted(set(out))


# The project image's TypeScript tooling (typescript, tsx and esbuild's native binary), pinned by
# images/project/package-lock.json (integrity hashes) and installed from the npm registry with
# `npm ci --ignore-scripts` into a cache next to the ldd cache, only when the lock changed.
NPM_DIR = os.path.join(ROOT, "images", "project")
NPM_CACHE = os.path.join(os.path.dirname(LDD_CACHE), "project-npm")
NODE_MODULES = "/opt/plimsoll/node_modules"
NODE_BINS = ("tsc", "tsx")  # linked into /usr/local/bin, on the guest's fixed PATH


def npm_modules():
    """(host node_modules, stamp): the stamp hashes package.json, the lock and the machine (which
    @esbuild/<platform> binary npm picks); a cache dir named by it is reused, else npm ci fills it."""
    h = hashlib.sha256(os.uname().machine.encode())
    for name in ("package.json", "package-lock.json"):
        with open(os.path.join(NPM_DIR, name), "rb") as f:
            h.update(b"\0" + name.encode() + b"\0" + f.read())
    stamp = h.hexdigest()
    final = os.path.join(NPM_CACHE, stamp[:16])
    mods = os.path.join(final, "node_modules")
    try:
        with open(os.path.join(final, "stamp")) as f:
            if f.read().strip() == stamp and os.path.isdir(mods):
                return mods, stamp
    except OSError:
        pass
    npm = shutil.which("npm")
    if not npm:
        die("npm is missing; the project image's TypeScript tooling is installed with it (apt-get install npm)")
    os.makedirs(NPM_CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix="install.", dir=NPM_CACHE)
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(NPM_DIR, name), work)
        env = dict(os.environ, npm_config_update_notifier="false")
        # --ignore-scripts: no package's install scripts run (esbuild's postinstall only checks
        # its binary; lib/main.js finds @esbuild/<platform>/bin/esbuild without it).
        r = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev"],
                           cwd=work, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            die("npm ci in %s failed (exit %d):\n%s%s" % (work, r.returncode, r.stdout[-2000:], r.stderr[-4000:]))
        for b in NODE_BINS:
            if not os.access(os.path.join(work, "node_modules", ".bin", b), os.X_OK):
                die("npm ci installed no executable node_modules/.bin/%s" % b)
        r = subprocess.run(["node", "-e", "process.stdout.write(require('esbuild').transformSync("
                            "'let x: number = 1', {loader: 'ts'}).code)"], cwd=work, capture_output=True, text=True)
        if r.returncode != 0 or "let x = 1" not in r.stdout:
            die("esbuild does not find its native binary after npm ci:\n" + r.stderr[-2000:])
        with open(os.path.join(work, "stamp"), "w") as f:
            f.write(stamp + "\n")
        try:
            os.rename(work, final)
        except OSError:
            if not os.path.isfile(os.path.join(final, "stamp")):  # else a concurrent build won
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in os.listdir(NPM_CACHE):  # earlier locks' installs
        if old != stamp[:16] and not old.startswith("install."):
            shutil.rmtree(os.path.join(NPM_CACHE, old), ignore_errors=True)
    return mods, stamp


def add_node_modules(tree, mods, stamp):
    """Copies mods to NODE_MODULES (links kept, and only relative ones inside it) and links
    NODE_BINS into /usr/local/bin. The stamp goes into the image, so a new lock changes the image's
    fingerprint and inputs labels."""
    for dirpath, dirnames, filenames in os.walk(mods):
        dirnames.sort()
        rel = os.path.relpath(dirpath, mods)
        dest = NODE_MODULES if rel == "." else NODE_MODULES + "/" + rel
        tree.mkdir(dest)
        for name in dirnames + filenames:  # os.walk lists links to directories but does not enter them
            src = os.path.join(dirpath, name)
            st = os.lstat(src)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(src)
                inside = os.path.normpath(os.path.join(dirpath, target)).startswith(mods + "/")
                if target.startswith("/") or not inside:
                    die("%s links outside node_modules (%s)" % (src, target))
                tree.e[dest + "/" + name] = ("sym", target)
            elif stat.S_ISREG(st.st_mode):
                tree.data(dest + "/" + name, HostFile(src, st), st.st_mode & 0o755)
            elif not stat.S_ISDIR(st.st_mode):
                die("%s is not a file, directory or link" % src)
    for b in NODE_BINS:
        real = os.path.relpath(os.path.realpath(os.path.join(mods, ".bin", b)), mods)
        tree.mkdir("/usr/local/bin")
        tree.e["/usr/local/bin/" + b] = ("sym", NODE_MODULES + "/" + real)
    tree.data("/opt/plimsoll/npm-lock.sha256", (stamp + "\n").encode())
    # tsc looks for @types (node's, for `import 'node:fs'`) in node_modules/@types beside the
    # project and in each directory above it; projects live in /work, so / is where it finds them.
    tree.e["/node_modules"] = ("sym", NODE_MODULES.lstrip("/"))

# The session image (docs/sessions.md): python3's standard library without its test suite and the
# GUI/installer parts no cell can use, its extension modules with their shared libraries, and the
# agent that keeps one interpreter per language alive (images/session/).
SESSION_DIR = os.path.join(ROOT, "images", "session")
PY_LIB_PREFIX = "/usr/lib/python3"
PY_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages", "dist-packages"}


def python_stdlib(tree):
    exe = os.path.realpath("/usr/bin/python3")
    if not os.access(exe, os.X_OK):
        die("/usr/bin/python3 is missing: apt-get install python3")
    ver = os.path.basename(exe)  # python3.11
    lib = "/usr/lib/" + ver
    if not os.path.isfile(os.path.join(lib, "os.py")):
        die("%s has no os.py: the python3 standard library is not installed" % lib)
    tree.binaries(["/usr/bin/python3"])
    tree.host("/usr/bin/python3")
    sos = []
    for dirpath, dirnames, filenames in os.walk(lib):
        dirnames[:] = sorted(d for d in dirnames if d not in PY_SKIP)
        tree.mkdir(dirpath)
        for name in sorted(filenames):
            src = os.path.join(dirpath, name)
            st = os.lstat(src)
            if stat.S_ISLNK(st.st_mode):
                tree.host(src)
            elif stat.S_ISREG(st.st_mode):
                tree.data(src, HostFile(src, st), st.st_mode & 0o755)
                if name.endswith(".so"):
                    sos.append(src)
    if sos:
        tree.binaries(sos)  # each extension module with the libraries it links (libffi, libssl ...)


# The data libraries (docs/python.md): these Debian packages and the python3-* packages they
# depend on, copied file by file from this host (dpkg -L), with the byte code Debian compiled at
# install time (__pycache__, not listed by dpkg) and the shared libraries their extension modules
# link (ldd: BLAS, LAPACK, gfortran, freetype ...). Packages a Debian dependency drags in that no
# import of these libraries needs are left out: pythran/beniget/gast/ply are scipy's build-time
# compiler, sympy/mpmath ride along with it, tk is a display the guest lacks, the rest install or
# build Python code. Test suites (.../tests/) are left out too (a third of pandas and scipy).
PY_DATA = ("python3-numpy", "python3-scipy", "python3-pandas", "python3-matplotlib")
PY_DATA_SKIP = {"python3", "python3-minimal", "python3-dev", "python3-all", "python3-all-dev", "python3-distutils",
                "python3-lib2to3", "python3-pythran", "python3-beniget", "python3-gast", "python3-ply",
                "python3-sympy", "python3-mpmath", "python3-tk", "python3-pil.imagetk"}
PY_DATA_EXTRA = ("python-matplotlib-data", "fonts-dejavu-core", "tzdata")
PY_DATA_DROP = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/", "/usr/share/locale/", "/etc/")
# OPENBLAS_NUM_THREADS and OMP_NUM_THREADS: one thread per run (a BLAS that starts a thread per
# host core inside a 1-CPU cgroup only contends with itself); matplotlib draws with Agg (no
# display) and keeps its config and font cache under /tmp, the run's writable tmpfs.
PY_ENV = ("OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "MPLBACKEND=Agg",
          "MPLCONFIGDIR=/tmp/.matplotlib", "XDG_CACHE_HOME=/tmp/.cache", "PYTHONDONTWRITEBYTECODE=1")


def dpkg_status(names):
    """{package: (installed?, version, "Pre-Depends, Depends")} for the names dpkg knows."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Status}\t${Version}\t${Pre-Depends}, ${Depends}\n"]
                       + sorted(names), capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            out[parts[0]] = (parts[1].endswith(" installed"), parts[2], parts[3])
    return out


def py_data_packages():
    """{package: version}: PY_DATA and the python3-* packages they depend on (first installed
    alternative), minus PY_DATA_SKIP, plus PY_DATA_EXTRA. Dies naming a missing one."""
    st = dpkg_status(PY_DATA + PY_DATA_EXTRA)
    for p in PY_DATA + PY_DATA_EXTRA:
        if not st.get(p, (False,))[0]:
            die("%s is not installed: apt-get install --no-install-recommends %s" % (p, p))
    seen, todo = {}, list(PY_DATA)
    while todo:
        info = dpkg_status(todo)
        todo = []
        for p, (_, ver, deps) in info.items():
            if p in seen:
                continue
            seen[p] = ver
            for alt in deps.split(","):
                cands = [a.split("(")[0].strip().split(":")[0] for a in alt.split("|") if a.strip()]
                cands = [c for c in cands if c.startswith("python3-") and c not in PY_DATA_SKIP]
                if not cands:
                    continue
                have = dpkg_status(cands)
                pick = next((c for c in cands if have.get(c, (False,))[0]), None)
                if pick and pick not in seen:
                    todo.append(pick)
    for p in PY_DATA_EXTRA:
        seen[p] = st[p][1]
    return seen


def python_data(tree):
    """Adds the data libraries to tree; returns {package: version} (also written to the image as
    /opt/plimsoll/python-packages, which the startup proof does not trust but docs quote)."""
    pkgs = py_data_packages()
    sos = []
    for p in sorted(pkgs):
        r = subprocess.run(["dpkg", "-L", p], capture_output=True, text=True)
        if r.returncode != 0:
            die("dpkg -L %s failed" % p)
        for path in r.stdout.split("\n"):
            if not path.startswith("/usr/") or path.startswith(PY_DATA_DROP) or "/tests/" in path + "/":
                continue
            if os.path.islink(path) or os.path.isfile(path):
                tree.host(path)
                if path.endswith(".so") or ".so." in os.path.basename(path):
                    sos.append(os.path.realpath(path))
                if path.endswith(".py"):
                    d, base = os.path.split(path)
                    cache = os.path.join(d, "__pycache__")
                    tag = base[:-3] + ".cpython-"  # name.cpython-311.pyc
                    if os.path.isdir(cache):
                        for name in os.listdir(cache):
                            if name.startswith(tag) and name.endswith(".pyc") and ".opt-" not in name:
                                tree.host(os.path.join(cache, name))
            elif os.path.isdir(path):
                tree.mkdir(path)
    if sos:
        tree.binaries(sorted(set(s for s in sos if os.path.isfile(s))))
    rc = "/etc/matplotlibrc"  # Debian's says TkAgg; the guest has no display
    if os.path.isfile(rc):
        with open(rc, "rb") as f:
            text = f.read()
        lines = [b"backend: Agg" if ln.strip().startswith(b"backend:") else ln for ln in text.split(b"\n")]
        tree.data(rc, b"\n".join(lines))
    tree.data("/opt/plimsoll/python-packages",
              "".join("%s %s\n" % (p, v) for p, v in sorted(pkgs.items())).encode())
    return pkgs


def session_tree():
    t = base_tree()
    t.binaries(coreutils())
    python_stdlib(t)
    python_data(t)
    for name in ("agent.py", "kernel.py", "kernel.js"):
        src = os.path.join(SESSION_DIR, name)
        t.data("/opt/plimsoll/session/" + name, HostFile(src, os.stat(src)), 0o644)
    return t


# The module image (issue 21, docs/modules.md): the worker and the models from src/module/, built
# static with the runner's flags plus those that keep a row's doubles the same bits everywhere.
MODULE_SRC = os.path.join(ROOT, "src", "module")
MODULE_CFLAGS = ("-ffp-contract=off", "-fno-math-errno", "-lm")
MODELS = (("VanDerPol", "vanderpol.c"), ("Lorenz", "lorenz.c"), ("BouncingBall", "bouncingball.c"),
          ("Greedy", "greedy.c"))


class CompiledModule:
    """A static binary compiled from src/module/ only when the tar is built."""

    def __init__(self, name, sources, outdir, stamp):
        self.name, self.sources, self.outdir = name, sources, outdir
        self.stamp = (name, stamp)

    def __call__(self):
        # -lm after the sources (floor); the flags list puts it before them, so pass it last
        out = os.path.join(self.outdir, self.name)
        cc = os.environ.get("CC", "cc")
        cmd = [cc] + CFLAGS + list(MODULE_CFLAGS[:2]) + ["-o", out] + \
            [os.path.join(MODULE_SRC, s) for s in self.sources] + ["-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            die("compiling %s failed:\n%s" % (self.name, r.stderr))
        with open(out, "rb") as f:
            return f.read()


def module_stamp():
    h = hashlib.sha256(repr((CFLAGS, MODULE_CFLAGS)).encode())
    h.update(subprocess.run([os.environ.get("CC", "cc"), "--version"], capture_output=True).stdout)
    for d in (MODULE_SRC, os.path.join(MODULE_SRC, "models")):
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                with open(os.path.join(d, name), "rb") as f:
                    h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


def module_tree(tmp, runner_stamp_hex):
    t = Tree()
    for d, mode in (("/tmp", 0o1777), ("/dev", 0o755), ("/proc", 0o555), ("/sys", 0o555), ("/root", 0o700)):
        t.mkdir(d, mode)
    t.data("/etc/passwd", PASSWD)
    t.data("/etc/group", GROUP)
    for f in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf"):
        t.data(f, b"")
    t.binaries(["/bin/sh", "/usr/bin/env"])
    t.binaries(coreutils())
    t.data("/opt/plimsoll/runner", Compiled("plimsoll-runner", ["runner.c", "sha256.c"], tmp, runner_stamp_hex), 0o755)
    t.data("/opt/plimsoll/probe", Compiled("plimsoll-probe", ["probe.c"], tmp, runner_stamp_hex), 0o755)
    stamp = module_stamp()
    t.data("/opt/plimsoll/sim-worker",
           CompiledModule("sim-worker", ["worker.c", "params.c", "rowbox.c"], tmp, stamp), 0o755)
    t.mkdir("/models", 0o755)
    for name, src in MODELS:
        t.data("/models/" + name, CompiledModule("model-" + name, ["model_main.c", "models/" + src], tmp, stamp), 0o755)
    return t


def inspect(sock, tag):
    st, body = api(sock, "GET", API + "/images/%s/json" % urllib.parse.quote(tag, safe=""))
    if st != 200:
        return None
    return json.loads(body)


def build(sock, tag, tree, kind, quiet, env=()):
    fp = tree.fingerprint(repr((kind, env)).encode())
    old = inspect(sock, tag)
    labels = ((old or {}).get("Config") or {}).get("Labels") or {}
    if old and labels.get(FP_LABEL) == fp:
        if not quiet:
            print("build-images: %s is up to date (%s)" % (tag, old["Id"]))
        return old["Id"]
    tar = tree.tar()
    return import_image(sock, tag, tar, hashlib.sha256(tar).hexdigest(), fp, kind, quiet, old, env)


def import_image(sock, tag, tar, digest, fp, kind, quiet, old, env=()):
    labels = ((old or {}).get("Config") or {}).get("Labels") or {}
    if old and labels.get(LABEL) == digest and labels.get(FP_LABEL) == fp:
        if not quiet:
            print("build-images: %s is up to date (%s)" % (tag, old["Id"]))
        return old["Id"]
    repo, _, t = tag.rpartition(":")
    if not repo or "/" in t:
        repo, t = tag, "latest"
    q = [("fromSrc", "-"), ("repo", repo), ("tag", t), ("changes", "LABEL %s=%s" % (LABEL, digest)),
         ("changes", "LABEL %s=%s" % (FP_LABEL, fp)), ("changes", "LABEL org.plimsoll.image=%s" % kind)]
    q += [("changes", "ENV " + e) for e in env]
    path = API + "/images/create?" + urllib.parse.urlencode(q)
    st, body = api(sock, "POST", path, body=tar, headers={"Content-Type": "application/x-tar"})
    if st != 200:
        die("import %s: HTTP %d: %s" % (tag, st, body[:500].decode("utf-8", "replace")))
    for line in body.decode("utf-8", "replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if "error" in obj or "errorDetail" in obj:
            die("import %s: %s" % (tag, obj.get("error") or obj.get("errorDetail")))
    new = inspect(sock, tag)
    if not new or ((new.get("Config") or {}).get("Labels") or {}).get(LABEL) != digest:
        die("import %s: the imported image does not carry the input label" % tag)
    if old and old["Id"] != new["Id"]:
        api(sock, "DELETE", API + "/images/%s" % old["Id"])  # untagged now; 409 while a container uses it
    if not quiet:
        print("build-images: %s = %s" % (tag, new["Id"]))
    return new["Id"]


def usr_stage(dest):
    """Writes python3, its standard library and the data libraries under dest as the guest's /usr
    (microvm project VMs mount one read-only disk there; scripts/microvm-setup.sh). Only paths
    under /usr are written, /usr stripped. A link whose target leaves /usr (/etc/alternatives for
    BLAS) becomes a copy of the file it resolves to; every other link points at its resolved
    /usr path. Python sources keep their mtimes, which the byte code beside them records."""
    t = Tree()
    python_stdlib(t)
    pkgs = python_data(t)
    for path in sorted(t.e):
        if not path.startswith("/usr/"):
            continue
        kind = t.e[path]
        out = os.path.join(dest, path[len("/usr/"):])
        if kind[0] == "dir":
            os.makedirs(out, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if kind[0] == "sym":
            real = os.path.realpath(path)
            if real.startswith("/usr/"):
                os.symlink(real, out)
                continue
            if not os.path.isfile(real):
                die("%s resolves to %s, not a file" % (path, real))
            st = os.stat(real)
            kind = ("file", st.st_mode & 0o755, HostFile(real, st))
        c = kind[2]
        data = c if isinstance(c, bytes) else c()
        with open(out, "wb") as f:
            f.write(data)
        os.chmod(out, kind[1])
        if isinstance(c, HostFile):
            os.utime(out, ns=(c.stamp[2], c.stamp[2]))
    with open(os.path.join(dest, "share", "plimsoll-python-packages"), "w") as f:
        f.write("".join("%s %s\n" % (p, v) for p, v in sorted(pkgs.items())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--usr-stage", metavar="DIR", help="only write python's /usr tree into DIR (microvm disk)")
    ap.add_argument("--snippet-tag", default="plimsoll/snippet:latest")
    ap.add_argument("--project-tag", default="plimsoll/project:latest")
    ap.add_argument("--session-tag", default="plimsoll/session:latest")
    ap.add_argument("--module-tag", default="plimsoll/module:latest")
    ap.add_argument("--only", choices=("snippet", "session", "project", "module"),
                    help="build this one image and leave the others as they are")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    if args.usr_stage:
        usr_stage(args.usr_stage)
        return
    sock = socket_path()
    try:
        st, body = api(sock, "GET", "/_ping", timeout=10)
    except OSError as e:
        die("dockerd does not answer on %s: %s" % (sock, e))
    if st != 200:
        die("dockerd on %s answered /_ping with HTTP %d" % (sock, st))
    if not os.path.exists("/usr/bin/node"):
        die("/usr/bin/node is missing: apt-get install nodejs")

    want = lambda kind: args.only in (None, kind)
    if want("snippet"):
        build(sock, args.snippet_tag, base_tree(), "snippet", args.quiet)
    if want("session"):
        build(sock, args.session_tag, session_tree(), "session", args.quiet, PY_ENV)

    stamp = runner_stamp()
    with tempfile.TemporaryDirectory() as tmp:
        if want("module"):
            build(sock, args.module_tag, module_tree(tmp, stamp), "module", args.quiet)
        if not want("project"):
            return
        project = base_tree()
        project.binaries(coreutils())
        python_stdlib(project)
        python_data(project)
        add_node_modules(project, *npm_modules())
        project.data("/opt/plimsoll/runner", Compiled("plimsoll-runner", ["runner.c", "sha256.c"], tmp, stamp), 0o755)
        project.data("/opt/plimsoll/probe", Compiled("plimsoll-probe", ["probe.c"], tmp, stamp), 0o755)
        build(sock, args.project_tag, project, "project", args.quiet, PY_ENV)


if __name__ == "__main__":
    main()
