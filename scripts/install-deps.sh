#!/bin/sh
# Installs the Debian packages plimsoll needs to build and test. Quiet and quick when they are
# all present; otherwise one apt-get update and one install. Run as root on Debian bookworm.
set -eu
pkgs="gcc make pkg-config meson ninja-build clang libclang-rt-14-dev python3 xz-utils ca-certificates curl
      libjansson-dev libprotobuf-c-dev protobuf-c-compiler libcurl4-openssl-dev
      libssl-dev libgnutls28-dev openssl libseccomp-dev libedit-dev nodejs chromium mandoc man-db systemd
      qemu-system-x86 busybox-static e2fsprogs
      python3-numpy python3-scipy python3-pandas python3-matplotlib yamllint python3-yaml"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages and not root; run: apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
