#!/usr/bin/env bash
# The layer rules (cmake/Layers.cmake): the tree passes the check, and a copy with an include
# across the rules, a third-party header outside its layer, or a file in no layer fails it,
# naming each violation. Usage: layer_check_test.sh <repo root>
set -euo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake -DSRC="$root/src" -DSTAMP="$tmp/stamp" -P "$root/cmake/CheckLayers.cmake" || fail "the tree breaks its own rules"
mkdir -p "$tmp/repo"
cp -r "$root/src" "$root/cmake" "$tmp/repo/"
printf '#include "../compiler/Fusion.h"\n#include <dnnl.hpp>\n' > "$tmp/repo/src/runtime/Bad.cpp"
printf '#include <symjax/Tensor.h>\n' > "$tmp/repo/src/Stray.cpp"
if cmake -DSRC="$tmp/repo/src" -DSTAMP="$tmp/stamp2" -P "$tmp/repo/cmake/CheckLayers.cmake" > "$tmp/out" 2>&1; then
  fail "violations were accepted"
fi
grep -q "src/runtime/Bad.cpp (layer runtime) includes src/compiler/Fusion.h (layer compiler)" "$tmp/out" || { cat "$tmp/out"; fail "cross-layer include not named"; }
grep -q "includes <dnnl.hpp>, which only layer cpu may use" "$tmp/out" || { cat "$tmp/out"; fail "third-party header not named"; }
grep -q "src/Stray.cpp: in no layer" "$tmp/out" || { cat "$tmp/out"; fail "file outside the layers not named"; }
echo "layer rules: ok"
