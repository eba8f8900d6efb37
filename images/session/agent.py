"""agent.py: the docker session's main process (docs/sessions.md, src/providers/docker/session.c).

Runs inside the session's container, under the same lockdown as every run, as the guest uid; it
is PID 1 there (the start script execs it), so orphans are reaped here. It keeps one interpreter
("kernel") per language alive between cells: kernel.py (python3 -I) and kernel.js (node), each
with its stdin on /dev/null, its stdout and stderr on pipes read here, and two control pipes
(named in its argv: cells in, one status per cell out).

Host -> agent, on stdin: frames of a 4-byte big-endian length and a JSON object
  {"id", "op": "cell"|"snippet", "lang", "code", "files": [[path, base64]], "timeout_ms", "cap",
   "grant": {"sock", "preload"} (a granted snippet only)}
Agent -> host, on stdout: "PLSA" + 4-byte big-endian length + a JSON object
  {"id", "status": "ready"|"ran"|"files"|"nointerp", "exit", "timed_out", "started", "ended",
   "out", "err" (base64), "out_trunc", "err_trunc", "disk", "file", "errno", "grants" (ready only)}

A granted snippet runs as `node --import=file://<preload> -` with HOST_API_SOCKET=<sock>: both
live in the session's grant directory (mounted at /run/plimsoll-session) for that call only; the
broker behind the socket is the daemon's (src/providers/docker/session_grant.c).
The host trusts none of it (the code of the cell could have rewritten this process): it decodes
every frame with bounds and a deadline (src/providers/docker/sessframe.c).

As PID 1 it reaps every orphan (a cell's double-forked processes, re-parented here) while a call
runs, a few times a second (reap_orphans), and all that is left after the call; each kernel reaps
the children it started itself before it reports a cell (kernel.py, kernel.js).

After every call every process but this one and the live kernels is killed (the sweep), and the
used bytes of /work, /tmp and /dev/shm are reported (the disk budget, measured after the call).
A cell past its time is interrupted (SIGINT: KeyboardInterrupt in Python, breakOnSigint in node);
a kernel that does not answer within INTERRUPT_GRACE_S is killed and the next cell starts a fresh
one."""
import base64
import errno
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time

WORK = "/work"
HERE = os.path.dirname(os.path.abspath(__file__))
INTERRUPT_GRACE_S = 1.0
FRAME_MAX = 16 * 1024 * 1024
KERNELS = {
    "python": ["/usr/bin/python3", "-I", "-u", os.path.join(HERE, "kernel.py")],
    "javascript": ["/usr/bin/node", os.path.join(HERE, "kernel.js")],
}
OUT = sys.stdout.buffer


def reply(obj):
    body = json.dumps(obj, separators=(",", ":")).encode()
    OUT.write(b"PLSA" + struct.pack(">I", len(body)) + body)
    OUT.flush()


def read_exact(fd, n):
    b = bytearray()
    while len(b) < n:
        try:
            c = os.read(fd, n - len(b))
        except InterruptedError:
            continue
        if not c:
            return None
        b += c
    return bytes(b)


class Capture:
    """The first `cap` bytes of a stream, and whether more came."""

    def __init__(self, cap):
        self.cap, self.data, self.trunc = cap, bytearray(), False

    def add(self, b):
        room = self.cap - len(self.data)
        if len(b) > room:
            self.trunc = True
        if room > 0:
            self.data += b[:room]


class Kernel:
    def __init__(self, lang):
        self.lang = lang
        cin_r, cin_w = os.pipe()
        st_r, st_w = os.pipe()
        # The kernel learns its two control fds from its argv (they keep their numbers).
        self.p = subprocess.Popen(KERNELS[lang] + [str(cin_r), str(st_w)], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=WORK, pass_fds=(cin_r, st_w),
                                  start_new_session=True, close_fds=True)
        os.close(cin_r)
        os.close(st_w)
        self.cin, self.st = cin_w, st_r
        self.fresh = True
        for fd in (self.p.stdout.fileno(), self.p.stderr.fileno(), self.st):
            os.set_blocking(fd, False)

    def alive(self):
        return self.p.poll() is None

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.p.kill()
        except OSError:
            pass
        try:
            self.p.wait(5)
        except Exception:
            pass
        for f in (self.cin, self.st):
            try:
                os.close(f)
            except OSError:
                pass
        self.p.stdout.close()
        self.p.stderr.close()


