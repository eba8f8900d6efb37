#!/usr/bin/env python3
"""idle_rss.py: the daemon's resident memory with N idle keep-alive connections (issue 22).

    bench/idle_rss.py PLIMSOLLD [N]   (default 10000)

Starts the daemon (disabled provider, open mode, loopback), reads VmRSS once it listens, then
opens N connections spread over 127.0.0.2, 127.0.0.3, ... as source addresses (200 each, under
the per-peer cap of 256), sends one GET /healthz on each and reads its answer, so every one is a
kept-alive connection idle between requests. After the gate's parking time (1 s) it reads VmRSS
again and prints one JSON line with both, the difference and the bytes per connection. Needs a
descriptor limit above N (the script raises its own soft limit to the hard one). Never asserts.
"""
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import time


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    daemon = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PLIMSOLL_ADDR": "127.0.0.1:0",
           "PLIMSOLL_METRICS_ADDR": "off", "PLIMSOLL_INSECURE": "1"}
    p = subprocess.Popen([daemon], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    port = None
    for raw in p.stderr:
        obj = json.loads(raw)
        if obj.get("event") == "listening":
            port = obj["port"]
            break
    try:
        time.sleep(0.5)
        before = rss_kib(p.pid)
        socks = []
        sel = selectors.DefaultSelector()
        req = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        for i in range(n):
            s = socket.socket()
            s.bind(("127.0.0.%d" % (2 + i // 200), 0))
            s.connect(("127.0.0.1", port))
            s.sendall(req)
            socks.append(s)
            sel.register(s, selectors.EVENT_READ)
        answered = 0
        deadline = time.monotonic() + 120
        while answered < n and time.monotonic() < deadline:
            for key, _ in sel.select(1):
                data = key.fileobj.recv(4096)
                if b" 200 " in data:
                    answered += 1
                sel.unregister(key.fileobj)
        time.sleep(2.0)  # past the parking time: idle connections hold no buffers
        after = rss_kib(p.pid)
        print(json.dumps({"connections": n, "answered": answered, "rss_idle_kib": before, "rss_with_conns_kib": after,
                          "added_mib": round((after - before) / 1024, 1),
                          "bytes_per_connection": round((after - before) * 1024 / max(n, 1)),
                          "loadavg": open("/proc/loadavg").read().split()[:3]}))
        for s in socks:
            s.close()
    finally:
        p.terminate()
        p.wait(60)


if __name__ == "__main__":
    main()
