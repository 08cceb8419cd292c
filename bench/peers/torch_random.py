#!/usr/bin/python3
"""PyTorch peer of `symjax_bench random`: --n uniform floats (torch.rand) and a dropout keep-mask
(bernoulli_(0.8) of an f32 tensor, what torch.nn.functional.dropout draws), eager, on the CPU
generator. Microseconds per call.

  /usr/bin/python3 bench/peers/torch_random.py --threads 2 --n 65536
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--n", type=int, default=1 << 16)
    args = p.parse_args()
    pb.setup_env(args)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = pb.torch_context(torch)
    mask = torch.empty(args.n)
    for case, f in (("uniform", lambda: torch.rand(args.n)),
                    ("bernoulli", lambda: mask.bernoulli_(0.8))):
        r = pb.measure(f, args)
        pb.emit({
            "bench": "random", "case": case, "impl": "torch", "variant": "eager", "n": args.n,
            "value": 1e6 * r["median_s"], "unit": "us",
            **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
