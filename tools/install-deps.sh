#!/usr/bin/env bash
# Installs the Debian 12 packages symjax needs to build, test and run its demos.
# Usage: bash tools/install-deps.sh           (as root, or with sudo available)
#        SJ_BENCH_DEPS=1 bash tools/install-deps.sh   also installs the PyTorch peer for bench/
set -euo pipefail
pkgs=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev nlohmann-json3-dev
  llvm-19-dev llvm-19-tools libopenblas-dev libopenblas0-openmp liblapacke-dev libdnnl-dev
  zlib1g-dev libpng-dev libjpeg-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist gnuplot-nox graphviz
  pybind11-dev python3-dev python3-numpy python3-pytest
  clang-14 libclang-rt-14-dev valgrind
)
if [ "${SJ_BENCH_DEPS:-0}" = 1 ]; then pkgs+=(python3-torch python3-numpy libtorch-dev); fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#pkgs[@]} packages present" >&2
fi
