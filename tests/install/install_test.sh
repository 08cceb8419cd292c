#!/usr/bin/env bash
# Installs the build to a temporary prefix, builds tests/install/consumer against it with
# find_package(symjax) and with pkg-config, and checks what the two programs print and that they
# start OpenMP with a short spin (Note [OpenMP wait policy]).
# Usage: install_test.sh <build dir> <consumer source dir> <shared: ON|OFF> <c++ compiler>
set -uo pipefail
build=$1 consumer=$2 shared=$3 cxx=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_test: FAILED: $*"; exit 1; }
want="14 [2, 4, 6] [[14]]"

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
targets=$(ls "$tmp"/prefix/lib*/cmake/symjax/symjaxTargets*.cmake 2>/dev/null)
[ -n "$targets" ] || fail "no symjaxTargets.cmake installed"
if [ "$shared" = ON ] && grep -lE 'LLVM|dnnl|openblas|OpenMP|gomp|PNG|JPEG|ZLIB' $targets; then
    fail "the installed package exports private dependencies of libsymjax.so"
fi

# run <program>: checks its output, that libgomp starts with a short spin (spin count 10000), and
# that the environment's choice still wins
run() {
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose SJ_CACHE_DIR="$tmp/cache" \
        "$1" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "$1 exited with $?"; }
    [ "$(cat "$tmp/out")" = "$want" ] || fail "$1 printed '$(cat "$tmp/out")', expected '$want'"
    grep -q "GOMP_SPINCOUNT = '10000'" "$tmp/err" || { grep -i spin "$tmp/err"; fail "$1 does not start OpenMP with a short spin"; }
    env OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose SJ_CACHE_DIR="$tmp/cache" "$1" > /dev/null 2> "$tmp/err"
    grep -q "GOMP_SPINCOUNT = '10000'" "$tmp/err" && fail "$1 spins briefly under OMP_WAIT_POLICY=active"
    true
}

# find_package(symjax)
cmake -S "$consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_CXX_COMPILER="$cxx" \
    > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configuring the consumer"; }
if [ "$shared" = ON ] && grep -E "Could NOT find|LLVM|CMake Warning" "$tmp/configure.log"; then
    fail "find_package(symjax) printed the lines above"
fi
cmake --build "$tmp/cmake" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building the consumer"; }
run "$tmp/cmake/consumer"
echo "install_test: find_package(symjax) OK"

# pkg-config
pc=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs symjax) || fail "pkg-config --cflags --libs symjax"
libdir=$(PKG_CONFIG_PATH="$pc" pkg-config --variable=libdir symjax)
if [ "$shared" = OFF ]; then flags="$flags $(PKG_CONFIG_PATH="$pc" pkg-config --libs --static symjax)"; fi
"$cxx" "$consumer/main.cpp" $flags -Wl,-rpath,"$libdir" -o "$tmp/pc-consumer" \
    > "$tmp/pc.log" 2>&1 || { cat "$tmp/pc.log"; fail "building with pkg-config ($flags)"; }
run "$tmp/pc-consumer"
echo "install_test: pkg-config OK"
echo "install_test: OK"