kernels = {}
snippet_pids = set()  # the snippet process of the call in flight: its status is Popen's to read
ORPHAN_REAP_S = 0.25
_last_orphan_reap = [0.0]


def reap_orphans():
    """Reaps ended orphans now rather than at the call's end. Only zombies no Popen here owns: a
    kernel's or a snippet's status is read by its Popen, which a blind waitpid(-1) would steal."""
    now = time.monotonic()
    if now - _last_orphan_reap[0] < ORPHAN_REAP_S:
        return
    _last_orphan_reap[0] = now
    me = os.getpid()
    ours = {k.p.pid for k in kernels.values()} | snippet_pids
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in ours:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
            rest = st[st.rindex(b")") + 2:].split()
            if rest[0] == b"Z" and int(rest[1]) == me:
                os.waitpid(int(name), os.WNOHANG)
        except (OSError, ValueError, IndexError):
            continue


def kernel_for(lang):
    k = kernels.get(lang)
    if k and not k.alive():
        k.kill()
        del kernels[lang]
        k = None
    if not k:
        k = Kernel(lang)
        kernels[lang] = k
    return k


def drain(fd, cap):
    while True:
        try:
            b = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not b:
            return False
        cap.add(b)


def write_files(files):
    """(index, errno name) of the first file that could not be written, or None."""
    for i, (path, b64) in enumerate(files):
        try:
            data = base64.b64decode(b64, validate=True)
            full = os.path.normpath(os.path.join(WORK, path))
            if not full.startswith(WORK + "/"):
                raise OSError(errno.EINVAL, "outside /work")
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        except OSError as e:
            return i, errno.errorcode.get(e.errno or errno.EIO, "EIO")
        except ValueError:
            return i, "EINVAL"
    return None


def run_cell(req, res):
    lang = req["lang"]
    try:
        k = kernel_for(lang)
    except OSError:
        res["status"] = "nointerp"
        return
    res["started"] = k.fresh
    k.fresh = False
    out, err = Capture(req["cap"]), Capture(req["cap"])
    body = json.dumps({"code": req["code"]}).encode()
    try:
        os.write(k.cin, struct.pack(">I", len(body)))
        view = memoryview(body)
        while view:
            n = os.write(k.cin, view)
            view = view[n:]
    except OSError:
        k.kill()
        del kernels[lang]
        res.update(status="ran", exit=1, ended=True)
        return
    deadline = time.monotonic() + req["timeout_ms"] / 1000.0
    interrupted_at = None
    status = None
    sbuf = b""
    fds = [k.p.stdout.fileno(), k.p.stderr.fileno(), k.st]
    while status is None:
        now = time.monotonic()
        if interrupted_at is None and now >= deadline:
            interrupted_at = now
            try:
                os.kill(k.p.pid, signal.SIGINT)
            except OSError:
                pass
        if interrupted_at is not None and now >= interrupted_at + INTERRUPT_GRACE_S:
            break
        until = (deadline if interrupted_at is None else interrupted_at + INTERRUPT_GRACE_S) - now
        r, _, _ = select.select(fds, [], [], max(0.0, min(until, ORPHAN_REAP_S)))
        reap_orphans()
        if k.p.stdout.fileno() in r:
            drain(k.p.stdout.fileno(), out)
        if k.p.stderr.fileno() in r:
            drain(k.p.stderr.fileno(), err)
        if k.st in r:
            try:
                b = os.read(k.st, 4096)
            except BlockingIOError:
                b = None
            if b == b"":
                break  # the kernel ended (os._exit, process.exit, killed)
            if b:
                sbuf += b
                if len(sbuf) >= 4:
                    n = struct.unpack(">I", sbuf[:4])[0]
                    if len(sbuf) >= 4 + n:
                        try:
                            status = json.loads(sbuf[4:4 + n])["status"]
                        except (ValueError, KeyError, TypeError):
                            break
    drain(k.p.stdout.fileno(), out)
    drain(k.p.stderr.fileno(), err)
    timed_out = interrupted_at is not None
    if status is None:
        k.kill()
        del kernels[lang]
        res["ended"] = True
        code = 124 if timed_out else 1
    elif timed_out or status == 2:
        code = 124
        timed_out = True
    else:
        code = 0 if status == 0 else 1
    res.update(status="ran", exit=code, timed_out=timed_out, out=out, err=err)


