#!/usr/bin/python3
"""PyTorch peer of `symjax_bench lstm`: one LSTM layer (--cell gru: a GRU) and a dense 10 on its
final hidden state.

Synthetic data: a fixed random batch x [seq, batch, input] (PyTorch's default layout, as ours)
and fixed labels; throughput does not depend on the values.
Cases:
  train  zero_grad + forward + softmax cross-entropy + backward + Adam(lr 1e-3) step -> steps/s
  infer  forward (logits) under no_grad                                            -> batches/s
Implementations:
  eager       torch.nn.LSTM and torch.nn.Linear, called from Python
  jit_script  torch.jit.script of the same module (the optimizer stays eager)

Both run ATen's fused LSTM (torch._VF.lstm), so TorchScript removes only the Python around it.
Run one case and one implementation per process (--case, --impl) for a meaningful peak RSS.

  /usr/bin/python3 bench/peers/torch_lstm.py --threads 2 --batch 128 --seq 28 --input 28 \
      --hidden 128 --case train --impl eager
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--seq", type=int, default=28)
    p.add_argument("--input", type=int, default=28)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--case", choices=["train", "infer", "all"], default="all")
    p.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    p.add_argument("--impl", choices=["eager", "jit_script", "all"], default="all")
    args = p.parse_args()
    pb.setup_env(args)
    import torch
    import torch.nn as nn

    # two classes, not one with a flag: TorchScript types both branches of an if, and the two
    # modules return different state types ((h, c) against h)
    class Net(nn.Module):
        def __init__(self, n_in: int, hidden: int):
            super().__init__()
            self.lstm = nn.LSTM(n_in, hidden)
            self.dense = nn.Linear(hidden, 10)

        def forward(self, x):
            _, (h, _) = self.lstm(x)
            return self.dense(h[0])

    class GruNet(nn.Module):
        def __init__(self, n_in: int, hidden: int):
            super().__init__()
            self.gru = nn.GRU(n_in, hidden)
            self.dense = nn.Linear(hidden, 10)

        def forward(self, x):
            _, h = self.gru(x)
            return self.dense(h[0])

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    T, B, D, H = args.seq, args.batch, args.input, args.hidden
    x = torch.randn(T, B, D)
    y = torch.randint(0, 10, (B,))
    # per step, forward: x W_ih^T and h W_hh^T for 4 gates; the dense layer once
    gates = 4 if args.cell == "lstm" else 3
    fwd_flop = 2 * T * B * gates * H * (D + H) + 2 * B * H * 10
    ctx = pb.torch_context(torch)
    cases = ["train", "infer"] if args.case == "all" else [args.case]
    impls = ["eager", "jit_script"] if args.impl == "all" else [args.impl]
    for impl in impls:
        torch.manual_seed(0)
        model = Net(D, H) if args.cell == "lstm" else GruNet(D, H)
        net = torch.jit.script(model) if impl == "jit_script" else model
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        loss_fn = nn.CrossEntropyLoss()
        for case in cases:
            if case == "train":
                def step():
                    opt.zero_grad(set_to_none=True)
                    loss = loss_fn(net(x), y)
                    loss.backward()
                    opt.step()
                    return loss
                flop = 3 * fwd_flop
            else:
                def step():
                    with torch.no_grad():
                        return net(x)
                flop = fwd_flop
            r = pb.measure(step, args)
            rate = 1.0 / r["median_s"]
            pb.emit({
                "bench": "lstm", "case": case, "impl": "torch", "variant": impl,
                "cell": args.cell, "batch": B, "seq": T, "input": D, "hidden": H,
                "value": rate, "unit": "steps/s" if case == "train" else "batches/s",
                "ms_per_step": 1e3 * r["median_s"],
                "achieved_gflops": flop * rate / 1e9,
                **r,
            }, args, ctx)


if __name__ == "__main__":
    main()
