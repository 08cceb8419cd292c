#!/usr/bin/env bash
# Runs the GPU checks on a machine that has an NVIDIA GPU but not symjax's build dependencies
# (docs/gpu.md, "On a GPU"). tools/gpu_check.sh builds on the GPU machine; this script instead
# packs a build made here into one file that runs there, and runs it.
#
#   tools/gpu_bundle.sh pack BUILD FILE.tar.xz
#       BUILD: a build with SJ_WITH_CUDA=ON (targets symjax_tests sj-train symjax_bench
#       gpu_bandwidth). Packs those programs, the symjax libraries and every shared library they
#       load except the C/C++ runtime and NVIDIA's (the GPU machine brings those), libdevice, and
#       a slice of Fashion-MNIST for sj-train. The programs are stripped of debug info.
#   tools/gpu_bundle.sh check FILE.tar.xz [LOGDIR]
#       On the GPU machine, from a checkout of the same commit: unpacks, prints the device, and
#       runs, in parallel shards on GPU 0, what `ctest -L gpu` runs: the op harness with cuda
#       required, the CNN/MLP-optimizer/RNN parity tests and the fusion fuzzer on cuda, sj-train
#       (MLP and CNN) on cuda against the cpu; then the GPU benchmarks (with PyTorch's MLP step
#       on the same GPU, bench/peers/torch_gpu_mlp.py) unless QUICK=1. Logs go to
#       LOGDIR (default gpu-bundle-<utc>/); a summary line per part, exit status 0 when all passed.
#       TIMEOUT (seconds, default 300) bounds each part. SANITIZE=1 also runs the GPU layer tests
#       and the reduction ops under compute-sanitizer's memcheck.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

pack() {
  local build=$1 file=$2 stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/lib" "$stage/runtime" "$stage/fashion-mnist"
  local progs=("$build/tests/symjax_tests" "$build/sj-train" "$build/symjax_bench" "$build/gpu_bandwidth")
  for p in "${progs[@]}"; do
    [ -x "$p" ] || { echo "gpu_bundle: $p is not built" >&2; return 1; }
    objcopy --strip-debug "$p" "$stage/bin/$(basename "$p")"
  done
  for l in "$build"/libsymjax*.so*; do
    [ -L "$l" ] && { cp -P "$l" "$stage/lib/"; continue; }
    objcopy --strip-debug "$l" "$stage/lib/$(basename "$l")"
  done
  # the shared libraries they load, but the C/C++ runtime (the GPU machine's own, newer one is
  # kept; ours is packed in runtime/ for a machine whose is older) and NVIDIA's
  ldd "${progs[@]}" "$build"/libsymjax*.so* 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
    while read -r so; do
      case $(basename "$so") in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libcuda.so*|libcublas*|libcudnn*) ;;
        libstdc++.so*|libgcc_s.so*) cp -L "$so" "$stage/runtime/" ;;
        libsymjax*) ;;
        *) cp -L "$so" "$stage/lib/" ;;
      esac
    done
  local libdevice
  libdevice=$(grep -o 'SJ_LIBDEVICE="[^"]*"' "$build/build.ninja" | head -1 | sed 's/.*="\(.*\)"/\1/')
  [ -f "${libdevice:-}" ] || libdevice=/usr/local/cuda/nvvm/libdevice/libdevice.10.bc
  cp "$libdevice" "$stage/runtime/libdevice.10.bc"
  # sj-train's data: the first 2048 training and 500 test images of Fashion-MNIST as IDX files
  # with their counts rewritten (what sj_train_backend_test.sh reads: --limit 1024 --test-limit 500)
  local fm=/usr/share/datasets/fashion-mnist
  /usr/bin/python3 - "$fm" "$stage/fashion-mnist" <<'EOF' || return 1
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for name, n in [("train-images-idx3-ubyte", 2048), ("train-labels-idx1-ubyte", 2048),
                ("t10k-images-idx3-ubyte", 500), ("t10k-labels-idx1-ubyte", 500)]:
    data = gzip.open(f"{src}/{name}.gz").read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    per = 1
    for d in shape[1:]:
        per *= d
    head = data[:4] + struct.pack(">" + "I" * dims, n, *shape[1:])
    open(f"{dst}/{name}", "wb").write(head + data[4 + 4 * dims:4 + 4 * dims + n * per])
EOF
  git -C "$root" rev-parse HEAD >"$stage/COMMIT"
  tar -C "$stage" -cf - . | xz -T0 -9e >"$file" || return 1
  echo "gpu_bundle: $file ($(du -h "$file" | cut -f1)) from $build at $(cat "$stage/COMMIT")"
}

