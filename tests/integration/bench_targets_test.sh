#!/bin/bash
# bench/targets.py reads issue 16's pair rows: a met row, a missed row, a missing row, a row the
# first run overrode (the last one counts), --strict's exit status, a broken line rejected
# with its file and line, and the MLP's ceiling from the FMA peak's row and the step's own FLOPs
# (none without those rows).
set -u
py=${1:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
t="$here/../../bench/targets.py"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "bench_targets_test: FAILED: $*"; exit 1; }
cat >"$d/r.jsonl" <<'ROWS'
# a comment line
{"bench": "cnn_train", "case": "train_pairs", "impl": "symjax/bound", "arch": "brief", "batch": 32, "value": 1.30, "ratios": [1.3, 1.2, 1.4]}
{"bench": "cnn_train", "case": "train_pairs", "impl": "symjax/bound", "arch": "brief", "batch": 32, "value": 0.95, "ratios": [0.9, 0.95, 1.0]}
{"bench": "cnn_train", "case": "train_pairs", "impl": "symjax/bound", "arch": "symjax", "batch": 32, "value": 1.151, "ratios": [1.2, 1.151, 1.1]}
{"bench": "mlp_train", "case": "train_pairs", "impl": "symjax/pytorch_best", "batch": 128, "value": 1.5, "ratios": [1.5, 1.4, 1.6]}
ROWS
out=$("$py" "$t" "$d/r.jsonl") || fail "exit status $? without --strict"
grep -q "^  met .*brief CNN, batch 32, train.*0.950" <<<"$out" || fail "the last brief/32 row, met: $out"
grep -q "^  MISSED .*paper network, batch 32, train.*1.151" <<<"$out" || fail "1.151 > 1.15 missed: $out"
grep -q "^  met .*MLP.*1.500" <<<"$out" || fail "1.5 >= 1.5 met: $out"
grep -q "^  missing .*brief CNN, batch 128, train" <<<"$out" || fail "brief/128 missing: $out"
"$py" "$t" "$d/r.jsonl" --strict >/dev/null && fail "--strict exits 0 with a missed target"
sed -n 3p "$d/r.jsonl" >"$d/ok.jsonl"
"$py" "$t" "$d/ok.jsonl" --strict >/dev/null || fail "--strict exits nonzero with every present target met"
grep -q "FMA peak" <<<"$out" && fail "a ceiling line without an fma_peak row: $out"
# peak 200 GFLOP/s; a 625-625-625 step at batch 128 is 0.5 GFLOP: 2 * 128 * (2 * 2 * 625^2 +
# 625^2), the first layer's data gradient not counted (the peer's own gflop_per_step, three
# forwards, is 0.6 and must not be used): PyTorch at 200 and 100 steps/s leaves 2.00x and 4.00x;
# ours at 300 and 400 steps/s is 75% and 100% of the peak
cat >"$d/peak.jsonl" <<'ROWS'
{"bench": "fma_peak", "threads": 2, "value": 200.0, "unit": "GFLOP/s"}
{"bench": "torch_mlp", "case": "train", "impl": "eager", "batch": 128, "layers": "625-625-625", "gflop_per_step": 0.6, "value": 150.0}
{"bench": "mlp_train", "case": "train_pairs", "impl": "symjax/pytorch_best", "threads": 2, "batch": 128, "value": 3.0, "ratios": [1.5, 4.0], "ours_steps_per_s": [300.0, 400.0], "pytorch_steps_per_s": [200.0, 100.0]}
ROWS
out=$("$py" "$t" "$d/peak.jsonl") || fail "exit status $? with the peak's rows"
grep -q "FMA peak, 200 GFLOP/s on 2 threads, allows at most 2.00 4.00 .* ours ran at 75% 100% of it" <<<"$out" ||
  fail "the MLP's ceiling: $out"
printf '{"bench": "cnn_train",\n' >"$d/bad.jsonl"
err=$("$py" "$t" "$d/bad.jsonl" 2>&1) && fail "a broken line accepted"
grep -q "bad.jsonl:1: not a JSON line" <<<"$err" || fail "the broken line's file and line: $err"
echo "bench_targets_test: OK"
