#!/usr/bin/python3
"""PyTorch peer of `symjax_bench unary`: one elementwise function (--op sin, cos, tan, log2, exp,
or atan2, pow and hypot of x and x - 1) of --n floats (default 4M, the values 0.5 .. 1.499 as
ours), torch.sin and the like, eager. Milliseconds per call.

  /usr/bin/python3 bench/peers/torch_unary.py --threads 2 --op sin
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--op", default="sin",
                   choices=["sin", "cos", "tan", "log2", "exp", "atan2", "pow", "hypot"])
    p.add_argument("--n", type=int, default=1 << 22)
    args = p.parse_args()
    pb.setup_env(args)
    import torch

    torch.set_num_threads(args.threads)
    x = 0.5 + (torch.arange(args.n) % 1000).float() * 0.001
    ctx = pb.torch_context(torch)
    if args.op in ("atan2", "pow", "hypot"):
        xm1 = x - 1.0
        f = getattr(torch, args.op)
        r = pb.measure(lambda: f(x, xm1), args)
    else:
        f = getattr(torch, args.op)
        r = pb.measure(lambda: f(x), args)
    pb.emit({
        "bench": "unary", "case": args.op, "impl": "torch", "variant": "eager", "n": args.n,
        "value": 1e3 * r["median_s"], "unit": "ms",
        **r,
    }, args, ctx)


if __name__ == "__main__":
    main()
