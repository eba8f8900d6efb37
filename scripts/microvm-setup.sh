#!/bin/sh
# microvm-setup.sh: the microvm provider's guest parts, built from host files (issue 10).
# Owns: third_party/microvm/ (gitignored): the pinned Debian cloud kernel package, its vmlinuz
#   and the four virtio modules the guest init loads; and, in `initramfs` mode, the initramfs
#   file named by the caller (a meson build output), with Debian's static busybox for project steps.
# Trusts: nothing downloaded until its SHA-256 equals the pin below (apt-get also checks the
#   archive's signed Release file before it writes the .deb).
# Invariant: the extracted kernel and modules exist only beside a stamp holding the pinned
#   digest; a second `fetch` with the stamp present is silent, offline and touches nothing.
#
# Usage:
#   scripts/microvm-setup.sh fetch [DEST]                 (default DEST: <repo>/third_party/microvm)
#   scripts/microvm-setup.sh initramfs OUT INIT [DEST]    OUT: the cpio to write; INIT: the static
#                                                         guest init (src/providers/microvm/guest)
set -eu

KPKG=linux-image-6.1.0-57-cloud-amd64
KVER=6.1.192-3
KREL=6.1.0-57-cloud-amd64
KDEB=${KPKG}_${KVER}_amd64.deb
KSHA256=4fdd0172a8c3f41a97e92465b2ac1867e1c10d82d7aeed3d26ee7a5d14df1754
# Load order matters: virtio.ko needs symbols of virtio_ring.ko (docs/microvm.md, Layout).
BUSYBOX=${BUSYBOX:-/bin/busybox}
MODULES="drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko drivers/virtio/virtio_mmio.ko drivers/char/virtio_console.ko"

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
die() {
    echo "microvm-setup: $*" >&2
    exit 1
}
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

fetch() {
    dest=$1
    stamp=$dest/.plimsoll-verified
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$KSHA256" ] && [ -f "$dest/vmlinuz" ]; then
        return 0
    fi
    mkdir -p "$dest/dl"
    deb=$dest/dl/$KDEB
    if [ ! -f "$deb" ] || [ "$(sha_of "$deb")" != "$KSHA256" ]; then
        rm -f "$deb"
        command -v apt-get >/dev/null 2>&1 || die "apt-get not found; place $KDEB (sha256 $KSHA256) in $dest/dl"
        (cd "$dest/dl" && apt-get -q download "$KPKG=$KVER" >/dev/null) ||
            die "apt-get download $KPKG=$KVER failed (run apt-get update; the pin is in $0)"
    fi
    got=$(sha_of "$deb")
    [ "$got" = "$KSHA256" ] || { rm -f "$deb"; die "$KDEB: sha256 $got, expected $KSHA256"; }
    rm -rf "$dest/x" "$dest/modules" "$dest/vmlinuz" "$stamp"
    dpkg-deb -x "$deb" "$dest/x"
    cp "$dest/x/boot/vmlinuz-$KREL" "$dest/vmlinuz"
    mkdir -p "$dest/modules"
    n=0
    for m in $MODULES; do
        n=$((n + 1))
        f=$dest/x/lib/modules/$KREL/kernel/$m
        [ -f "$f" ] || die "module $m missing from $KDEB"
        cp "$f" "$dest/modules/$n-$(basename "$m")"
    done
    rm -rf "$dest/x"
    echo "$KSHA256" >"$stamp"
}

# The initramfs: a newc cpio (uncompressed: TCG decompresses slowly) holding /init (our static
# guest init and agent), /mod/N-name.ko (loaded in N order) and the empty mount points.
initramfs() {
    out=$1
    init=$2
    dest=$3
    fetch "$dest"
    [ -x "$init" ] || die "guest init $init is not an executable"
    stage=$(mktemp -d "${out}.stage.XXXXXX")
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage/dev" "$stage/proc" "$stage/tmp" "$stage/mod" "$stage/sys" "$stage/work" "$stage/bin"
    cp "$init" "$stage/init"
    chmod 0755 "$stage/init"
    # Project steps run `sh -c` with busybox's applets (Debian busybox-static: one static binary).
    [ -x "$BUSYBOX" ] || die "$BUSYBOX missing: apt-get install busybox-static (scripts/install-deps.sh)"
    cp "$BUSYBOX" "$stage/bin/busybox"
    for a in $("$BUSYBOX" --list); do
        [ "$a" = busybox ] || ln -s busybox "$stage/bin/$a"
    done
    cp "$dest"/modules/*.ko "$stage/mod/"
    # Fixed times and owners: the same inputs give the same bytes, so the identity is stable.
    python3 "$here/../src/providers/microvm/guest/mkcpio.py" "$stage" "$out.tmp"
    mv "$out.tmp" "$out"
}

case "${1:-}" in
fetch) fetch "${2:-$here/../third_party/microvm}" ;;
initramfs)
    [ $# -ge 3 ] || die "usage: $0 initramfs OUT INIT [DEST]"
    initramfs "$2" "$3" "${4:-$here/../third_party/microvm}"
    ;;
*) die "usage: $0 fetch [DEST] | initramfs OUT INIT [DEST]" ;;
esac
