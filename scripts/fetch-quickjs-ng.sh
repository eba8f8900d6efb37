#!/bin/sh
# fetch-quickjs-ng.sh: fetch and unpack the pinned QuickJS-ng engine source (issue 12, DESIGN.md).
# Owns: third_party/quickjs-ng-0.17.0/ and third_party/.quickjs-ng-dl/ (both gitignored).
# Trusts: nothing downloaded until its SHA-256 equals the pin below; apt verifies the Release
#   signature against Debian's archive keyring, the pin then binds the exact package file.
# Invariant: the unpacked tree exists only beside a stamp holding the pinned digest; a second
#   run with the stamp present is silent, offline and touches nothing.
#
# The engine comes from Debian's `quickjs-ng` source package, version 0.17.0-1 (the newest Debian
# ships: forky and sid; trixie has none, trixie-backports 0.16.2). Debian builds the engine's
# sources into the architecture-independent binary package `qjs-src` (/usr/src/quickjs-ng/: the
# upstream files unchanged plus the builtin and Unicode tables Debian regenerates at build time).
# We fetch that package with `apt-get download` using a PRIVATE sources list and private
# state/cache dirs, so the host's apt configuration is neither read nor changed, and unpack it
# with dpkg-deb. Why not the orig tarball: the package mirror this project can reach serves
# qjs-src_0.17.0-1_all.deb but answers 404 for quickjs-ng_0.17.0.orig.tar.gz (docs/decisions.md).
# Only quickjs.c, libregexp.c, libunicode.c, dtoa.c and headers are compiled; never quickjs-libc.
#
# Usage: scripts/fetch-quickjs-ng.sh [DEST_PARENT]   (default: <repo>/third_party)
set -eu

VERSION=0.17.0
DEB_VERSION=0.17.0-1
SUITES="forky sid"
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
DEB=qjs-src_${DEB_VERSION}_all.deb
SHA256=04631979bdadaccffd76c1cb0aff5d07389aa889a90b6a902eba858a3a3b3988
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MIRROR=http://deb.debian.org/debian

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
parent=${1:-$here/../third_party}
mkdir -p "$parent"
parent=$(CDPATH= cd -- "$parent" && pwd)
dest=$parent/quickjs-ng-$VERSION
stamp=$dest/.plimsoll-verified
dl=$parent/.quickjs-ng-dl

die() {
    echo "fetch-quickjs-ng: $*" >&2
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
pkg=$dl/$DEB
if [ ! -f "$pkg" ] || [ "$(sha_of "$pkg")" != "$SHA256" ]; then
    rm -f "$pkg"
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; place $DEB (sha256 $SHA256) in $dl"
    [ -r "$KEYRING" ] || die "missing $KEYRING (apt-get install debian-archive-keyring)"
    state=$dl/apt
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc"
    : >"$state/etc/sources.list"
    for s in $SUITES; do
        printf 'deb [signed-by=%s arch=%s] %s %s main\n' "$KEYRING" "$ARCH" "$MIRROR" "$s" >>"$state/etc/sources.list"
    done
    # Private everything: sources, lists, caches, an empty dpkg status (nothing is installed,
    # only downloaded), no sandbox user (the dirs are ours), no system sources.list.d.
    set -- -q -o "Dir::Etc::SourceList=$state/etc/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null \
        -o "Dir::State::Lists=$state/lists" \
        -o Dir::State::status=/dev/null \
        -o "Dir::Cache=$state/cache" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
        -o "APT::Architecture=$ARCH" -o "APT::Architectures=$ARCH" \
        -o APT::Sandbox::User=root \
        -o Debug::NoLocking=true
    apt-get "$@" update >"$dl/apt-update.log" 2>&1 ||
        die "apt-get update failed (see $dl/apt-update.log)"
    (cd "$dl" && apt-get "$@" download "qjs-src=$DEB_VERSION") >"$dl/apt-download.log" 2>&1 ||
        die "apt-get download qjs-src=$DEB_VERSION failed (see $dl/apt-download.log)"
    [ -f "$pkg" ] || die "apt-get did not produce $DEB"
fi

# Fail closed: a different package is never unpacked, and is removed so a rerun refetches.
got=$(sha_of "$pkg")
if [ "$got" != "$SHA256" ]; then
    rm -f "$pkg"
    die "SHA-256 mismatch for $DEB: got $got, want $SHA256"
fi

command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found"
tmp=$parent/.quickjs-ng-unpack.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$pkg" "$tmp"
src=$tmp/usr/src/quickjs-ng
[ -f "$src/quickjs.c" ] && [ -f "$src/quickjs.h" ] || die "$DEB has no usr/src/quickjs-ng/quickjs.c"
grep -q '^#define QJS_VERSION_MINOR 17$' "$src/quickjs.h" || die "$DEB is not QuickJS-ng $VERSION"
rm -rf "$dest"
mv "$src" "$dest"
printf '%s\n' "$SHA256" >"$stamp"
