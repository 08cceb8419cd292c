#!/usr/bin/env bash
# The user-facing headers (include/symjax/*.h, include/symjax/nn/*.h) never include the IR
# headers (include/symjax/ir/): Node, Op, Ops.def, the attribute structs, VariableState and the
# layout ops are internals a user includes deliberately (docs/architecture.md, "Public API").
# Also checks that symjax.h and nn.h compile on their own without making sj::Node complete.
set -euo pipefail
root="$1"
cxx="${2:-c++}"
bad=$(grep -lE '#include <symjax/ir/' "$root"/include/symjax/*.h "$root"/include/symjax/nn/*.h || true)
if [ -n "$bad" ]; then
    echo "public_headers: these user-facing headers include IR internals:"
    echo "$bad"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.cpp" <<'CPP'
#include <symjax/symjax.h>
#include <symjax/nn.h>
// sj::Node must stay incomplete here: sizeof on an incomplete type does not compile, so the
// SFINAE probe below says whether a user sees the IR without asking for it.
template <class T, class = void> struct complete : std::false_type {};
template <class T> struct complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
static_assert(!complete<sj::Node>::value, "symjax.h/nn.h expose sj::Node");
int main() { return 0; }
CPP
"$cxx" -std=c++20 -fsyntax-only -I"$root/include" "$tmp/t.cpp"
echo "public_headers: OK"
