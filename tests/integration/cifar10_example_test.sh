#!/usr/bin/env bash
# Smoke test of examples/cifar10.cpp on synthetic CIFAR-10 binary batches (random pixels, labels
# 0-9): the example must read the binary layout, train one epoch and evaluate. Accuracy is not
# checked here (random data); docs/cifar10.md records the real run.
set -u
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
make_batch() { # file records
  for ((i = 0; i < $2; i++)); do
    printf "\\$(printf '%03o' $((i % 10)))"
    head -c 3072 /dev/urandom
  done >"$1"
}
for k in 1 2 3 4 5; do make_batch "$T/data_batch_$k.bin" 40; done
make_batch "$T/test_batch.bin" 30
"$BIN" --data "$T" --epochs 1 --batch 16 --csv "$T/curve.csv" >"$T/log" 2>&1 || { cat "$T/log"; fail "exit $?"; }
cat "$T/log"
grep -q "200 train / 30 test images" "$T/log" || fail "did not read 5 x 40 + 30 records"
grep -q "^epoch  1 .*test loss .*img/s" "$T/log" || fail "no epoch line"
[ "$(wc -l <"$T/curve.csv")" = 2 ] || fail "curve.csv should have a header and one row"
"$BIN" --data "$T/nowhere" >"$T/err" 2>&1 && fail "missing data accepted"
grep -q "neither the CIFAR-10 binary batches" "$T/err" || fail "unclear error for missing data"
truncate -s 1000 "$T/test_batch.bin"
"$BIN" --data "$T" --epochs 1 >"$T/err2" 2>&1 && fail "truncated batch accepted"
grep -q "test_batch.bin" "$T/err2" || fail "the error should name the truncated file"
echo "cifar10_example_test: OK"
