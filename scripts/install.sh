#!/bin/sh
# install.sh BUILD: installs plimsoll from the meson build directory BUILD (make install).
# Layout (docs/operations.md): plimsolld and every helper it finds beside itself in LIBEXECDIR,
# a symlink SBINDIR/plimsolld, the client in BINDIR, man pages, the systemd unit with its
# sysusers.d and tmpfiles.d files, the environment file example, and libplimsoll (the shared
# library in LIBDIR, include/plimsoll.h in INCLUDEDIR, plimsoll.pc in PKGCONFIGDIR; docs/library.md).
# DESTDIR stages it all; an
# existing SYSCONFDIR/plimsoll/plimsolld.env is never overwritten.
set -eu
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
BINDIR=${BINDIR:-$PREFIX/bin}
SBINDIR=${SBINDIR:-$PREFIX/sbin}
LIBEXECDIR=${LIBEXECDIR:-$PREFIX/libexec/plimsoll}
MANDIR=${MANDIR:-$PREFIX/share/man}
DOCDIR=${DOCDIR:-$PREFIX/share/doc/plimsoll}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
SYSUSERSDIR=${SYSUSERSDIR:-$PREFIX/lib/sysusers.d}
TMPFILESDIR=${TMPFILESDIR:-$PREFIX/lib/tmpfiles.d}
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
PKGCONFIGDIR=${PKGCONFIGDIR:-$LIBDIR/pkgconfig}

die() { echo "install: $*" >&2; exit 1; }
[ -x "$build/src/daemon/plimsolld" ] || die "$build/src/daemon/plimsolld is not built (run make build)"
[ -x "$build/src/cli/plimsoll" ] || die "$build/src/cli/plimsoll is not built"
version=$(sed -n "s/^  version : '\\([^']*\\)',\$/\\1/p" "$src/meson.build")
[ -n "$version" ] || die "cannot read the project version from meson.build"
[ -f "$build/src/lib/libplimsoll.so.$version" ] || die "$build/src/lib/libplimsoll.so.$version is not built"
# The helpers plimsolld looks for beside its own executable; all of them must be there.
helpers=$(find "$build/src" -type f -perm -u+x -name 'plimsoll-*' ! -path '*.p/*' | sort)
for need in plimsoll-qjs-worker plimsoll-guestio; do
    echo "$helpers" | grep -q "/$need\$" || die "$need is not built in $build"
done

install -d "$DESTDIR$BINDIR" "$DESTDIR$SBINDIR" "$DESTDIR$LIBEXECDIR" "$DESTDIR$MANDIR/man1" \
    "$DESTDIR$MANDIR/man8" "$DESTDIR$DOCDIR" "$DESTDIR$UNITDIR" "$DESTDIR$SYSUSERSDIR" "$DESTDIR$TMPFILESDIR"
install -m 0755 "$build/src/daemon/plimsolld" "$DESTDIR$LIBEXECDIR/plimsolld"
for h in $helpers; do
    install -m 0755 "$h" "$DESTDIR$LIBEXECDIR/$(basename "$h")"
done
# plimsolld resolves /proc/self/exe, so the symlink still finds the helpers in LIBEXECDIR.
ln -sf "$LIBEXECDIR/plimsolld" "$DESTDIR$SBINDIR/plimsolld"
install -m 0755 "$build/src/cli/plimsoll" "$DESTDIR$BINDIR/plimsoll"
# libplimsoll: the real file, its soname link and the development link, the header, plimsoll.pc.
install -d "$DESTDIR$LIBDIR" "$DESTDIR$INCLUDEDIR" "$DESTDIR$PKGCONFIGDIR"
install -m 0755 "$build/src/lib/libplimsoll.so.$version" "$DESTDIR$LIBDIR/libplimsoll.so.$version"
ln -sf "libplimsoll.so.$version" "$DESTDIR$LIBDIR/libplimsoll.so.0"
ln -sf "libplimsoll.so.0" "$DESTDIR$LIBDIR/libplimsoll.so"
install -m 0644 "$src/include/plimsoll.h" "$DESTDIR$INCLUDEDIR/plimsoll.h"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@INCLUDEDIR@|$INCLUDEDIR|" -e "s|@VERSION@|$version|" \
    "$src/src/lib/plimsoll.pc.in" > "$DESTDIR$PKGCONFIGDIR/plimsoll.pc"
chmod 0644 "$DESTDIR$PKGCONFIGDIR/plimsoll.pc"
install -m 0644 "$src/man/plimsolld.8" "$DESTDIR$MANDIR/man8/plimsolld.8"
install -m 0644 "$src/man/plimsoll.1" "$DESTDIR$MANDIR/man1/plimsoll.1"
sed -e "s|^ExecStart=/usr/sbin/plimsolld\$|ExecStart=$SBINDIR/plimsolld|" \
    -e "s|^EnvironmentFile=/etc/plimsoll/|EnvironmentFile=$SYSCONFDIR/plimsoll/|" \
    "$src/contrib/systemd/plimsolld.service" > "$DESTDIR$UNITDIR/plimsolld.service"
chmod 0644 "$DESTDIR$UNITDIR/plimsolld.service"
install -m 0644 "$src/contrib/sysusers.d/plimsoll.conf" "$DESTDIR$SYSUSERSDIR/plimsoll.conf"
sed "s|/etc/plimsoll|$SYSCONFDIR/plimsoll|" "$src/contrib/tmpfiles.d/plimsoll.conf" > "$DESTDIR$TMPFILESDIR/plimsoll.conf"
chmod 0644 "$DESTDIR$TMPFILESDIR/plimsoll.conf"
install -m 0644 "$src/contrib/plimsolld.env.example" "$DESTDIR$DOCDIR/plimsolld.env.example"
for d in "$src"/docs/*.md; do
    install -m 0644 "$d" "$DESTDIR$DOCDIR/$(basename "$d")"
done
if [ ! -e "$DESTDIR$SYSCONFDIR/plimsoll/plimsolld.env" ]; then
    install -d -m 0750 "$DESTDIR$SYSCONFDIR/plimsoll"
    install -m 0640 "$src/contrib/plimsolld.env.example" "$DESTDIR$SYSCONFDIR/plimsoll/plimsolld.env"
fi
echo "install: plimsoll installed under ${DESTDIR:-/}$PREFIX (see docs/operations.md to enable the unit)"
