#!/bin/sh
# fetch-quickjs.sh: fetch and unpack the pinned QuickJS engine source (issue 4, DESIGN.md).
# Owns: third_party/quickjs-2025.04.26/ and third_party/.quickjs-dl/ (both gitignored).
# Trusts: nothing downloaded until its SHA-256 equals the pin below; apt verifies the Release
#   signature against Debian's archive keyring, the pin then binds the exact orig tarball.
# Invariant: the unpacked tree exists only beside a stamp holding the pinned digest; a second
#   run with the stamp present is silent, offline and touches nothing.
#
# Debian's `quickjs` source package (suite trixie, 2025.04.26-1) is fetched with apt-get using a
# PRIVATE sources list and private state/cache dirs, so the host's apt configuration is neither
# read nor changed. Only the upstream orig tarball is unpacked; Debian's packaging patches are
# about the shared library and the qjs binary, which we do not build.
#
# Usage: scripts/fetch-quickjs.sh [DEST_PARENT]   (default: <repo>/third_party)
set -eu

VERSION=2025.04.26
DEB_VERSION=2025.04.26-1
SUITE=trixie
ORIG=quickjs_${VERSION}.orig.tar.xz
SHA256=ec81da5b3249ed648dbc7df4a1654988910e66a118d9b71cb63534216efcfbbe
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MIRROR=http://deb.debian.org/debian

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
parent=${1:-$here/../third_party}
mkdir -p "$parent"
parent=$(CDPATH= cd -- "$parent" && pwd)
dest=$parent/quickjs-$VERSION
stamp=$dest/.plimsoll-verified
dl=$parent/.quickjs-dl

die() {
    echo "fetch-quickjs: $*" >&2
    exit 1
}

# Fast path: already fetched and verified. Silent and offline.
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$SHA256" ] && [ -f "$dest/quickjs.c" ]; then
    exit 0
fi

sha_of() {
    sha256sum "$1" | cut -d' ' -f1
}

mkdir -p "$dl"
tarball=$dl/$ORIG
if [ ! -f "$tarball" ] || [ "$(sha_of "$tarball")" != "$SHA256" ]; then
    rm -f "$tarball"
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; place $ORIG (sha256 $SHA256) in $dl"
    [ -r "$KEYRING" ] || die "missing $KEYRING (apt-get install debian-archive-keyring)"
    state=$dl/apt
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc"
    printf 'deb-src [signed-by=%s] %s %s main\n' "$KEYRING" "$MIRROR" "$SUITE" >"$state/etc/sources.list"
    # Private everything: sources, lists, caches, no sandbox user (the dirs are ours), no
    # system sources.list.d. Dir::State::status is left alone: source downloads never read it.
    set -- -q -o "Dir::Etc::SourceList=$state/etc/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null \
        -o "Dir::State::Lists=$state/lists" \
        -o "Dir::Cache=$state/cache" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
        -o APT::Sandbox::User=root \
        -o Debug::NoLocking=true
    apt-get "$@" update >"$dl/apt-update.log" 2>&1 ||
        die "apt-get update failed (see $dl/apt-update.log)"
    (cd "$dl" && apt-get "$@" source --download-only "quickjs=$DEB_VERSION") >"$dl/apt-source.log" 2>&1 ||
        die "apt-get source quickjs=$DEB_VERSION failed (see $dl/apt-source.log)"
    [ -f "$tarball" ] || die "apt-get did not produce $ORIG"
fi

# Fail closed: a different tarball is never unpacked, and is removed so a rerun refetches.
got=$(sha_of "$tarball")
if [ "$got" != "$SHA256" ]; then
    rm -f "$tarball"
    die "SHA-256 mismatch for $ORIG: got $got, want $SHA256"
fi

tmp=$parent/.quickjs-unpack.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$tarball" -C "$tmp" --no-same-owner --no-same-permissions
# The tarball holds one top-level directory (quickjs-2025-04-26 upstream); take whatever it is.
top=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d)
[ -n "$top" ] && [ "$(printf '%s\n' "$top" | wc -l)" -eq 1 ] || die "unexpected layout in $ORIG"
[ -f "$top/quickjs.c" ] || die "$ORIG has no quickjs.c"
rm -rf "$dest"
mv "$top" "$dest"
printf '%s\n' "$SHA256" >"$stamp"
