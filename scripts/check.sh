#!/bin/bash
# make check: unit and black-box tests on the release build and again under ASan+UBSan, then a
# short libFuzzer run over the untrusted parsers. Ends with one "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
passed=0
failed=0

count() { # $1 = build dir: add meson's counts from its JSON test log
    local log="$1/meson-logs/testlog.json"
    [ -f "$log" ] || { failed=$((failed + 1)); return; }
    local p f
    p=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["result"]=="OK"))' "$log")
    f=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["result"]!="OK"))' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
}

run_suite() { # $1 = build dir, rest = meson setup options
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >/dev/null || { echo "check: meson setup $dir failed" >&2; failed=$((failed + 1)); return; }
    fi
    if ! ninja -C "$dir"; then
        echo "check: build in $dir failed" >&2
        failed=$((failed + 1))
        return
    fi
    ln -sf src/daemon/plimsolld "$dir/plimsolld"
    ln -sf src/cli/plimsoll "$dir/plimsoll"
    meson test -C "$dir" --print-errorlogs --num-processes 2 || true
    count "$dir"
}

# The docker suites run for real: dockerd, runsc and the images must be there before any test.
echo "== docker (dockerd, runsc, images) =="
if ! scripts/docker-setup.sh; then
    echo "check: docker setup failed; the docker tests will fail and say what is missing" >&2
    failed=$((failed + 1))
fi

echo "== release build (-Werror) =="
run_suite "$BUILD" --buildtype=debugoptimized -Dwerror=true

echo "== ASan + UBSan build =="
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_suite "$ASAN_BUILD" --buildtype=debugoptimized -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
unset ASAN_OPTIONS UBSAN_OPTIONS

if [ -x scripts/fuzz-short.sh ]; then
    echo "== fuzz (short) =="
    if scripts/fuzz-short.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi

echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
