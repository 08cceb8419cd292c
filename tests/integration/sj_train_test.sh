#!/usr/bin/env bash
# End-to-end checks of the sj-train demo on a slice of Fashion-MNIST (Debian's
# dataset-fashion-mnist): outputs on disk, resume reproducing the uninterrupted run byte for byte,
# and clear errors for bad usage. Usage: sj_train_test.sh path/to/sj-train
set -u
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
SMALL=(--limit 1024 --test-limit 500 --batch 64 --epochs 2 --no-plot --progress lines)

# 1. A short run writes per-epoch metrics and a checkpoint, and learns something.
"$BIN" "${SMALL[@]}" --out "$T/a" >"$T/a.log" 2>&1 || { cat "$T/a.log"; fail "plain run exited $?"; }
cat "$T/a.log"
[ -s "$T/a/checkpoint.safetensors" ] || fail "no checkpoint"
[ "$(wc -l <"$T/a/metrics.csv")" = 3 ] || fail "metrics.csv should have a header and 2 rows"
head -1 "$T/a/metrics.csv" | grep -q '^epoch,train_loss,train_acc,test_loss,test_acc' || fail "csv header"
grep -q 'batch .*/16 .*loss .*img/s .*ETA' "$T/a.log" || fail "no progress lines"
# 1024 images x 2 epochs is enough to beat chance (10%) by far: Fashion-MNIST MLPs reach ~75%.
acc=$(tail -1 "$T/a/metrics.csv" | cut -d, -f5)
awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || fail "test accuracy $acc after 2 small epochs"

# 1b. --flush-denormals (FunctionOptions::flush_denormals) trains as well.
"$BIN" "${SMALL[@]}" --flush-denormals --out "$T/f" >"$T/f.log" 2>&1 || { cat "$T/f.log"; fail "--flush-denormals run exited $?"; }
acc=$(tail -1 "$T/f/metrics.csv" | cut -d, -f5)
awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || fail "--flush-denormals: test accuracy $acc after 2 small epochs"

# 2. Stop after epoch 1, resume: the final checkpoint equals the uninterrupted run's, byte for
#    byte (same data order, same dropout masks, same optimizer state).
"$BIN" "${SMALL[@]}" --out "$T/b" --stop-after 1 >"$T/b1.log" 2>&1 || { cat "$T/b1.log"; fail "stop-after run"; }
grep -q 'stopped after epoch 1' "$T/b1.log" || fail "stop-after message"
[ "$(wc -l <"$T/b/metrics.csv")" = 2 ] || fail "after epoch 1, metrics.csv should have 1 row"
cp "$T/b/checkpoint.safetensors" "$T/ckpt1" && cp "$T/b/metrics.csv" "$T/csv1"
"$BIN" "${SMALL[@]}" --out "$T/b" --resume >"$T/b2.log" 2>&1 || { cat "$T/b2.log"; fail "resume run"; }
grep -q 'resumed from .* after epoch 1' "$T/b2.log" || fail "resume message"
grep -q 'epoch  1/2' "$T/b2.log" && fail "resume re-ran epoch 1"
cmp "$T/a/checkpoint.safetensors" "$T/b/checkpoint.safetensors" || fail "resumed run differs from the uninterrupted one"
[ "$(cut -d, -f1-5 "$T/a/metrics.csv")" = "$(cut -d, -f1-5 "$T/b/metrics.csv")" ] || fail "metrics differ after resume"

# 2b. metrics.csv and the checkpoint agree after an interruption (Note [Metrics and checkpoint
#     agree] in sj-train.cpp). An epoch writes its row, then its checkpoint:
#     - when the row cannot be written (its temporary is made a folder), no checkpoint is saved;
mkdir -p "$T/k/metrics.csv.tmp"
"$BIN" "${SMALL[@]}" --out "$T/k" >"$T/k.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "metrics" "$T/k.log" || { cat "$T/k.log"; fail "failed metrics write: rc $rc"; }
[ -e "$T/k/checkpoint.safetensors" ] && fail "a checkpoint was saved without its metrics row"
#     - killed between the two (epoch 2's row written, its checkpoint not): --resume trains
#       epoch 2 again and ends with one row per epoch, equal to the uninterrupted run's;
cp "$T/ckpt1" "$T/b/checkpoint.safetensors"
"$BIN" "${SMALL[@]}" --out "$T/b" --resume >"$T/b3.log" 2>&1 || { cat "$T/b3.log"; fail "resume after a kill"; }
grep -q 'resumed from .* after epoch 1' "$T/b3.log" || fail "resume after a kill: message"
[ "$(cut -d, -f1-5 "$T/a/metrics.csv")" = "$(cut -d, -f1-5 "$T/b/metrics.csv")" ] || { cat "$T/b/metrics.csv"; fail "rows differ after a resume that redid an epoch"; }
cmp "$T/a/checkpoint.safetensors" "$T/b/checkpoint.safetensors" || fail "checkpoint differs after a resume that redid an epoch"
#     - rows lost some other way (a checkpoint ahead of metrics.csv) are named in a warning.
cp "$T/csv1" "$T/b/metrics.csv"
"$BIN" "${SMALL[@]}" --out "$T/b" --resume >"$T/b4.log" 2>&1 || { cat "$T/b4.log"; fail "resume of a finished run"; }
grep -q "warning: .*metrics.csv has no rows for epochs 2..2" "$T/b4.log" || { cat "$T/b4.log"; fail "no warning about the missing row"; }

