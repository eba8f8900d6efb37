#!/bin/sh
# docker-setup.sh: prepares this machine (Debian bookworm, root) for the docker provider and its
# tests: installs docker.io, nodejs and npm when missing, installs the pinned gVisor runsc
# (Debian trixie's, verified: scripts/fetch-runsc.sh) under /usr/local/lib/plimsoll, registers it
# with dockerd as the runtime `runsc` (merging into an existing /etc/docker/daemon.json), keeps
# bookworm's own runsc package registered as `runsc-bookworm` (the before/after bench compares
# the two), starts dockerd when its socket does not answer (there is no systemd here), and builds
# the images plimsoll/snippet and plimsoll/project from this host's own files
# (scripts/build-images.py). Idempotent and quiet when nothing is to do; exits non-zero with the
# reason when something cannot be done.
# Environment: DOCKER_SETUP_NO_START=1 only checks that dockerd answers.
set -eu
cd "$(dirname "$0")/.."
SOCK=/var/run/docker.sock
LOG=/var/log/plimsoll-dockerd.log

say() { echo "docker-setup: $*" >&2; }
die() { say "$*"; exit 1; }

ping_docker() {
    python3 - "$SOCK" <<'PY'
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(sys.argv[1])
    s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
    ok = s.recv(64).split(b"\r\n")[0].endswith(b" 200 OK")
except OSError:
    ok = False
sys.exit(0 if ok else 1)
PY
}

missing=""
# python3-*: the data libraries the project and session images carry (docs/python.md).
for p in docker.io runsc nodejs coreutils python3-numpy python3-scipy python3-pandas python3-matplotlib; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# npm installs the project image's TypeScript tooling (build-images.py); nodejs packages that
# bundle it (NodeSource) need no Debian npm.
command -v npm >/dev/null || missing="$missing npm"
if [ -n "$missing" ]; then
    [ "$(id -u)" -eq 0 ] || die "missing packages and not root; run: apt-get install$missing"
    say "installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
[ -x /usr/bin/runsc ] || die "/usr/bin/runsc is missing after installing runsc"
RUNSC_DIR=/usr/local/lib/plimsoll/runsc-20240729
scripts/fetch-runsc.sh "$RUNSC_DIR" || die "the pinned runsc could not be installed (scripts/fetch-runsc.sh)"
[ -x /usr/bin/node ] || die "/usr/bin/node is missing after installing nodejs"
command -v npm >/dev/null || die "npm is missing after installing npm"

# Register both runsc, keeping whatever else daemon.json says. Writes only when something changes.
changed=$(python3 - "$RUNSC_DIR/runsc" <<'PY'
import json, os, sys
path = "/etc/docker/daemon.json"
args = ["--host-uds=open", "--network=none"]
want = {"runsc": {"path": sys.argv[1], "runtimeArgs": args},
        "runsc-bookworm": {"path": "/usr/bin/runsc", "runtimeArgs": args}}
cfg = {}
if os.path.exists(path):
    try:
        with open(path) as f:
            text = f.read()
        cfg = json.loads(text) if text.strip() else {}
    except ValueError as e:
        sys.exit("docker-setup: %s is not valid JSON (%s); fix it by hand" % (path, e))
    if not isinstance(cfg, dict):
        sys.exit("docker-setup: %s is not a JSON object; fix it by hand" % path)
runtimes = cfg.setdefault("runtimes", {})
if not isinstance(runtimes, dict):
    sys.exit("docker-setup: \"runtimes\" in %s is not an object; fix it by hand" % path)
if all(runtimes.get(k) == v for k, v in want.items()):
    print("no")
    sys.exit(0)
runtimes.update(want)
os.makedirs("/etc/docker", exist_ok=True)
tmp = path + ".plimsoll.tmp"
with open(tmp, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
print("yes")
PY
)

if ping_docker; then
    if [ "$changed" = yes ]; then
        # dockerd reloads its runtimes on SIGHUP; the process is not restarted.
        pid=$(cat /var/run/docker.pid 2>/dev/null || true)
        [ -n "$pid" ] && kill -HUP "$pid" 2>/dev/null && say "registered runsc and runsc-bookworm (dockerd reloaded)" ||
            say "registered runsc and runsc-bookworm; restart dockerd to pick them up"
    fi
else
    [ "${DOCKER_SETUP_NO_START:-0}" = 1 ] && die "dockerd does not answer on $SOCK"
    command -v dockerd >/dev/null || die "dockerd is not installed (docker.io)"
    say "starting dockerd (log: $LOG)"
    # No systemd here; the root netns has no usable bridge, so no iptables and no default bridge.
    setsid dockerd --iptables=false --bridge=none >"$LOG" 2>&1 </dev/null &
    i=0
    until ping_docker; do
        i=$((i + 1))
        [ $i -le 120 ] || { tail -20 "$LOG" >&2; die "dockerd did not answer on $SOCK within 60 s"; }
        sleep 0.5
    done
fi

# dockerd must show both registrations with our paths; a SIGHUP reload lands within a moment.
python3 - "$SOCK" "$RUNSC_DIR/runsc" <<'PY' || die "runsc is not registered with dockerd as $RUNSC_DIR/runsc (see /etc/docker/daemon.json)"
import json, socket, sys, time
want = {"runsc": sys.argv[2], "runsc-bookworm": "/usr/bin/runsc"}
for _ in range(50):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sys.argv[1])
    s.sendall(b"GET /v1.41/info HTTP/1.0\r\nHost: docker\r\n\r\n")
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    s.close()
    rts = json.loads(data.split(b"\r\n\r\n", 1)[1]).get("Runtimes") or {}
    if all((rts.get(k) or {}).get("path") == v for k, v in want.items()):
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)
PY

/usr/bin/python3 scripts/build-images.py --quiet
