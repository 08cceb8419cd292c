"""What Ctrl-C support costs a loop (bench/run python): a scalar while_loop of --steps iterations
(i < n: i + 1, as symjax_bench control_flow) called from Python's main thread with the check that
polls Python's signal handlers installed for the call (Note [Ctrl-C]; the default) and without it
(symjax._core._set_signal_checks(False): the runtime's polls are then an atomic load), in
alternating samples. One JSON line each (ns per iteration) and one with the difference.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/interrupt_overhead.py
"""
import argparse
import json
import os
import statistics
import time

import symjax as sj
import symjax.tensor as T


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    n = T.Placeholder((), "float64", name="n")
    count = T.while_loop(lambda i, n: i < n, lambda i, n: i + 1.0, T.zeros((), "float64"),
                         non_sequences=[n])
    f = sj.function(n, outputs=count, backend=a.backend)
    steps = float(a.steps)
    assert float(f(steps)) == steps

    def timed():
        t = time.perf_counter()
        f(steps)
        return time.perf_counter() - t

    def unpolled():
        sj._core._set_signal_checks(False)
        try:
            return timed()
        finally:
            sj._core._set_signal_checks(True)

    for _ in range(3):
        timed()
        unpolled()
    main_s, plain_s = [], []
    for _ in range(a.repeats):
        main_s.append(timed())
        plain_s.append(unpolled())
    threads = int(os.environ.get("SJ_NUM_THREADS", os.cpu_count() or 1))
    per = {k: statistics.median(v) / a.steps * 1e9
           for k, v in (("with_check", main_s), ("without_check", plain_s))}
    for case, ns in per.items():
        print(json.dumps({"bench": "interrupt_overhead", "case": case, "impl": "symjax-python",
                          "backend": a.backend, "threads": threads, "steps": a.steps,
                          "value": round(ns, 2), "unit": "ns/iteration"}), flush=True)
    d = per["with_check"] - per["without_check"]
    print(json.dumps({"bench": "interrupt_overhead", "case": "difference", "impl": "symjax-python",
                      "backend": a.backend, "threads": threads, "value": round(d, 2),
                      "unit": "ns/iteration",
                      "percent": round(100 * d / per["without_check"], 2)}), flush=True)


if __name__ == "__main__":
    main()
