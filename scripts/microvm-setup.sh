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
#   scripts/microvm-setup.sh node-image OUT [WORKER MODEL...]
#                                                         OUT: a read-only ext4 image of the host's
#                                                         node and the shared libraries ldd names
#                                                         for it, and python3 with its data
#                                                         libraries (project VMs' /usr, virtio-blk;
#                                                         MICROVM_PYTHON=0 leaves Python off);
#                                                         WORKER, MODEL: the static module worker
#                                                         and models (model-<Name>) to carry at
#                                                         lib/plimsoll/ (docs/modules.md)
set -eu

KPKG=linux-image-6.1.0-57-cloud-amd64
KVER=6.1.192-3
KREL=6.1.0-57-cloud-amd64
KDEB=${KPKG}_${KVER}_amd64.deb
KSHA256=4fdd0172a8c3f41a97e92465b2ac1867e1c10d82d7aeed3d26ee7a5d14df1754
# Load order matters: virtio.ko needs symbols of virtio_ring.ko (docs/microvm.md, Layout).
BUSYBOX=${BUSYBOX:-/bin/busybox}
NODE=${NODE:-/usr/bin/node}
# virtio_blk last: only project VMs have a block device (node's read-only image); in snippet VMs
# the driver finds no device.
MODULES="drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko drivers/virtio/virtio_mmio.ko drivers/char/virtio_console.ko drivers/block/virtio_blk.ko"

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
die() {
    echo "microvm-setup: $*" >&2
    exit 1
}
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

fetch() {
    dest=$1
    stamp=$dest/.plimsoll-verified
    # The stamp names the pin and the module list: a changed list re-extracts from the verified .deb.
    want="$KSHA256 $(echo "$MODULES" | sha256sum | cut -c1-16)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dest/vmlinuz" ]; then
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
    echo "$want" >"$stamp"
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
    mkdir -p "$stage/dev" "$stage/proc" "$stage/tmp" "$stage/mod" "$stage/sys" "$stage/work" "$stage/bin" "$stage/usr"
    # Project VMs mount node's image on /usr; its libraries and loader are reached at the paths
    # node was linked with (merged /usr, as Debian: /lib -> usr/lib, /lib64 -> usr/lib64).
    ln -s usr/lib "$stage/lib"
    ln -s usr/lib64 "$stage/lib64"
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

