#!/usr/bin/python3
"""PyTorch peer of `symjax_bench window_reduce`: the 2x2 windows of a [32, 32, 32, 32] f32 batch
reduced as JAX code pools (x.view(32, 32, 16, 2, 16, 2).mean((3, 5)) and .amax((3, 5))) and with
F.avg_pool2d / F.max_pool2d, eager. Milliseconds per call.

  /usr/bin/python3 bench/peers/torch_window_reduce.py --threads 2
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
    x = torch.randn(32, 32, 32, 32)
    ctx = pb.torch_context(torch)
    cases = {
        "reshape_mean": lambda: x.view(32, 32, 16, 2, 16, 2).mean((3, 5)),
        "reshape_max": lambda: x.view(32, 32, 16, 2, 16, 2).amax((3, 5)),
        "avg_pool2d": lambda: F.avg_pool2d(x, 2),
        "max_pool2d": lambda: F.max_pool2d(x, 2),
    }
    for name, f in cases.items():
        r = pb.measure(f, args)
        pb.emit({
            "bench": "window_reduce", "case": name, "impl": "torch", "variant": "eager",
            "value": 1e3 * r["median_s"], "unit": "ms", **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
