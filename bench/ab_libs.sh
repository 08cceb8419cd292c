#!/usr/bin/env bash
# Paired A/B of two builds of libsymjax on the CNN (and MLP) training steps: the same
# symjax_bench binary runs with LD_LIBRARY_PATH pointing at either library (it loads libsymjax
# through its RUNPATH, which LD_LIBRARY_PATH overrides), the order alternating each round, and
# each round prints after/before. On a VM whose speed drifts by +-15% between minutes, only such
# neighbours compare (docs/performance.md, "Tasks stay on their thread").
#
#   bench/ab_libs.sh BEFORE_DIR AFTER_DIR
#
# BEFORE_DIR and AFTER_DIR each hold a copy of a Release build's libsymjax.so* and
# libsymjax_env.so (cp -a build-bench/libsymjax.so* build-bench/libsymjax_env.so DIR/).
# Environment: N rounds (default 4); ROWS, "arch:batch ..." (default "symjax:32 brief:32
# brief:128"; "mlp:128" is the MLP training step of mlp_train); SJ_BENCH_BUILD, the build
# whose symjax_bench runs (default build-bench).
set -euo pipefail
if [ $# -ne 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
  echo "usage: bench/ab_libs.sh BEFORE_DIR AFTER_DIR (directories holding libsymjax.so*)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${SJ_BENCH_BUILD:-$root/build-bench}/symjax_bench
[ -x "$bench" ] || { echo "bench/ab_libs.sh: no $bench (build the symjax_bench target)" >&2; exit 2; }
before=$(cd "$1" && pwd) after=$(cd "$2" && pwd)
N=${N:-4}
ROWS=${ROWS:-"symjax:32 brief:32 brief:128"}

run() { # library dir, arch, batch -> images/s (arch mlp: the MLP step, batch 128, steps/s)
  if [ "$2" = mlp ]; then
    LD_LIBRARY_PATH=$1 "$bench" mlp_train --batch "$3" 2>/dev/null | grep '"train"' |
      grep -o '"value": [0-9.]*' | awk '{print $2}'
    return
  fi
  LD_LIBRARY_PATH=$1 "$bench" cnn_train --arch "$2" --batch "$3" --case train --repeats 3 \
    --min-sample-s 0.25 --warmup 1 2>/dev/null | grep -o '"value": [0-9.]*' | head -1 | awk '{print $2}'
}

for row in $ROWS; do
  arch=${row%%:*} batch=${row##*:} line="$row:"
  for r in $(seq 1 "$N"); do
    if [ $((r % 2)) = 1 ]; then
      b=$(run "$before" "$arch" "$batch"); a=$(run "$after" "$arch" "$batch")
    else
      a=$(run "$after" "$arch" "$batch"); b=$(run "$before" "$arch" "$batch")
    fi
    line="$line $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f(%d/%d)", a / b, a, b }')"
  done
  echo "$line"
done