check() {
  local file=$1 logs=${2:-$root/gpu-bundle-$(date -u +%Y%m%dT%H%M%SZ)} b
  mkdir -p "$logs"
  b=${SJ_BUNDLE_DIR:-$(mktemp -d /tmp/sj-bundle.XXXX)}; mkdir -p "$b"
  xz -dc "$file" | tar -C "$b" -xf - || { echo "gpu_bundle: cannot unpack $file"; return 1; }
  [ "$(cat "$b/COMMIT")" = "$(git -C "$root" rev-parse HEAD 2>/dev/null || cat "$b/COMMIT")" ] ||
    echo "gpu_bundle: warning: the bundle is from $(cat "$b/COMMIT"), the checkout is not"
  # the tests read their data from the source tree they were built in (SJ_TEST_DATA_DIR)
  local src
  src=$(strings "$b/bin/symjax_tests" | grep -m1 -o '/[^ ]*/tests/parity/cnn/cnn_parity.json' | sed 's#/tests/parity/cnn/cnn_parity.json##')
  if [ -n "$src" ] && [ ! -e "$src/tests" ]; then mkdir -p "$(dirname "$src")" && ln -sfn "$root" "$src"; fi
  # NVIDIA's libraries: the driver's, then cuBLAS and cuDNN wherever this machine keeps them
  local nv=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(find /usr /opt \( -name 'libcudnn.so.9' -o -name 'libcublas.so.1[23]' \) -printf '%h\n' 2>/dev/null | sort -u); do
    [ -d "$d" ] && nv="$nv:$d"
  done
  export LD_LIBRARY_PATH="$b/lib$nv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ldd "$b/bin/symjax_tests" | grep -q "GLIBCXX.*not found\|libstdc++.*not found"; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$b/runtime"
  fi
  export SJ_LIBDEVICE="$b/runtime/libdevice.10.bc" SJ_CACHE_DIR="$b/cache" SJ_NUM_THREADS=2 OMP_NUM_THREADS=2
  {
    echo "== $(date -u +%H:%M:%S) device"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
    echo "bundle $(cat "$b/COMMIT"); LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ldd "$b/bin/symjax_tests" | grep "not found"
    ldd "$b/lib/libsymjax_cuda.so" | grep "not found"
    ls "$b/lib/libsymjax_cuda.so" >/dev/null
  } 2>&1 | tee "$logs/device.log"
  local t=${TIMEOUT:-300} status=0 shards=${SHARDS:-6} tests="$b/bin/symjax_tests"
  local -a names pids
  part() { # name, then the command (environment assignments first)
    local name=$1; shift
    names+=("$name")
    ( env "$@" >"$logs/$name.log" 2>&1; echo $? >"$logs/$name.rc" ) &
    pids+=($!)
  }
  echo "== $(date -u +%H:%M:%S) tests"
  # first a smoke test on its own: one op on GPU 0, so that a broken start is one clear error
  env SJ_TEST_REQUIRE_BACKENDS=cuda timeout 120 "$tests" --gtest_brief=1 \
    --gtest_filter='OpTable/OpForward.BackendsEvalAndDynamicShapesAgree/exp' 2>&1 | tail -20 | tee "$logs/smoke.log"
  for ((i = 0; i < shards; i++)); do
    part "ops$i" GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i SJ_TEST_REQUIRE_BACKENDS=cuda \
      timeout "$t" "$tests" --gtest_brief=1 --gtest_filter='OpTable/*'
  done
  part training SJ_BACKEND=cuda SJ_TEST_REQUIRE_BACKENDS=cuda timeout "$t" "$tests" --gtest_brief=1 \
    --gtest_filter='Backends/CnnParity.*/cuda:*NnOptimParity*:*RnnParity*:GpuLayers.*'
  for i in 0 1 2; do # 600 graphs, in three processes
    part "fuzz$i" SJ_FUZZ_BACKEND=cuda SJ_FUZZ_SEED=$((1 + 200 * i)) SJ_FUZZ_COUNT=200 timeout "$t" "$tests" \
      --gtest_brief=1 --gtest_filter=FuzzFusion.RandomGraphsMatchReference
  done
  part sj_train_mlp timeout "$t" bash "$root/tests/integration/sj_train_backend_test.sh" "$b/bin/sj-train" cuda \
    --data "$b/fashion-mnist"
  part sj_train_cnn timeout "$t" bash "$root/tests/integration/sj_train_backend_test.sh" "$b/bin/sj-train" cuda \
    --data "$b/fashion-mnist" --model cnn
  wait "${pids[@]}"
  local n rc
  for n in "${names[@]}"; do
    rc=$(cat "$logs/$n.rc" 2>/dev/null || echo "?")
    [ "$rc" = 0 ] || status=1
    printf '%-14s rc %-4s %s\n' "$n" "$rc" \
      "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests ran|sj-train on|^FAILED' "$logs/$n.log" | tr '\n' ' ' | cut -c1-160)"
  done >"$logs/summary.log"
  cat "$logs/summary.log"
  # SANITIZE=1: the GPU layer tests and a few ops again under NVIDIA's Compute Sanitizer
  # (memcheck: out-of-bounds and misaligned accesses by real GPU threads, which the emulator
  # can only partly see; docs/gpu.md, "The emulator")
  if [ "${SANITIZE:-0}" = 1 ]; then
    local cs
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    if [ -n "$cs" ]; then
      echo "== $(date -u +%H:%M:%S) compute-sanitizer memcheck" | tee -a "$logs/summary.log"
      SJ_TEST_REQUIRE_BACKENDS=cuda SJ_BACKEND=cuda timeout "$t" "$cs" --tool memcheck --error-exitcode 9 \
        "$tests" --gtest_brief=1 --gtest_filter='GpuLayers.*:-GpuLayers.SjTrainCnnTrainsAsOnTheCpu:OpTable/OpForward.*/reduce_*' \
        >"$logs/memcheck.log" 2>&1
      rc=$?
      [ "$rc" = 0 ] || status=1
      printf '%-14s rc %-4s %s\n' memcheck "$rc" "$(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$logs/memcheck.log" | tr '\n' ' ' | cut -c1-160)" |
        tee -a "$logs/summary.log"
    else
      echo "gpu_bundle: SANITIZE=1 but no compute-sanitizer here" | tee -a "$logs/summary.log"
    fi
  fi
  grep -h -A12 '^\[  FAILED  \]\|Failure$\|terminate called\|what()\|Invalid __global__' "$logs"/*.log 2>/dev/null | head -150 >"$logs/failures.log"
  if [ "${QUICK:-0}" != 1 ]; then
    echo "== $(date -u +%H:%M:%S) benchmarks" | tee -a "$logs/summary.log"
    timeout "${BENCH_TIMEOUT:-60}" "$b/bin/gpu_bandwidth" 2>&1 | tee -a "$logs/bench.jsonl"
    for n in $((1 << 20)) $((1 << 26)); do
      SJ_BACKEND=cuda timeout "${BENCH_TIMEOUT:-60}" "$b/bin/symjax_bench" elementwise_chain --n $n --profile 1 2>>"$logs/profile.log" |
        sed 's/"impl": "symjax"/"impl": "symjax-cuda"/' | tee -a "$logs/bench.jsonl"
      timeout "${BENCH_TIMEOUT:-60}" "$b/bin/symjax_bench" elementwise_chain --n $n 2>&1 | tee -a "$logs/bench.jsonl"
    done
    SJ_BACKEND=cuda timeout "${BENCH_TIMEOUT:-60}" "$b/bin/symjax_bench" mlp_train --batch 128 --profile 1 2>>"$logs/profile.log" |
      sed 's/"impl": "symjax"/"impl": "symjax-cuda"/' | tee -a "$logs/bench.jsonl"
    timeout "${BENCH_TIMEOUT:-60}" "$b/bin/symjax_bench" mlp_train --batch 128 2>&1 | tee -a "$logs/bench.jsonl"
    # the peer: PyTorch on the same GPU, when this machine's python has it
    timeout "${BENCH_TIMEOUT:-60}" python3 "$root/bench/peers/torch_gpu_mlp.py" --batch 128 2>&1 |
      tee -a "$logs/bench.jsonl"
  fi
  [ -s "$logs/profile.log" ] && { echo "== cuda step profiles"; cat "$logs/profile.log"; }
  echo "== $(date -u +%H:%M:%S) done: status $status, logs in $logs" | tee -a "$logs/summary.log"
  return $status
}

case ${1:-} in
  pack) [ $# = 3 ] || { echo "usage: $0 pack BUILD FILE.tar.xz" >&2; exit 2; }; pack "$2" "$3" ;;
  check) [ $# -ge 2 ] || { echo "usage: $0 check FILE.tar.xz [LOGDIR]" >&2; exit 2; }; check "$2" "${3:-}" ;;
  *) sed -n 2,18p "$0" >&2; exit 2 ;;
esac
