#!/usr/bin/env bash
# Builds symjax with sanitizers and runs tests under them.
#   tools/sanitize.sh asan [GTEST_FILTER]   AddressSanitizer + UndefinedBehaviorSanitizer, the
#                                           whole gtest binary (default filter: everything)
#   tools/sanitize.sh tsan [GTEST_FILTER]   ThreadSanitizer, the threaded tests: the loader, the
#                                           thread team, concurrent calls and snapshots, interrupts,
#                                           nodes made and dropped on several threads
# Build folders: build-asan / build-tsan (SJ_SANITIZE_BUILD overrides); RelWithDebInfo, ccache when
# installed. A clean build takes about 25 minutes on 2 cores, the asan tests about 5, the tsan
# subset about 2. Prints the gtest summary; exits non-zero on a failed test or any report.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case $mode in
  asan)
    flag=-DSJ_SANITIZE=ON
    filter=${2:-*} ;;
  tsan)
    flag=-DSJ_TSAN=ON
    filter=${2:-DataLoader.*:Snapshot.*:Interrupt.*:RandomTest.NextSeedIsThreadSafe:CpuBackend.*:ConvCpu.*:ThreadCount.*:Scale.ThreadsMakeAndDropNodesTogether} ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan [GTEST_FILTER]" >&2
    exit 2 ;;
esac
build=${SJ_SANITIZE_BUILD:-$root/build-$mode}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$flag" \
  -DSJ_BUILD_PYTHON=OFF -DSJ_BUILD_EXAMPLES=OFF -DSJ_BUILD_TOOLS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target symjax_tests >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
if [ "$mode" = asan ]; then
  # leaks are checked by the tests that run under LSan on purpose (docs/reliability.md)
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/tests/symjax_tests" --gtest_filter="$filter" >"$log" 2>&1 || status=1
  reports=$(grep -c "runtime error:\|ERROR: AddressSanitizer" "$log" || true)
else
  TSAN_OPTIONS="suppressions=$root/tools/tsan.supp halt_on_error=0 second_deadlock_stack=1" \
    "$build/tests/symjax_tests" --gtest_filter="$filter" >"$log" 2>&1 || status=1
  reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
fi
grep -E "^\[  (PASSED|FAILED) " "$log" || true
echo "sanitize $mode: $reports reports"
if [ "$reports" != 0 ] || [ $status != 0 ]; then
  grep -B2 -A30 "WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|runtime error:" "$log" | head -200 >&2
  grep "^\[  FAILED" "$log" >&2 || true
  exit 1
fi
