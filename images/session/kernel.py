"""kernel.py: the session's Python interpreter (agent.py starts it as python3 -I -u kernel.py R W).

One namespace for the whole session, like a notebook: each cell is parsed, its statements run
and, when the last statement is an expression, its value is printed with repr() (None is not
printed). Top-level await works (one event loop for the session). A raising cell prints its
traceback on stderr and keeps the namespace; KeyboardInterrupt (the agent's SIGINT at the cell's
deadline) ends only the cell. SystemExit and os._exit end the interpreter: the agent sees the
status pipe close and the next cell starts a fresh one. Before each status the processes the cell
started are killed and reaped (end_children): the agent's sweep would kill them next anyway, but
only their parent, this interpreter, can reap them, so without it each stayed a zombie for the
session's life, eating its pid limit.
Status per cell on fd W: 4-byte big-endian length + {"status": 0 ran | 1 raised | 2 interrupted}."""
import ast
import asyncio
import builtins
import inspect
import json
import os
import signal
import struct
import sys
import traceback

R, W = int(sys.argv[1]), int(sys.argv[2])
# the agent ignores SIGINT and that is inherited: the cell's deadline needs KeyboardInterrupt back
signal.signal(signal.SIGINT, signal.default_int_handler)
del sys.argv[1:]
FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
ns = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
loop = asyncio.new_event_loop()


def read_exact(n):
    b = bytearray()
    while len(b) < n:
        try:
            c = os.read(R, n - len(b))
        except KeyboardInterrupt:
            continue  # an interrupt that arrived between cells
        if not c:
            os._exit(0)
        b += c
    return bytes(b)


def run(code):
    tree = compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | FLAGS)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    parts = [(tree, "exec")] + ([(last, "eval")] if last is not None else [])
    for part, mode in parts:
        co = compile(part, "<cell>", mode, flags=FLAGS)
        v = eval(co, ns)
        if co.co_flags & inspect.CO_COROUTINE:
            v = loop.run_until_complete(v)
        if mode == "eval" and v is not None:
            print(repr(v))


def children():
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
            if int(st[st.rindex(b")") + 2:].split()[1]) == me:
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def end_children(grace_s=1.0):
    """Kills this interpreter's children and reaps them (and any that already ended). Bounded: a
    child born meanwhile of a thread the cell left running is the agent's sweep's to kill, and it
    is reaped at the next cell's end."""
    import time
    deadline = time.monotonic() + grace_s
    while True:
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
        except ChildProcessError:
            return
        except KeyboardInterrupt:
            continue
        if time.monotonic() >= deadline:
            return
        for pid in children():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)


def status(n):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    body = json.dumps({"status": n}).encode()
    os.write(W, struct.pack(">I", len(body)) + body)


while True:
    try:
        n = struct.unpack(">I", read_exact(4))[0]
        req = json.loads(read_exact(n))
    except KeyboardInterrupt:
        continue
    try:
        run(req["code"])
        st = 0
    except KeyboardInterrupt:
        print("KeyboardInterrupt: the cell passed its time limit", file=sys.stderr)
        st = 2
    except SystemExit as e:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        t, v, tb = sys.exc_info()
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next  # the traceback starts at the cell, not in this file
        traceback.print_exception(t, v, tb)
        st = 1
    try:
        end_children()
    except KeyboardInterrupt:
        pass
    try:
        status(st)
    except KeyboardInterrupt:
        status(2)
