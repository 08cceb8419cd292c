"""Winograd against direct 3x3 convolutions by channel count (bench/run winograd_channels).

Note [Winograd convolutions] in src/backend/cpu/Conv.cpp gives oneDNN's Winograd kernels only to
convolutions with at least 32 channels on both sides; this measures why. Each shape is one
compiled inference function (a conv whose weights the function does not update, so an eligible
one runs as Winograd with its transformed weights kept), timed in child processes with
SJ_WINOGRAD=all (Winograd wherever oneDNN has a kernel: 16-channel sides too), SJ_WINOGRAD=0
(direct) and unset (our rule), the order rotating over --rounds rounds. One JSON line per shape:
value = Winograd / direct (below 1: Winograd is faster), the best of each setting's rounds in
ms per call, and which one our rule takes.

    PYTHONPATH=build-bench/python python3 python/bench/winograd_channels.py [--rounds 3]
(bench/run winograd_channels runs it with the benchmarks' threads.)
"""
import argparse
import json
import os
import subprocess
import sys
import time

SHAPES = [  # (input channels, output channels, side, batch)
    (16, 16, 32, 32), (16, 32, 32, 32), (16, 32, 32, 64), (32, 16, 32, 32), (32, 32, 32, 32),
    (16, 16, 16, 32), (16, 32, 16, 32), (16, 64, 16, 32), (32, 32, 16, 32), (32, 64, 16, 32),
    (64, 64, 8, 32),
]


def child():
    """Times every shape once, in this process's SJ_WINOGRAD setting; prints a JSON dict."""
    import numpy as np

    import symjax as sj
    import symjax.tensor as T

    out = {}
    rng = np.random.default_rng(0)
    for ci, co, side, n in SHAPES:
        x = T.Placeholder((n, ci, side, side), "float32", name="x")
        w = T.Variable((rng.standard_normal((co, ci, 3, 3)) * 0.1).astype(np.float32), name="w")
        f = sj.function(x, outputs=[T.conv(x, w, padding="SAME")])
        xv = rng.standard_normal((n, ci, side, side)).astype(np.float32)
        for _ in range(3):
            f(xv)
        best = float("inf")
        for _ in range(5):
            t, k = time.perf_counter(), 0
            while time.perf_counter() - t < 0.15:
                f(xv)
                k += 1
            best = min(best, (time.perf_counter() - t) / k)
        out["%d,%d,%d,%d" % (ci, co, side, n)] = best * 1e3
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child()
        return
    settings = ["all", "0", "rule"]
    best = {k: {} for k in settings}
    for r in range(args.rounds):
        for setting in settings[r % 3:] + settings[:r % 3]:
            env = dict(os.environ)
            env.pop("SJ_WINOGRAD", None)
            if setting != "rule":
                env["SJ_WINOGRAD"] = setting
            got = json.loads(subprocess.run([sys.executable, __file__, "--child"], env=env,
                                            check=True, capture_output=True, text=True).stdout)
            for k, v in got.items():
                best[setting][k] = min(v, best[setting].get(k, float("inf")))
    threads = int(os.environ.get("SJ_NUM_THREADS", os.cpu_count() or 1))
    for ci, co, side, n in SHAPES:
        k = "%d,%d,%d,%d" % (ci, co, side, n)
        wino, direct, rule = best["all"][k], best["0"][k], best["rule"][k]
        print(json.dumps({
            "bench": "winograd_channels", "case": "%d->%d %dx%d" % (ci, co, side, side),
            "impl": "symjax", "threads": threads, "batch": n, "value": round(wino / direct, 4),
            "unit": "x time (Winograd / direct)", "winograd_ms": round(wino, 4),
            "direct_ms": round(direct, 4), "rule_ms": round(rule, 4),
            "rule_takes": "winograd" if ci >= 32 and co >= 32 else "direct",
            "rounds": args.rounds}))


if __name__ == "__main__":
    main()
