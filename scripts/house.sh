#!/bin/sh
# The house in figures (issue 25; scripts/house.py says what each figure is). Printed by
# `make check`; never fails it. Usage: scripts/house.sh [BUILD_DIR] [--json]
cd "$(dirname "$0")/.." || exit 1
build=${1:-build}
[ $# -gt 0 ] && shift
exec python3 scripts/house.py --build "$build" "$@"
