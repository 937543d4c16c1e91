#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UBSan: preset `asan` (GCC, -fsanitize=address,undefined,
# UB aborts), run by ctest's `asan` preset, which leaves out the `full` attention grid and the `slow`
# tests. Prints the build and run times. Built at -O1 -g1, as the sanitizers advise: half the compile
# time of -O2 -g, with line tables enough for the reports' stack traces. The preset leaves out the
# benchmark drivers (FLASHPORT_BENCH OFF): nothing here runs them, and the cpu preset compiles them.
# Usage: scripts/asan.sh [ctest arguments...]        e.g. scripts/asan.sh -R Tokenizer
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
if ! { cmake --preset asan && cmake --build --preset asan -j "$(nproc)"; } >"$log" 2>&1; then
  tail -n 40 "$log"
  echo "asan: building the asan preset failed" >&2
  exit 1
fi
built=$(( $(date +%s) - start ))
echo "asan: built in $built s"
start=$(date +%s)
rc=0
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
ctest --preset asan -j "$(nproc)" "$@" || rc=$?
echo "asan: build $built s, tests $(( $(date +%s) - start )) s"
exit "$rc"
