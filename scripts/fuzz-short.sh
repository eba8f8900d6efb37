#!/bin/sh
# fuzz-short.sh: builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz and runs each one
# briefly over its seed corpus. Exits non-zero on a build failure or on any crash, leak, sanitizer
# report or timeout, leaving the reproducer in build-fuzz/<target>-crash-*.
# Usage: scripts/fuzz-short.sh [seconds per target, default 20]
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}

# One line per target: its corpus name (fuzz/corpus/<name>, fuzz/corpus-<name>) and its binary.
# A new fuzz target is one new line here; the build list is derived from this table.
targets='
json        fuzz_json_decode
binary      fuzz_binary_decode
route       fuzz_route
docker      fuzz_docker_frames
quickjs     fuzz_quickjs_frames
http        fuzz_docker_http
guestio     fuzz_guestio_frames
e2b_stream  fuzz_e2b_stream
e2b_guard   fuzz_e2b_guard
limits      fuzz_limits_scan
httphead    fuzz_httphead
duration    fuzz_session_duration
mcp         fuzz_mcp
posture     fuzz_docker_posture
microvm     fuzz_microvm_frames
e2b_cellscan fuzz_e2b_cellscan
hostcheck   fuzz_hostcheck
sessframe   fuzz_docker_sessframe
cli_input   fuzz_cli_input
cli_rows    fuzz_cli_rows
module      fuzz_module
pyprobe     fuzz_pyprobe
'

if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
fi
# shellcheck disable=SC2046 # one word per target, by design
ninja -C build-fuzz $(echo "$targets" | awk 'NF { print "fuzz/" $2 }')

# UBSan recovers by default; a finding must fail the run like an ASan one does.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

status=0
echo "$targets" | awk 'NF' > build-fuzz/targets.list
while read -r t target; do
    # New inputs go to the first (git-ignored) directory; the checked-in seeds stay untouched.
    work=fuzz/corpus-$t
    mkdir -p "$work"
    dict=
    [ "$t" = json ] && dict=-dict=fuzz/json.dict
    echo "== $target for ${secs}s"
    if ! "build-fuzz/fuzz/$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len=8192 -print_final_stats=1 -artifact_prefix="build-fuzz/$target-" $dict \
        "$work" $( [ -d "fuzz/corpus/$t" ] && echo "fuzz/corpus/$t" ) </dev/null; then
        echo "FAIL: $target" >&2
        status=1
    fi
done < build-fuzz/targets.list
exit $status
