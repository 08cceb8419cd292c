#!/usr/bin/env python3
"""Issue 16's CPU targets, checked against the pair rows of one bench/run invocation.

    bench/targets.py RESULTS.jsonl [--strict]

Reads the lines bench/pairs.py wrote (cases train_pairs and infer_pairs) and prints one line per
target: the row's value (the median of its rounds' ratios), the rounds, the target and whether
it was met. Rows the file lacks are reported as missing. With --strict the exit status is 1
when a target present in the file was missed (default: 0, a report).

The MLP row compares two GEMM-bound steps, so no implementation can beat PyTorch by more than the
cores' FMA peak over the FLOP rate PyTorch reached. When the file holds bench/fma_peak.c's row
and the PyTorch peer's (bench/run mlp_train runs both in the same invocation), the MLP line is
followed by that ceiling for each round and the share of the peak our step ran at.
"""
import argparse
import json
import sys

# (what, case, impl, arch, batch, "<=" or ">=", bound)
TARGETS = [
    ("brief CNN, batch 32, train vs the oneDNN primitives' sum", "train_pairs", "symjax/bound", "brief", 32, "<=", 1.15),
    ("brief CNN, batch 128, train vs the primitives' sum", "train_pairs", "symjax/bound", "brief", 128, "<=", 1.15),
    ("SymJAX paper network, batch 32, train vs the primitives' sum", "train_pairs", "symjax/bound", "symjax", 32, "<=", 1.15),
    ("brief CNN, batch 32, inference vs the primitives' sum", "infer_pairs", "symjax/bound", "brief", 32, "<=", 1.0),
    ("brief CNN, batch 128, inference vs the primitives' sum", "infer_pairs", "symjax/bound", "brief", 128, "<=", 1.0),
    ("SymJAX paper network, batch 32, inference vs the primitives' sum", "infer_pairs", "symjax/bound", "symjax", 32, "<=", 1.0),
    ("brief CNN, batch 32, inference throughput vs PyTorch's best", "infer_pairs", "symjax/pytorch_best", "brief", 32, ">=", 1.3),
    ("brief CNN, batch 128, inference throughput vs PyTorch's best", "infer_pairs", "symjax/pytorch_best", "brief", 128, ">=", 1.3),
    ("SymJAX paper network, batch 32, inference throughput vs PyTorch's best", "infer_pairs", "symjax/pytorch_best", "symjax", 32, ">=", 1.3),
    ("MLP 784-512-512-10, batch 128, training throughput vs PyTorch's best", "train_pairs", "symjax/pytorch_best", None, 128, ">=", 1.5),
]

def step_gflop(layers, batch):
    """GFLOP of one training step of a dense network "784-512-512-10" at this batch: the forward
    product and the weight gradient of every layer, and the data gradient of every layer but
    the first (2 FLOP a multiply-add; the biases' adds and the optimizer are not counted)."""
    n = [int(v) for v in layers.split("-")]
    macs = [a * b for a, b in zip(n, n[1:])]
    return 2 * batch * (2 * sum(macs) + sum(macs[1:])) / 1e9


def mlp_ceiling(row, rows):
    """The line under the MLP target: the most any implementation could reach against the
    PyTorch of each round (the FMA peak over PyTorch's FLOP rate), and our share of the peak.
    The FLOPs are those of the matmuls a step must run (step_gflop), not the peer's
    gflop_per_step: that is 3x the forward, which counts the first layer's data gradient, a
    product neither PyTorch nor symjax computes (the input needs no gradient), and so overstated
    every rate by a quarter until 2026-12-08."""
    peaks = [r for r in rows if r.get("bench") == "fma_peak" and r.get("threads") == row.get("threads")]
    flops = [step_gflop(r["layers"], row["batch"]) for r in rows if r.get("bench") == "torch_mlp" and
             r.get("case") == "train" and r.get("batch") == row.get("batch") and "layers" in r]
    theirs, ours = row.get("pytorch_steps_per_s", []), row.get("ours_steps_per_s", [])
    if not peaks or not flops or not theirs or len(theirs) != len(ours):
        return None
    peak, gflop = peaks[-1]["value"], flops[-1]
    ceiling = " ".join(f"{peak / (t * gflop):.2f}" for t in theirs)
    share = " ".join(f"{o * gflop / peak:.0%}" for o in ours)
    return (f"           (the FMA peak, {peak:.0f} GFLOP/s on {row.get('threads')} threads, allows at most "
            f"{ceiling} against each round's PyTorch; ours ran at {share} of it)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    rows = []
    try:
        with open(a.results) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"targets.py: {a.results}:{n}: not a JSON line ({e.msg})")
    except OSError as e:
        sys.exit(f"targets.py: {a.results}: {e.strerror}")
    missed = 0
    for what, case, impl, arch, batch, op, bound in TARGETS:
        found = [r for r in rows if r.get("case") == case and r.get("impl") == impl and
                 r.get("batch") == batch and r.get("arch") == arch and
                 r.get("bench") == ("mlp_train" if arch is None else "cnn_train")]
        if not found:
            print(f"  missing  {what} (target {op} {bound})")
            continue
        r = found[-1]  # the last such row of the file
        v = r["value"]
        ok = v <= bound if op == "<=" else v >= bound
        missed += not ok
        rounds = " ".join(f"{x:.2f}" for x in r.get("ratios", []))
        print(f"  {'met   ' if ok else 'MISSED'}   {what}: {v:.3f} (rounds {rounds}; target {op} {bound})")
        if arch is None and (line := mlp_ceiling(r, rows)):
            print(line)
    sys.exit(1 if a.strict and missed else 0)


if __name__ == "__main__":
    main()
