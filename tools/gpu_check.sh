#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU (docs/gpu.md, "On a GPU"): installs what the
# build needs, builds with the GPU tests (-DSJ_GPU_TESTS=ON), prints the device, runs the kernel
# unit tests, `ctest -L gpu` (the op harness, CNN/MLP/RNN parity, the fusion fuzzer and sj-train
# on GPU 0 against the reference or the cpu) and the GPU benchmarks (bench/run gpu). Everything
# it prints is also written under $OUT (default gpu-check-<utc>/). Exit status: 0 when every
# test passed.
# Usage: tools/gpu_check.sh            (JOBS: build parallelism, default: every core)
#        QUICK=1 tools/gpu_check.sh    (tests only, no benchmarks)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
exec > >(tee -a "$out/gpu_check.log") 2>&1
jobs=${JOBS:-$(nproc)}
build=${SJ_GPU_BUILD:-$root/build-gpu}
step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }

step "device"
nvidia-smi || echo "gpu_check: nvidia-smi failed (is there a driver?)"
ls -l /usr/lib/x86_64-linux-gnu/libcuda.so.1 2>/dev/null || true

step "dependencies"
if ! command -v llvm-config-19 >/dev/null || ! [ -e /usr/include/dnnl.h ]; then
  bash "$root/tools/install-deps.sh"
fi

step "build ($jobs jobs)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSJ_GPU_TESTS=ON \
  -DSJ_BUILD_PYTHON=OFF -DSJ_BUILD_EXAMPLES=OFF || exit 1
grep -q "^SJ_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" || { echo "gpu_check: the cuda plugin is not built (no toolkit?)"; exit 1; }
cmake --build "$build" -j "$jobs" --target symjax_cuda symjax_tests sj-train gpu_bandwidth || exit 1

status=0
step "kernel and runtime unit tests (emulator and ptxas; no GPU needed)"
"$build/tests/symjax_tests" --gtest_filter='Gpu*:CudaRuntime*' --gtest_brief=1 || status=1

step "ctest -L gpu"
ctest --test-dir "$build" -L gpu --output-on-failure -j1 --timeout 1200 | tee "$out/ctest-gpu.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

if [ "${QUICK:-0}" != 1 ]; then
  step "benchmarks (bench/run gpu)"
  OUT="$out/bench.jsonl" SJ_BENCH_BUILD="$root/build-gpu-bench" JOBS="$jobs" PEERS=0 \
    bash "$root/bench/run" gpu || status=1
fi
step "done: status $status, logs in $out"
exit $status