GRANT_DIR = "/run/plimsoll-session/"


def snippet_command(req):
    """node reading the snippet on stdin; with a grant, the client preloaded and the socket named."""
    g = req.get("grant")
    if not isinstance(g, dict):
        return ["/usr/bin/node", "-"], None
    sock, preload = str(g.get("sock", "")), str(g.get("preload", ""))
    if not sock.startswith(GRANT_DIR) or not preload.startswith(GRANT_DIR):
        raise OSError(errno.EINVAL, "grant paths outside " + GRANT_DIR)
    env = dict(os.environ)
    env["HOST_API_SOCKET"] = sock
    return ["/usr/bin/node", "--import=file://" + preload, "-"], env


def run_snippet(req, res):
    out, err = Capture(req["cap"]), Capture(req["cap"])
    try:
        argv, env = snippet_command(req)
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                             stderr=subprocess.PIPE, cwd=WORK, start_new_session=True)
    except OSError:
        res["status"] = "nointerp"
        return
    snippet_pids.add(p.pid)
    try:
        p.stdin.write(req["code"].encode())
        p.stdin.close()
    except OSError:
        pass
    fds = [p.stdout.fileno(), p.stderr.fileno()]
    for fd in fds:
        os.set_blocking(fd, False)
    deadline = time.monotonic() + req["timeout_ms"] / 1000.0
    open_fds = set(fds)
    while open_fds and time.monotonic() < deadline:
        r, _, _ = select.select(list(open_fds), [], [], max(0.0, min(deadline - time.monotonic(), ORPHAN_REAP_S)))
        reap_orphans()
        for fd in r:
            if not drain(fd, out if fd == fds[0] else err):
                open_fds.discard(fd)
    timed_out = bool(open_fds)
    if timed_out:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        code = p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        code = p.wait()
    snippet_pids.discard(p.pid)
    if timed_out:
        code = 124
    elif code < 0:
        code = 128 - code
    p.stdout.close()
    p.stderr.close()
    res.update(status="ran", exit=code, timed_out=timed_out, out=out, err=err)


def sweep():
    """Kills every process but this one and the live kernels; reaps what ends."""
    spare = {os.getpid()} | {k.p.pid for k in kernels.values() if k.alive()}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in spare:
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    reap()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for lang, k in list(kernels.items()):
            if k.p.pid == pid:
                k.p.returncode = -1


def disk_used():
    total = 0
    for m in (WORK, "/tmp", "/dev/shm"):
        try:
            st = os.statvfs(m)
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
        except OSError:
            pass
    return total


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.chdir(WORK)
    for lang in sys.argv[1:]:
        if lang in KERNELS:
            try:
                kernel_for(lang)
            except OSError:
                pass
    reply({"id": 0, "status": "ready", "disk": disk_used(), "grants": True})
    fd = sys.stdin.buffer.fileno()
    while True:
        head = read_exact(fd, 4)
        if head is None:
            break
        n = struct.unpack(">I", head)[0]
        if n > FRAME_MAX:
            break
        body = read_exact(fd, n)
        if body is None:
            break
        req = json.loads(body)
        res = {"id": req["id"], "exit": 0, "timed_out": False, "started": False, "ended": False}
        t0 = time.monotonic()
        bad = write_files(req.get("files") or [])
        if bad:
            res.update(status="files", file=bad[0], errno=bad[1])
        elif req["op"] == "cell":
            run_cell(req, res)
        else:
            run_snippet(req, res)
        sweep()
        res["ms"] = int((time.monotonic() - t0) * 1000)
        for key in ("out", "err"):
            c = res.pop(key, None)
            if c is not None:
                res[key] = base64.b64encode(bytes(c.data)).decode()
                res[key + "_trunc"] = c.trunc
        res["disk"] = disk_used()
        reply(res)
    for k in kernels.values():
        k.kill()


if __name__ == "__main__":
    main()
