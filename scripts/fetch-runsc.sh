#!/bin/sh
# fetch-runsc.sh: fetch, verify and install the pinned gVisor runsc (issue 26, docs/dependencies.md).
# Owns: $DEST (default /usr/local/lib/plimsoll/runsc-<version>/) and its download state
#   $DEST/.dl/ (both ours; the distribution's /usr/bin/runsc is never touched).
# Trusts: nothing downloaded until its SHA-256 equals the pin below; apt verifies the Release
#   signature against Debian's archive keyring, the pin then binds the exact package file.
# Invariant: $DEST/runsc exists only beside a stamp holding the package's pinned digest and the
#   installed binary's own digest; a second run with both matching is silent, offline and
#   touches nothing. A binary that no longer matches its stamp is installed again from the
#   verified package (or refetched), never trusted.
#
# The binary is Debian trixie's `runsc` package, 0.0~20240729.0-4+b7 (Debian stable's gVisor, the
# systrap platform by default). Its /usr/bin/runsc is a static Go binary: it runs on bookworm as
# is. The package is fetched with `apt-get download` through a PRIVATE sources list and private
# state and cache dirs (the host's apt configuration is neither read nor changed), exactly as
# scripts/fetch-quickjs-ng.sh fetches QuickJS-ng, and unpacked with dpkg-deb.
#
# Usage: scripts/fetch-runsc.sh [DEST]   prints nothing on success; the binary is DEST/runsc.
set -eu

DEB_VERSION=0.0~20240729.0-4+b7
RUNSC_VERSION=0.0~20240729.0 # what `runsc --version` must print
SUITE=trixie
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
[ "$ARCH" = amd64 ] || { echo "fetch-runsc: the pin is for amd64, this host is $ARCH" >&2; exit 1; }
DEB=runsc_0.0~20240729.0-4+b7_amd64.deb
SHA256=3c25a5130dfac2f71237d5baad56ac86a255de87a0400f11b36a555156dc325a
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MIRROR=http://deb.debian.org/debian

dest=${1:-/usr/local/lib/plimsoll/runsc-20240729}
stamp=$dest/.plimsoll-verified
dl=$dest/.dl

die() {
    echo "fetch-runsc: $*" >&2
    exit 1
}

sha_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# Fast path: installed and verified, the binary unchanged since. Silent and offline.
if [ -f "$stamp" ] && [ -x "$dest/runsc" ] &&
    [ "$(cat "$stamp")" = "$SHA256 $(sha_of "$dest/runsc")" ]; then
    exit 0
fi

mkdir -p "$dl"
pkg=$dl/$DEB
if [ ! -f "$pkg" ] || [ "$(sha_of "$pkg")" != "$SHA256" ]; then
    rm -f "$pkg"
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; place $DEB (sha256 $SHA256) at $pkg"
    [ -r "$KEYRING" ] || die "missing $KEYRING (apt-get install debian-archive-keyring)"
    state=$dl/apt
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc"
    printf 'deb [signed-by=%s arch=%s] %s %s main\n' "$KEYRING" "$ARCH" "$MIRROR" "$SUITE" >"$state/etc/sources.list"
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
    (cd "$dl" && apt-get "$@" download "runsc=$DEB_VERSION") >"$dl/apt-download.log" 2>&1 ||
        die "apt-get download runsc=$DEB_VERSION failed (see $dl/apt-download.log)"
    [ -f "$pkg" ] || die "apt-get did not produce $DEB"
fi

# Fail closed: a different package is never unpacked, and is removed so a rerun refetches.
got=$(sha_of "$pkg")
if [ "$got" != "$SHA256" ]; then
    rm -f "$pkg"
    die "SHA-256 mismatch for $DEB: got $got, want $SHA256"
fi

command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found"
tmp=$dest/.unpack.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$pkg" "$tmp"
bin=$tmp/usr/bin/runsc
[ -x "$bin" ] || die "$DEB has no usr/bin/runsc"
ver=$(env -i "$bin" --version 2>/dev/null | head -1) || true
[ "$ver" = "runsc version $RUNSC_VERSION" ] || die "$DEB's runsc says \"$ver\", want \"runsc version $RUNSC_VERSION\""
chmod 0755 "$bin"
mv -f "$bin" "$dest/runsc.new"
mv -f "$dest/runsc.new" "$dest/runsc"
printf '%s %s\n' "$SHA256" "$(sha_of "$dest/runsc")" >"$stamp"
