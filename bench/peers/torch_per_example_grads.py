#!/usr/bin/python3
"""PyTorch peer of `symjax_bench per_example_grads`: every parameter's gradient for each example of
a batch, for the 784-H-H-10 ReLU MLP with softmax cross-entropy (Fashion-MNIST's shape), or with
--model cnn for a small CNN on [3, 32, 32] images: conv 3x3 (3 -> 16, no bias), relu, conv 3x3
(16 -> 32, no bias), relu, the spatial mean, dense to 10 (symjax_bench's per_example_grads_cnn).

Implementations (PyTorch 1.13 as Debian ships it; torch.func is not in it, functorch is):
  loop       one forward and backward per example (batch 1), the gradients copied out
  functorch  functorch.vmap(functorch.grad(loss)) over the batch, with functional_call's
             stateless parameters (functorch.make_functional)
The value is milliseconds per batch of per-example gradients (lower is better).

  /usr/bin/python3 bench/peers/torch_per_example_grads.py --threads 2 --batch 128 --impl all
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--impl", choices=["loop", "functorch", "all"], default="all")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    args = p.parse_args()
    pb.setup_env(args)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, H = args.batch, args.hidden
    if args.model == "mlp":
        model = nn.Sequential(nn.Linear(784, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU(),
                              nn.Linear(H, 10))
        x = torch.randn(B, 784)
    else:
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.ReLU(),
                              nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        x = torch.randn(B, 3, 32, 32)
    y = torch.arange(B) % 10
    ctx = pb.torch_context(torch)
    impls = ["loop", "functorch"] if args.impl == "all" else [args.impl]
    for impl in impls:
        if impl == "loop":
            params = list(model.parameters())

            def step():
                out = [torch.empty((B,) + tuple(q.shape)) for q in params]
                for b in range(B):
                    model.zero_grad(set_to_none=True)
                    F.cross_entropy(model(x[b:b + 1]), y[b:b + 1], reduction="sum").backward()
                    for o, q in zip(out, params):
                        o[b] = q.grad
                return out
        else:
            import functorch
            fmodel, fparams = functorch.make_functional(model)

            def loss(ps, xb, yb):
                return F.cross_entropy(fmodel(ps, xb.unsqueeze(0)), yb.unsqueeze(0), reduction="sum")

            per_example = functorch.vmap(functorch.grad(loss), in_dims=(None, 0, 0))

            def step():
                return per_example(fparams, x, y)
        r = pb.measure(step, args)
        pb.emit({
            "bench": "per_example_grads", "case": args.model, "impl": "torch", "variant": impl,
            "batch": B, **({"hidden": H} if args.model == "mlp" else {}),
            "value": 1e3 * r["median_s"], "unit": "ms",
            **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
