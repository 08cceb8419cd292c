#!/usr/bin/env bash
# Runs tests/dist/DistTest.cpp on 2 MPI ranks over loopback. Usage:
#   run_dist.sh <mpirun or ""> <symjax_dist_tests> suite|raises|dies
# suite: every collective and data-parallel test must pass on both ranks (none skipped);
# raises, dies: one rank fails and the job must end within 60 s, the others reporting why.
# Without mpirun the test is skipped (exit 77).
set -uo pipefail
mpirun=$1 bin=$2 mode=$3
[ -n "$mpirun" ] && [ -x "$(command -v "$mpirun")" ] || { echo "run_dist: no mpirun: skipped"; exit 77; }
args=(--oversubscribe -np 2)
[ "$(id -u)" = 0 ] && args=(--allow-run-as-root "${args[@]}")
# loopback only, no interactive warnings about missing interfaces
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_rmaps_base_oversubscribe=1 SJ_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
case $mode in
suite)
  timeout 120 "$mpirun" "${args[@]}" "$bin" --gtest_color=no --gtest_filter='Dist*:-DistScenario.*' > "$out" 2>&1
  rc=$?
  cat "$out"
  [ $rc = 0 ] || { echo "run_dist: FAILED (mpirun exit $rc)"; exit 1; }
  [ "$(grep -c '\[  PASSED  \]' "$out")" = 2 ] || { echo "run_dist: FAILED (not both ranks passed)"; exit 1; }
  ! grep -q '\[  SKIPPED \]' "$out" || { echo "run_dist: FAILED (tests skipped on 2 ranks)"; exit 1; }
  ;;
raises|dies)
  test=DistScenario.DISABLED_RankRaises
  [ "$mode" = dies ] && test=DistScenario.DISABLED_RankDies
  timeout 60 "$mpirun" "${args[@]}" "$bin" --gtest_color=no --gtest_also_run_disabled_tests \
    --gtest_filter="$test" > "$out" 2>&1
  rc=$?
  cat "$out"
  [ $rc != 124 ] || { echo "run_dist: FAILED (the job hung for 60 s)"; exit 1; }
  [ $rc != 0 ] || { echo "run_dist: FAILED (a failing job exited 0)"; exit 1; }
  if [ "$mode" = raises ]; then
    grep -q "rank 0 stopped: dist::all_reduce(array f32\[4\]).*no answer from the other 1 rank(s) after 3 s" "$out" \
      || { echo "run_dist: FAILED (rank 0 did not report the timeout)"; exit 1; }
    grep -q "rank 1 raises on purpose" "$out" || { echo "run_dist: FAILED (rank 1's error not shown)"; exit 1; }
  else
    grep -q "Exit code: *3" "$out" || { echo "run_dist: FAILED (mpirun did not report rank 1's death)"; exit 1; }
  fi
  ;;
*) echo "run_dist: unknown mode $mode"; exit 2 ;;
esac
echo "run_dist $mode: OK ($(( $(date +%s) - start )) s)"