# 3. Bad usage: clear messages, no crash, distinct exit codes.
"$BIN" --model nope >"$T/e1.log" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "model must be mlp, cnn or lstm" "$T/e1.log" || fail "bad --model: rc $rc"
"$BIN" --epochs x >"$T/e2.log" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "epochs expects a number" "$T/e2.log" || fail "bad --epochs: rc $rc"
"$BIN" --resume --out "$T/none" --limit 64 >"$T/e3.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "no checkpoint to resume from" "$T/e3.log" || fail "resume without checkpoint: rc $rc"
"$BIN" --data "$T/missing" --out "$T/c" >"$T/e4.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "dataset-fashion-mnist" "$T/e4.log" || fail "missing data: rc $rc"
"$BIN" "${SMALL[@]}" --out "$T/b" --resume --batch 32 >"$T/e5.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "trained with batch 64" "$T/e5.log" || fail "resume with other settings: rc $rc"
for bad in 0 -2 abc 1.5; do
  "$BIN" --threads "$bad" >"$T/e6.log" 2>&1; rc=$?
  [ $rc = 2 ] && grep -q -- "--threads: expected a whole number of threads >= 1, got '$bad'" "$T/e6.log" || { cat "$T/e6.log"; fail "--threads $bad: rc $rc"; }
done
# Thread counts far beyond the machine are lowered (with a warning), not a crash in OpenMP.
TINY=(--limit 128 --test-limit 100 --batch 64 --epochs 1 --no-plot --progress lines)
"$BIN" "${TINY[@]}" --threads 100000 --out "$T/t1" >"$T/t1.log" 2>&1 || { cat "$T/t1.log"; fail "--threads 100000"; }
grep -q "warning: sj-train: --threads: 100000 threads is more than" "$T/t1.log" || { cat "$T/t1.log"; fail "--threads 100000: no warning"; }
SJ_NUM_THREADS=100000 "$BIN" "${TINY[@]}" --out "$T/t2" >"$T/t2.log" 2>&1 || { cat "$T/t2.log"; fail "SJ_NUM_THREADS=100000"; }
grep -q "warning: SJ_NUM_THREADS: 100000 threads is more than" "$T/t2.log" || { cat "$T/t2.log"; fail "SJ_NUM_THREADS=100000: no warning"; }
SJ_NUM_THREADS=lots "$BIN" "${TINY[@]}" --out "$T/t3" >"$T/t3.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "SJ_NUM_THREADS: expected a whole number of threads >= 1, got 'lots'" "$T/t3.log" || { cat "$T/t3.log"; fail "SJ_NUM_THREADS=lots: rc $rc"; }

# 4. The CNN model trains too (a smoke run: 512 images, one epoch), and ends with the same bits
#    with 1 and 2 threads (docs/reliability.md, section 3: conv weight gradients included).
CNN=(--model cnn --limit 512 --test-limit 200 --epochs 1 --no-plot --progress lines)
"$BIN" "${CNN[@]}" --threads 2 --out "$T/cnn" >"$T/cnn.log" 2>&1 || { cat "$T/cnn.log"; fail "cnn run"; }
grep -q "model cnn" "$T/cnn.log" && [ -s "$T/cnn/checkpoint.safetensors" ] || fail "cnn run outputs"
"$BIN" "${CNN[@]}" --threads 1 --out "$T/cnn1" >"$T/cnn1.log" 2>&1 || { cat "$T/cnn1.log"; fail "cnn run, 1 thread"; }
cmp "$T/cnn/checkpoint.safetensors" "$T/cnn1/checkpoint.safetensors" || fail "cnn: 1 and 2 threads end with different checkpoints"

# 5. The LSTM model (each image read as 28 rows of 28 pixels) learns, and resumes bit for bit
#    like the MLP (its checkpoint holds the LSTM's and Adam's variables). 256 images, batch 64.
LSTM=(--model lstm --limit 256 --test-limit 200 --batch 64 --epochs 2 --no-plot --progress lines)
"$BIN" "${LSTM[@]}" --out "$T/l" >"$T/l.log" 2>&1 || { cat "$T/l.log"; fail "lstm run"; }
grep -q "model lstm" "$T/l.log" && [ -s "$T/l/checkpoint.safetensors" ] || fail "lstm run outputs"
[ "$(wc -l <"$T/l/metrics.csv")" = 3 ] || fail "lstm: metrics.csv should have a header and 2 rows"
# Eight steps of Adam move it well past chance (10%); seen: ~40% on the 200 test images.
acc=$(tail -1 "$T/l/metrics.csv" | cut -d, -f5)
awk -v a="$acc" 'BEGIN { exit !(a > 0.2) }' || { cat "$T/l.log"; fail "lstm: test accuracy $acc after 8 steps"; }
"$BIN" "${LSTM[@]}" --out "$T/m" --stop-after 1 >"$T/m1.log" 2>&1 || { cat "$T/m1.log"; fail "lstm stop-after"; }
"$BIN" "${LSTM[@]}" --out "$T/m" --resume >"$T/m2.log" 2>&1 || { cat "$T/m2.log"; fail "lstm resume"; }
cmp "$T/l/checkpoint.safetensors" "$T/m/checkpoint.safetensors" || fail "lstm: resumed run differs from the uninterrupted one"
# A checkpoint of another model is refused by name.
"$BIN" "${SMALL[@]}" --model lstm --out "$T/b" --resume >"$T/e7.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "trained with model mlp, this run asks for lstm" "$T/e7.log" || { cat "$T/e7.log"; fail "resume of an mlp checkpoint as lstm: rc $rc"; }

# 6. The plot, when gnuplot is there (installed by tools/install-deps.sh).
if command -v gnuplot >/dev/null; then
  "$BIN" --limit 256 --test-limit 100 --epochs 1 --progress lines --out "$T/p" >"$T/p.log" 2>&1 || fail "plot run"
  [ "$(head -c 4 "$T/p/metrics.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "metrics.png is not a PNG"
fi
echo "sj_train_test: OK"
