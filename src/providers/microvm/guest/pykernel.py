"""pykernel.py: a microvm session's Python interpreter. The guest's PID 1 (guest/session.c) starts it
as `python3 -I -u -c <this file>` in /work, as uid 65534, with cells on fd 3 and statuses on fd 4.

One namespace for the whole session, like a notebook: each cell is parsed, its statements run and,
when the last statement is an expression, its value is printed with repr() (None is not printed).
Top-level await works (one event loop for the session). A raising cell prints its traceback on
stderr and keeps the namespace; KeyboardInterrupt (PID 1's SIGINT at the cell's deadline) ends only
the cell. SystemExit and os._exit end the interpreter: PID 1 sees fd 4 close and the next cell
starts a fresh one.
Protocol: once started, the byte b"R" on fd 4; a cell is a 4-byte big-endian length and that many
UTF-8 bytes on fd 3; after each cell one status byte on fd 4: 0 ran, 1 raised, 2 interrupted."""
import ast
import asyncio
import builtins
import inspect
import os
import signal
import struct
import sys
import traceback

R, W = 3, 4
signal.signal(signal.SIGINT, signal.default_int_handler)
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


def reap():
    """Children the cell started and that ended: only their parent can reap them."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def status(n):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    os.write(W, bytes([n]))


os.write(W, b"R")
while True:
    try:
        n = struct.unpack(">I", read_exact(4))[0]
        code = read_exact(n).decode("utf-8", "replace")
    except KeyboardInterrupt:
        continue
    try:
        run(code)
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
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next  # the traceback starts at the cell, not in this kernel
        traceback.print_exception(t, v, tb)
        st = 1
    try:
        reap()
        status(st)
    except KeyboardInterrupt:
        status(2)
