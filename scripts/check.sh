#!/bin/bash
# make check: unit and black-box tests on the release build and again under ASan+UBSan, then a
# short libFuzzer run over the untrusted parsers. Ends with one "N passed, N failed" line and the
# wall time. Works from any directory and from a clone anywhere (under /tmp too).
#
# Three lanes run side by side once the release build exists, while the ASan build goes on
# (docs/testing.md says why that is safe):
#   docker:  the suites in meson suite lane-docker (they share dockerd), release then ASan
#   microvm: lane-microvm (TCG guests), release then ASan
#   free:    everything else (unit tests, loopback-only black-box suites, packaging), release
#            then ASan with 2 processes each, then the fuzz run (FUZZ_SECONDS per target)
# Each lane keeps its own log (build*/meson-logs/<lane>.json and check-<lane>.txt); the logs of
# a lane are printed when it ends, and failures again at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
t0=$(date +%s)
passed=0
failed=0

count() { # $1 = meson JSON test log: add its counts (a missing log is one failure)
    local log=$1
    [ -f "$log" ] || { echo "check: no test log $log" >&2; failed=$((failed + 1)); return; }
    local pf
    pf=$(python3 -c 'import json,sys
r=[json.loads(l)["result"] for l in open(sys.argv[1]) if l.strip()]
print(sum(x == "OK" for x in r), sum(x != "OK" for x in r))' "$log")
    passed=$((passed + ${pf% *}))
    failed=$((failed + ${pf#* }))
}

build() { # $1 = build dir, rest = meson setup options
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >/dev/null || { echo "check: meson setup $dir failed" >&2; return 1; }
    fi
    ninja -C "$dir" || { echo "check: build in $dir failed" >&2; return 1; }
    ln -sf src/daemon/plimsolld "$dir/plimsolld"
    ln -sf src/cli/plimsoll "$dir/plimsoll"
}

asan_env() {
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
}

# One lane: its meson selection on the release build, then (sanitizer options set) on the ASan
# build. meson's exit status is not used: the JSON logs are counted.
lane() { # $1 = lane name, $2 = processes, rest = meson test selection
    local name=$1 procs=$2
    shift 2
    local dir
    for dir in "$BUILD" "$ASAN_BUILD"; do
        # The ASan build runs while the release pass tests; its pass waits for it.
        if [ "$dir" = "$ASAN_BUILD" ]; then
            while [ ! -f "$asan_done" ]; do sleep 1; done
            [ "$(cat "$asan_done")" = 0 ] || continue # counted once, below
        fi
        [ -f "$dir/build.ninja" ] || continue
        rm -f "$dir/meson-logs/$name.json"
        (
            [ "$dir" = "$ASAN_BUILD" ] && asan_env
            meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$procs" --logbase "$name" "$@"
        )
    done
}

# The docker suites run for real: dockerd, runsc and the images must be there before any test.
echo "== docker (dockerd, runsc, images) =="
if ! scripts/docker-setup.sh; then
    echo "check: docker setup failed; the docker tests will fail and say what is missing" >&2
    failed=$((failed + 1))
fi

echo "== release build (-Werror) =="
build "$BUILD" --buildtype=debugoptimized -Dwerror=true || failed=$((failed + 1))
echo "release build done after $(($(date +%s) - t0)) s"
logs=$BUILD/meson-logs
mkdir -p "$logs"

# The ASan build goes on in the background while the lanes test the release build (much of a
# black-box suite's time is waiting on dockerd, QEMU or a timeout, not CPU).
echo "== ASan + UBSan build (log: $logs/check-asan-build.txt), lanes docker, microvm and free =="
asan_done=$logs/check-asan-build.status
rm -f "$asan_done"
(
    s=$(date +%s)
    if build "$ASAN_BUILD" --buildtype=debugoptimized -Dwerror=true -Db_sanitize=address,undefined \
        -Db_lundef=false >"$logs/check-asan-build.txt" 2>&1; then
        st=0
    else
        st=1
    fi
    echo "ASan build finished after $(($(date +%s) - s)) s (status $st)"
    echo $st >"$asan_done"
) &
asan_pid=$!
# The house's figures (scripts/house.sh, issue 25): measured beside the lanes, printed at the end.
scripts/house.sh "$BUILD" >"$logs/check-house.txt" 2>&1 &
house_pid=$!
declare -A pids
start_lane() { # $1 = lane name, rest = lane arguments; output to $logs/check-<name>.txt
    local name=$1
    (
        s=$(date +%s)
        lane "$@" >"$logs/check-$name.txt" 2>&1
        if [ "$name" = free ] && [ -x scripts/fuzz-short.sh ]; then
            echo "== fuzz (short: ${FUZZ_SECONDS}s per target) =="
            if scripts/fuzz-short.sh "$FUZZ_SECONDS" >"$logs/check-fuzz.txt" 2>&1; then
                echo "fuzz: OK"
            else
                echo "fuzz: FAILED"
                tail -40 "$logs/check-fuzz.txt"
            fi
        fi >>"$logs/check-$name.txt"
        echo "lane $name finished after $(($(date +%s) - s)) s"
    ) &
    pids[$name]=$!
}
start_lane docker 1 --suite lane-docker
start_lane microvm 1 --suite lane-microvm
start_lane free 2 --no-suite lane-docker --no-suite lane-microvm
for name in docker microvm free; do
    wait "${pids[$name]}"
done
wait "$asan_pid"
if [ "$(cat "$asan_done")" != 0 ]; then
    echo "check: the ASan build failed:" >&2
    tail -30 "$logs/check-asan-build.txt" >&2
    failed=$((failed + 1))
fi
for name in docker microvm free; do
    echo "== lane $name =="
    cat "$logs/check-$name.txt"
    count "$BUILD/meson-logs/$name.json"
    [ "$(cat "$asan_done")" = 0 ] && count "$ASAN_BUILD/meson-logs/$name.json"
done
if [ -x scripts/fuzz-short.sh ]; then
    if grep -q '^fuzz: OK$' "$logs/check-free.txt"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi

wait "$house_pid" || true
echo "== house (figures, not a verdict) =="
cat "$logs/check-house.txt"

wall=$(($(date +%s) - t0))
echo "${passed} passed, ${failed} failed"
printf 'make check: wall time %d min %02d s\n' $((wall / 60)) $((wall % 60))
[ "$failed" -eq 0 ]
