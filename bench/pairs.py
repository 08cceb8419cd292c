#!/usr/bin/env python3
"""Ours and a reference, alternately, for a few rounds: the ratio of each round's neighbours.

Issue 16's targets are ratios (a CNN training step's or inference call's time over the summed
times of the same layers' oneDNN primitives, its inference throughput over PyTorch's best; the
MLP step's throughput over PyTorch's best), and this VM's speed
drifts by +-15% between minutes, so one run of each, minutes apart, carries that drift into the
ratio. Here each round runs both back to back (the order alternating between rounds) and the
ratio is taken within the round; the median over the rounds is the row's value.

    pairs.py cnn --arch brief --batch 32 --bench build/symjax_bench --bound build/cnn_bound
    pairs.py cnn-infer --arch brief --batch 32 --bench build/symjax_bench --bound build/cnn_bound
             --peer ../shared/bench/torch_cnn.py --python PY [--peer-env K=V ...] [--blas-core C]
    pairs.py mlp --bench build/symjax_bench --peer ../shared/bench/torch_mlp.py --python PY
             [--peer-env K=V ...] [--blas-core C]

Common options: --rounds N (default 3), --threads T (default 2). Prints one JSON line
(cnn-infer: two):
  cnn: value = median of ours' ms per step / the bound's summed direct primitives (lower is
       better; issue 16 asks <= 1.15), with each round's ratio, the same against the bound's
       back-to-back sequence, and winograd_value against the primitives with Winograd where
       symjax runs it (the bound of symjax's own algorithm choice);
  mlp: value = median of ours' steps/s / PyTorch's best steps/s of the round (issue 16 asks
       >= 1.5), with each round's figures.
  cnn-infer: two lines, each round running ours, the bound and PyTorch (every implementation,
       plain and channels-last layouts): value = median of ours' ms per batch / the bound's
       summed direct primitives (issue 16 asks <= 1.0; the Winograd bound's ratios beside it),
       and median of ours' images/s / PyTorch's best of the round (issue 16 asks >= 1.3).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def lines(cmd, env):
    """The JSON lines a command prints."""
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if p.returncode != 0:
        sys.exit(f"pairs.py: {' '.join(cmd)} exited with {p.returncode}")
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip().startswith("{")]


def one(rows, **want):
    for d in rows:
        if all(d.get(k) == v for k, v in want.items()):
            return d
    sys.exit(f"pairs.py: no result with {want} in {rows}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["cnn", "mlp", "cnn-infer"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arch", default="brief")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--bound")
    ap.add_argument("--peer")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--blas-core", default="")
    ap.add_argument("--peer-env", action="append", default=[])
    a = ap.parse_args()
    env = dict(os.environ, SJ_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    peer_env = dict(env)
    for kv in a.peer_env:
        k, _, v = kv.partition("=")
        peer_env[k] = v
    def peer(*args):
        """The PyTorch peer's rows, every implementation, short samples."""
        return lines([a.python, a.peer, "--threads", str(a.threads), "--blas-core", a.blas_core,
                      "--impl", "all", "--repeats", "3", "--min-sample-s", "0.1", "--warmup", "1",
                      *args], peer_env)

    def best_peer(rows, case):
        return max((d for d in rows if d.get("case") == case), key=lambda d: d["value"])

    def cnn_ours(case):
        return one(lines([a.bench, "cnn_train", "--arch", a.arch, "--batch", str(a.batch), "--case",
                          case, "--repeats", "3", "--min-sample-s", "0.2"], env),
                   case=case, impl="symjax")

    def cnn_bound(case):
        return lines([a.bound, "--arch", a.arch, "--batch", str(a.batch), "--case", case,
                      "--repeats", "3", "--min-s", "0.05"], env)

    if a.what == "cnn-infer":
        def ours():
            return cnn_ours("infer")

        def ref():
            rows = cnn_bound("infer")
            torch = []
            for layout in ([], ["--channels-last"]):
                torch += peer("--batch", str(a.batch), "--arch", a.arch, "--case", "infer", *layout)
            return {"bound": one(rows, case="infer", impl="bound"),
                    "winograd": next((d for d in rows if d.get("impl") == "bound_winograd"), None),
                    "torch": best_peer(torch, "infer")}
    elif a.what == "cnn":
        def ours():
            return cnn_ours("train")

        def ref():
            rows = cnn_bound("train")
            return {"bound": one(rows, case="train", impl="bound"),
                    "winograd": next((d for d in rows if d.get("impl") == "bound_winograd"), None)}
    else:
        def ours():
            return one(lines([a.bench, "mlp_train", "--batch", "128"], env), case="train")

        def ref():
            return best_peer(peer("--batch", "128"), "train")
    rounds = []
    for r in range(a.rounds):  # the order alternates between rounds
        if r % 2 == 0:
            o = ours()
            f = ref()
        else:
            f = ref()
            o = ours()
        rounds.append((o, f))
    if a.what == "cnn-infer":
        ratio = [o["ms_per_step"] / f["bound"]["ms_per_step"] for o, f in rounds]
        wino = [o["ms_per_step"] / f["winograd"]["ms_per_step"] for o, f in rounds if f["winograd"]]
        base = {"bench": "cnn_train", "case": "infer_pairs", "threads": a.threads,
                "arch": a.arch, "batch": a.batch, "rounds": a.rounds,
                "ours_ms": [round(o["ms_per_step"], 4) for o, _ in rounds]}
        print(json.dumps(dict(base, impl="symjax/bound", value=round(statistics.median(ratio), 4),
                              unit="x time", ratios=[round(x, 4) for x in ratio],
                              winograd_ratios=[round(x, 4) for x in wino],
                              bound_ms=[round(f["bound"]["ms_per_step"], 4) for _, f in rounds])),
              flush=True)
        vs = [o["value"] / f["torch"]["value"] for o, f in rounds]
        out = dict(base, impl="symjax/pytorch_best", value=round(statistics.median(vs), 4),
                   unit="x throughput", ratios=[round(x, 4) for x in vs],
                   pytorch_images_per_s=[round(f["torch"]["value"], 2) for _, f in rounds],
                   pytorch_impl=[f["torch"]["impl"] + (" channels_last" if f["torch"].get(
                       "channels_last") else "") for _, f in rounds])
    elif a.what == "cnn":
        ratio = [o["ms_per_step"] / f["bound"]["ms_per_step"] for o, f in rounds]
        seq = [o["ms_per_step"] / f["bound"]["sequence_ms"] for o, f in rounds]
        wino = [o["ms_per_step"] / f["winograd"]["ms_per_step"] for o, f in rounds if f["winograd"]]
        out = {"bench": "cnn_train", "case": "train_pairs", "impl": "symjax/bound",
               "threads": a.threads, "arch": a.arch, "batch": a.batch,
               "value": round(statistics.median(ratio), 4), "unit": "x time",
               "rounds": a.rounds, "ratios": [round(x, 4) for x in ratio],
               "sequence_ratios": [round(x, 4) for x in seq],
               "winograd_value": round(statistics.median(wino), 4) if wino else None,
               "winograd_ratios": [round(x, 4) for x in wino],
               "ours_ms": [round(o["ms_per_step"], 4) for o, _ in rounds],
               "bound_ms": [round(f["bound"]["ms_per_step"], 4) for _, f in rounds],
               "winograd_bound_ms": [round(f["winograd"]["ms_per_step"], 4)
                                     for _, f in rounds if f["winograd"]]}
    else:
        ratio = [o["value"] / f["value"] for o, f in rounds]
        out = {"bench": "mlp_train", "case": "train_pairs", "impl": "symjax/pytorch_best",
               "threads": a.threads, "batch": 128, "value": round(statistics.median(ratio), 4),
               "unit": "x throughput", "rounds": a.rounds, "ratios": [round(x, 4) for x in ratio],
               "ours_steps_per_s": [round(o["value"], 2) for o, _ in rounds],
               "pytorch_steps_per_s": [round(f["value"], 2) for _, f in rounds],
               "pytorch_impl": [f["impl"] for _, f in rounds]}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
