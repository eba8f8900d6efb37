#!/bin/sh
# fuzz-short.sh: builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz and runs each one
# briefly over its seed corpus. Exits non-zero on a build failure or on any crash, leak, sanitizer
# report or timeout, leaving the reproducer in build-fuzz/<target>-crash-*.
# Usage: scripts/fuzz-short.sh [seconds per target, default 20]
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}

if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
fi
ninja -C build-fuzz fuzz/fuzz_json_decode fuzz/fuzz_binary_decode fuzz/fuzz_route fuzz/fuzz_docker_frames \
    fuzz/fuzz_quickjs_frames fuzz/fuzz_docker_http fuzz/fuzz_guestio_frames fuzz/fuzz_e2b_stream fuzz/fuzz_e2b_guard \
    fuzz/fuzz_limits_scan fuzz/fuzz_httphead fuzz/fuzz_session_duration fuzz/fuzz_mcp fuzz/fuzz_docker_posture \
    fuzz/fuzz_microvm_frames fuzz/fuzz_docker_sessframe

# UBSan recovers by default; a finding must fail the run like an ASan one does.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

status=0
for t in json binary route docker quickjs http guestio e2b_stream e2b_guard limits httphead duration mcp posture microvm sessframe; do
    target=fuzz_${t}_decode
    [ "$t" = route ] && target=fuzz_route
    [ "$t" = docker ] && target=fuzz_docker_frames
    [ "$t" = quickjs ] && target=fuzz_quickjs_frames
    [ "$t" = http ] && target=fuzz_docker_http
    [ "$t" = guestio ] && target=fuzz_guestio_frames
    [ "$t" = e2b_stream ] && target=fuzz_e2b_stream
    [ "$t" = e2b_guard ] && target=fuzz_e2b_guard
    [ "$t" = limits ] && target=fuzz_limits_scan
    [ "$t" = httphead ] && target=fuzz_httphead
    [ "$t" = duration ] && target=fuzz_session_duration
    [ "$t" = mcp ] && target=fuzz_mcp
    [ "$t" = posture ] && target=fuzz_docker_posture
    [ "$t" = microvm ] && target=fuzz_microvm_frames
    [ "$t" = sessframe ] && target=fuzz_docker_sessframe
    # New inputs go to the first (git-ignored) directory; the checked-in seeds stay untouched.
    work=fuzz/corpus-$t
    mkdir -p "$work"
    dict=
    [ "$t" = json ] && dict=-dict=fuzz/json.dict
    echo "== $target for ${secs}s"
    if ! "build-fuzz/fuzz/$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len=8192 -print_final_stats=1 -artifact_prefix="build-fuzz/$target-" $dict \
        "$work" $( [ -d "fuzz/corpus/$t" ] && echo "fuzz/corpus/$t" ); then
        echo "FAIL: $target" >&2
        status=1
    fi
done
exit $status
