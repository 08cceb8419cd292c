#!/usr/bin/env bash
# Builds symjax's libFuzzer targets (fuzz/: clang 14, ASan + UBSan, coverage) and runs each for
# SECONDS (default 30) from its seed corpus in fuzz/corpus/<target>/. A crash, a leak, a hang
# (-timeout) or a memory blow-up (-rss_limit_mb) fails the run; the input is kept in
# fuzz/findings/. New inputs the fuzzer finds go to a scratch corpus, not into the repository.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]     TARGETS: idx cifar image safetensors ir_text kernel_cache
#   SJ_FUZZ_BUILD=dir   build folder (default build-fuzz)
# Prints one line per target: "fuzz <target>: <runs> runs in <s> s, <corpus> inputs, ok|FAILED".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30}
shift || true
targets=${*:-idx cifar image safetensors ir_text kernel_cache}
build=${SJ_FUZZ_BUILD:-$root/build-fuzz}
for p in clang++-14 clang-14; do
  command -v $p >/dev/null || { echo "tools/fuzz.sh: needs $p (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
done
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSJ_FUZZ=ON -DSJ_BUILD_TESTS=OFF -DSJ_BUILD_EXAMPLES=OFF -DSJ_BUILD_TOOLS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) >/dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for t in $targets; do
  mkdir -p "$scratch/$t" "$root/fuzz/findings"
  log="$scratch/$t.log"
  # leaks: the readers must free what they allocate on every error path too
  if "$build/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/$t-" "$scratch/$t" "$root/fuzz/corpus/$t" \
      >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
    tail -40 "$log" >&2
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  corpus=$(ls "$scratch/$t" | wc -l)
  echo "fuzz $t: $runs runs in $secs s, $corpus new inputs, $result"
done
exit $status
