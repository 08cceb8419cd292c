#!/usr/bin/python3
"""PyTorch peer of `symjax_bench optimizer_step`: one Adam step (lr 1e-3, the default betas and
eps) on fixed gradients, the optimizer's work alone.

Parameters: the SymJAX paper's network (8 3x3 convolutions of 32 channels, the first from 3, 8
batch norms' scale and shift, a dense 32 -> 10), or --tensors K of --size N elements each, as
ours. Implementations:
  for_loop  torch.optim.Adam(foreach=False): a loop over the tensors (1.13's default on CPU)
  foreach   torch.optim.Adam(foreach=True): the _foreach_ multi-tensor kernels
Microseconds per step.

  /usr/bin/python3 bench/peers/torch_optimizer.py --threads 2
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--tensors", type=int, default=0)
    p.add_argument("--size", type=int, default=9216)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--impl", choices=["for_loop", "foreach", "all"], default="all")
    args = p.parse_args()
    pb.setup_env(args)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.tensors > 0:
        shapes = [(args.size,)] * args.tensors
    else:
        shapes = []
        for layer in range(8):
            shapes += [(32, 3 if layer == 0 else 32, 3, 3), (32,), (32,)]
        shapes += [(32, 10), (10,)]
    ctx = pb.torch_context(torch)
    impls = ["for_loop", "foreach"] if args.impl == "all" else [args.impl]
    for impl in impls:
        params = [torch.nn.Parameter(0.1 * torch.randn(s)) for s in shapes]
        for q in params:
            q.grad = 0.01 * torch.randn(q.shape)
        opt = torch.optim.Adam(params, lr=args.lr, foreach=(impl == "foreach"))
        r = pb.measure(opt.step, args)
        pb.emit({
            "bench": "optimizer_step", "case": "adam", "impl": "torch", "variant": impl,
            "tensors": len(shapes), "parameters": sum(q.numel() for q in params),
            "value": 1e6 * r["median_s"], "unit": "us",
            **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
