#!/usr/bin/env bash
# `mpirun -np 2 sj-train --distributed` against one process with the same global batch, on a
# slice of Fashion-MNIST: an MLP without dropout (no batch norm, no random masks), and the CNN
# without dropout and with --sync-bn, follow the one-process run up to rounding, so the
# per-epoch metrics agree; only rank 0 writes; a stopped
# and resumed distributed run restores every rank and ends with the uninterrupted run's
# checkpoint, byte for byte. Usage: sj_train_dist.sh <mpirun or ""> <sj-train>
set -u
mpirun=$1 BIN=$2
[ -n "$mpirun" ] && [ -x "$(command -v "$mpirun")" ] || { echo "sj_train_dist: no mpirun: skipped"; exit 77; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "sj_train_dist: no Fashion-MNIST: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
MPI=("$mpirun" --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && MPI=("$mpirun" --allow-run-as-root --oversubscribe -np 2)
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
ARGS=(--model mlp --dropout 0 --limit 1024 --test-limit 500 --batch 64 --epochs 2 --no-plot
      --progress lines --threads 1)

"$BIN" "${ARGS[@]}" --out "$T/one" >"$T/one.log" 2>&1 || { cat "$T/one.log"; fail "one process"; }
timeout 120 "${MPI[@]}" "$BIN" "${ARGS[@]}" --distributed --out "$T/two" >"$T/two.log" 2>&1 ||
  { cat "$T/two.log"; fail "mpirun -np 2 exited $?"; }
cat "$T/two.log"
grep -q "data-parallel over 2 processes (MPI: yes), 32 images per process" "$T/two.log" || fail "not 2 processes"
[ "$(grep -c '^epoch  2/2' "$T/two.log")" = 1 ] || fail "rank 1 printed epoch lines too"
# the metrics of every epoch agree: losses to 1e-3, accuracies to about one image in 500
same_metrics() {
  paste -d, <(tail -n +2 "$1") <(tail -n +2 "$2") | awk -F, '
    { for (k = 2; k <= 5; ++k) { d = $k - $(k + 8); if (d < 0) d = -d;
        if (d > (k % 2 ? 0.0021 : 1e-3)) { print "epoch " $1 " column " k ": " $k " vs " $(k + 8); bad = 1 } } }
    END { exit bad }' || { cat "$1" "$2"; return 1; }
}
same_metrics "$T/one/metrics.csv" "$T/two/metrics.csv" || fail "metrics differ"

# the CNN with batch-norm statistics over the global batch (--sync-bn) and no dropout follows
# one process too
CNN=(--model cnn --dropout 0 --limit 512 --test-limit 500 --batch 64 --epochs 1 --no-plot
     --progress lines --threads 1)
"$BIN" "${CNN[@]}" --out "$T/cnn1" >"$T/cnn1.log" 2>&1 || { cat "$T/cnn1.log"; fail "cnn one process"; }
timeout 120 "${MPI[@]}" "$BIN" "${CNN[@]}" --distributed --sync-bn --out "$T/cnn2" >"$T/cnn2.log" 2>&1 ||
  { cat "$T/cnn2.log"; fail "cnn --sync-bn on 2 processes"; }
same_metrics "$T/cnn1/metrics.csv" "$T/cnn2/metrics.csv" || fail "cnn --sync-bn metrics differ"

# stop after epoch 1 and resume: every rank restores, and the end is the uninterrupted run's
timeout 120 "${MPI[@]}" "$BIN" "${ARGS[@]}" --distributed --out "$T/res" --stop-after 1 >"$T/r1.log" 2>&1 ||
  { cat "$T/r1.log"; fail "stop-after"; }
timeout 120 "${MPI[@]}" "$BIN" "${ARGS[@]}" --distributed --out "$T/res" --resume >"$T/r2.log" 2>&1 ||
  { cat "$T/r2.log"; fail "resume"; }
grep -q "resumed from .* after epoch 1" "$T/r2.log" || fail "no resume message"
cmp "$T/res/checkpoint.safetensors" "$T/two/checkpoint.safetensors" || fail "resumed checkpoint differs"
echo "sj_train_dist: OK"
