"""The cost of calling a tiny compiled function from Python (bench/run call_overhead): the same
function as symjax_bench's call_overhead row (x * 2 + 1 on a 0-d float32), timed the same way
(median of 7 repeats of at least 0.3 s each after 100 warm-up calls). One JSON line per case:
  scalar        a 0-d float32 NumPy array (the C++ row passes an Array)
  python_float  a Python float (converted by the binding)
  reused        the previous call's output fed back (symjax's own buffer: no copy in)
"""
import json
import os
import resource
import time

import numpy as np

import symjax as sj
import symjax.tensor as T


def measure(fn, warmup=100, repeats=7, min_s=0.3):
    for _ in range(warmup):
        fn()
    t = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t, 1e-7)
    inner = max(1, int(np.ceil(min_s / one)))
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t) / inner)
    return sorted(samples)[len(samples) // 2]


def emit(case, seconds):
    print(json.dumps({
        "bench": "call_overhead", "case": case, "impl": "symjax-python",
        "threads": int(os.environ.get("SJ_NUM_THREADS", os.cpu_count() or 1)),
        "value": round(seconds * 1e6, 4), "unit": "us",
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
    }), flush=True)


def main():
    x = T.Placeholder((), "float32", name="x")
    f = sj.function(x, outputs=x * 2.0 + 1.0)
    v = np.array(1.5, np.float32)
    emit("scalar", measure(lambda: f(v)))
    emit("python_float", measure(lambda: f(1.5)))
    out = [f(v)]

    def reused():
        out[0] = f(out[0]) * 0 + v if False else f(out[0])

    emit("reused", measure(lambda: f(out[0])))


if __name__ == "__main__":
    main()
