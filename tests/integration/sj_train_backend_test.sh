#!/usr/bin/env bash
# sj-train on another backend reaches the accuracy it reaches on cpu: the same seed, data and
# schedule, on a slice of Fashion-MNIST; the per-epoch losses agree to 1e-3 relative and the
# test accuracies to half a point (float sums in another order may flip a borderline image).
# Usage: sj_train_backend_test.sh path/to/sj-train BACKEND [sj-train options...]
set -u
BIN=$1
BACKEND=$2
shift 2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
RUN=(--limit 1024 --test-limit 500 --batch 64 --epochs 2 --no-plot --progress lines "$@")
"$BIN" "${RUN[@]}" --out "$T/cpu" >"$T/cpu.log" 2>&1 || { cat "$T/cpu.log"; fail "cpu run"; }
"$BIN" "${RUN[@]}" --backend "$BACKEND" --out "$T/other" >"$T/other.log" 2>&1 ||
  { cat "$T/other.log"; fail "$BACKEND run"; }
cat "$T/cpu/metrics.csv" "$T/other/metrics.csv"
paste -d, "$T/cpu/metrics.csv" "$T/other/metrics.csv" | tail -n +2 | awk -F, '
  function rel(a, b) { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; return d / (m > 1e-12 ? m : 1e-12) }
  { n = NF / 2
    if (rel($2, $(n + 2)) > 1e-3) { print "epoch " $1 ": train loss " $2 " vs " $(n + 2); bad = 1 }
    if (rel($4, $(n + 4)) > 1e-3) { print "epoch " $1 ": test loss " $4 " vs " $(n + 4); bad = 1 }
    d = $5 - $(n + 5); if (d < 0) d = -d
    if (d > 0.005) { print "epoch " $1 ": test accuracy " $5 " vs " $(n + 5); bad = 1 } }
  END { exit bad }' || fail "$BACKEND does not train as cpu does"
echo "sj-train on $BACKEND: ok"
