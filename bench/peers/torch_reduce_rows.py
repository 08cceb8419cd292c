#!/usr/bin/python3
"""PyTorch peer of `symjax_bench reduce_rows`: the same sums over outer dims, eager, in GB/s of
input read (the row the benchmark names: bn_stats sums x and x * x of a [32, 32, 32, 32] batch
per channel, which symjax reads as [32, 2, 32, 32, 16]; bias_grad [128, 512] over dim 0;
bias_grad_wide [128, 4096]; tokens_wide [2048, 4096]; channel_sum [32, 16, 4096] over dim 1).

  /usr/bin/python3 bench/peers/torch_reduce_rows.py --threads 2
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

    torch.set_num_threads(args.threads)
    ctx = pb.torch_context(torch)
    bn = torch.randn(32, 32, 32, 32)
    cases = {
        "bn_stats": (bn, lambda: (bn.sum((0, 2, 3)), (bn * bn).sum((0, 2, 3)))),
    }
    for name, shape, dim in (("bias_grad", (128, 512), 0), ("bias_grad_wide", (128, 4096), 0),
                             ("tokens_wide", (2048, 4096), 0), ("channel_sum", (32, 16, 4096), 1)):
        x = torch.randn(*shape)
        cases[name] = (x, (lambda x=x, dim=dim: x.sum(dim)))
    for name, (x, f) in cases.items():
        r = pb.measure(f, args)
        pb.emit({
            "bench": "reduce_rows", "case": name, "impl": "torch", "variant": "eager",
            "value": x.numel() * 4 / r["median_s"] / 1e9, "unit": "GB/s",
            "us": 1e6 * r["median_s"], **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
