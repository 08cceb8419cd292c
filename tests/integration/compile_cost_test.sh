#!/usr/bin/env bash
# The work function() does per graph node must not grow with the graph (docs/reliability.md §4):
# callgrind counts the instructions inside sj::function for chains of SMALL and LARGE steps of
# two kinds (CompileCostChild.DISABLED_Run in tests/unit/CompileScalingTest.cpp builds them) and
# the count per node at LARGE steps must stay within LIMIT times the count at SMALL. Instruction
# counts have no timing noise; a pass that is quadratic in the graph grows them ~LARGE/SMALL
# times (10x here), a linear one 0.9-1.1x (bench/run compile_cost: 0.88-1.05x from 10^3 to
# 3x10^4 steps). LIMIT 1.3 leaves room for the hash tables' and the memo's size steps.
# Usage: compile_cost_test.sh <symjax_tests binary>      (35-45 s of one core)
set -euo pipefail
bin=${1:?usage: compile_cost_test.sh <symjax_tests binary>}
SMALL=200 LARGE=2000 LIMIT=1.3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
per_node() { # kind steps -> instructions per node
  SJ_CACHE_DIR=off SJ_NUM_THREADS=1 OMP_NUM_THREADS=1 SJ_CC_KIND=$1 SJ_CC_STEPS=$2 \
    valgrind --tool=callgrind --toggle-collect='sj::function(*' --callgrind-out-file="$tmp/cg" \
    "$bin" --gtest_also_run_disabled_tests --gtest_filter=CompileCostChild.DISABLED_Run \
    >"$tmp/log" 2>&1 || { cat "$tmp/log"; echo "compile_cost: the child failed ($1, $2 steps)"; exit 1; }
  local nodes ir
  nodes=$(awk '/^compile_cost nodes/ { print $3 }' "$tmp/log")
  ir=$(awk '/^totals:/ { print $2 }' "$tmp/cg")
  [ -n "$nodes" ] && [ -n "$ir" ] || { cat "$tmp/log"; echo "compile_cost: no count ($1, $2 steps)"; exit 1; }
  echo $((ir / nodes))
}
status=0
for kind in shared_recurrence select_grad; do
  a=$(per_node "$kind" "$SMALL")
  b=$(per_node "$kind" "$LARGE")
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }')
  verdict=ok
  awk -v r="$ratio" -v l="$LIMIT" 'BEGIN { exit !(r > l) }' && { verdict="FAILED (limit ${LIMIT}x)"; status=1; }
  echo "compile_cost $kind: $a instructions/node at $SMALL steps, $b at $LARGE: ${ratio}x $verdict"
done
exit $status
