#!/usr/bin/python3
"""PyTorch peer of `symjax_bench rows`: F.pad by one on each side, torch.cat of two along the
last dim and torch.argmax along the last dim of a 1024 x 1024 float32, F.one_hot of 4096 int64
labels to 1000 classes, and the 512 rows from row 300 read (narrow, then a copy: symjax's result
is an array of its own) and written (a copy of x with those rows replaced), eager. Milliseconds
per call.

  /usr/bin/python3 bench/peers/torch_rows.py --threads 2
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    args = p.parse_args()
    pb.setup_env(args)
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = pb.torch_context(torch)
    n, m, depth = 1024, 4096, 1000
    x = torch.randn(n, n)
    labels = (torch.arange(m, dtype=torch.int64) * 7919) % depth
    u = torch.randn(n // 2, n)

    def update():
        y = x.clone()
        y[300:300 + n // 2] = u
        return y

    for case, f in (("pad", lambda: F.pad(x, (1, 1, 1, 1))),
                    ("concat", lambda: torch.cat([x, x], 1)),
                    ("argmax", lambda: torch.argmax(x, 1)),
                    ("one_hot", lambda: F.one_hot(labels, depth)),
                    ("dynamic_slice", lambda: x.narrow(0, 300, n // 2).clone()),
                    ("dynamic_update_slice", update)):
        r = pb.measure(f, args)
        pb.emit({
            "bench": "rows", "case": case, "impl": "torch", "variant": "eager", "n": n,
            "value": 1e3 * r["median_s"], "unit": "ms", **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