# Node's read-only image for project VMs: an ext4 file system (built into the guest kernel; no
# journal) holding bin/node and exactly the shared libraries ldd names for it (lib/<triplet>/) and
# the loader (lib64/), mounted read-only on /usr. Its files stay on the host's disk: the guest
# reads the pages node touches, so neither guest RAM nor the template state holds them.
# Fixed UUID, hash seed, superblock times (E2FSPROGS_FAKE_TIME) and file times; mke2fs copies a
# directory's change time from the stage, so a rebuild can differ in a few bytes (a new identity).
node_image() {
    out=$1
    worker=${2:-}
    models=
    [ $# -ge 2 ] && shift 2 && models=$*
    [ -x "$NODE" ] || die "$NODE missing: apt-get install nodejs (scripts/install-deps.sh)"
    command -v mke2fs >/dev/null 2>&1 || PATH=$PATH:/sbin:/usr/sbin
    command -v mke2fs >/dev/null 2>&1 || die "mke2fs missing: apt-get install e2fsprogs"
    stage=$(mktemp -d "${out}.stage.XXXXXX")
    trap 'rm -rf "$stage"' EXIT
    # Python on the same disk (issue 20: one combined read-only disk; docs/python.md says why):
    # python3, its standard library and the data libraries, from this host's Debian files by the
    # image builder's own selection. Without them the disk holds node only, and the startup proof
    # states `python: absent` on the card.
    if [ "${MICROVM_PYTHON:-1}" = 1 ]; then
        /usr/bin/python3 "$here/build-images.py" --usr-stage "$stage" ||
            echo "microvm-setup: python3 and its data libraries are left off the disk (see above)" >&2
    fi
    mkdir -p "$stage/bin" "$stage/lib64"
    cp -L "$NODE" "$stage/bin/node"
    ldd "$NODE" >"$stage.ldd" || die "ldd $NODE failed"
    for f in $(awk '/=>/ && $3 ~ /^\// {print $3}' "$stage.ldd"); do
        d=$stage/lib/$(basename "$(dirname "$f")")
        mkdir -p "$d"
        rm -f "$d/$(basename "$f")" # python's stage may hold it as a link to the host's /usr
        cp -L "$f" "$d/$(basename "$f")"
    done
    loader=$(awk '$1 ~ /^\/.*ld-linux/ {print $1}' "$stage.ldd")
    rm -f "$stage.ldd"
    [ -n "$loader" ] || die "no dynamic loader in ldd $NODE"
    rm -f "$stage/lib64/$(basename "$loader")"
    cp -L "$loader" "$stage/lib64/$(basename "$loader")"
    # Module runs (docs/modules.md): the worker and each model, static, owned by root (mke2fs
    # copies the stage's owners; the worker loads only root-owned models from a read-only mount).
    if [ -n "$worker" ]; then
        mkdir -p "$stage/lib/plimsoll/models"
        cp "$worker" "$stage/lib/plimsoll/sim-worker"
        for m in $models; do
            name=$(basename "$m")
            case "$name" in model-?*) ;; *) die "module model $m is not named model-<Name>" ;; esac
            cp "$m" "$stage/lib/plimsoll/models/${name#model-}"
        done
        chmod 0755 "$stage/lib/plimsoll/sim-worker" "$stage/lib/plimsoll/models"/*
    fi
    chmod -R a+rX,go-w "$stage"
    # Python's sources keep their times: the byte code beside them records them, and a stale
    # record would make every import compile again (the disk is read-only, nothing is cached).
    find "$stage" ! -path "$stage/lib/python3*" -exec touch -h -d @0 {} +
    kib=$(du -sk "$stage" | cut -f1)
    inodes=$(($(find "$stage" | wc -l) + 256))
    rm -f "$out.tmp"
    E2FSPROGS_FAKE_TIME=1 mke2fs -q -t ext4 -O ^has_journal,^resize_inode -b 4096 -m 0 -N "$inodes" \
        -U 6e6f6465-0000-4000-8000-000000000001 \
        -E root_owner=0:0,hash_seed=6e6f6465-0000-4000-8000-000000000002,lazy_itable_init=0 \
        -L plm-node -d "$stage" "$out.tmp" $((kib / 4 + kib / 40 + 1024)) >/dev/null ||
        die "mke2fs of $out failed"
    # A build as another user: the module files become root's on the disk itself.
    if [ -n "$worker" ] && [ "$(id -u)" != 0 ]; then
        cmds=$stage.debugfs
        for f in $(cd "$stage" && find lib/plimsoll); do
            printf 'sif /%s uid 0\nsif /%s gid 0\n' "$f" "$f" >>"$cmds"
        done
        debugfs -w -f "$cmds" "$out.tmp" >/dev/null 2>&1 || die "debugfs could not give the module files to root"
        rm -f "$cmds"
    fi
    mv "$out.tmp" "$out"
}

case "${1:-}" in
fetch) fetch "${2:-$here/../third_party/microvm}" ;;
initramfs)
    [ $# -ge 3 ] || die "usage: $0 initramfs OUT INIT [DEST]"
    initramfs "$2" "$3" "${4:-$here/../third_party/microvm}"
    ;;
node-image)
    [ $# -ge 2 ] || die "usage: $0 node-image OUT [WORKER MODEL...]"
    shift
    node_image "$@"
    ;;
*) die "usage: $0 fetch [DEST] | initramfs OUT INIT [DEST] | node-image OUT [WORKER MODEL...]" ;;
esac
