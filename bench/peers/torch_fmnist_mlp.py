#!/usr/bin/python3
"""PyTorch peer of `sj-train --model mlp`: the same MLP trained the same way on the same data.

Data: Debian's dataset-fashion-mnist (gzip'd IDX), pixels scaled to [0, 1] and normalised with
mean 0.2860, std 0.3530. Model: Flatten-Dense(784,512)-ReLU-Dropout(0.2)-Dense(512,512)-ReLU-
Dropout(0.2)-Dense(512,10); softmax cross-entropy; Adam lr 1e-3 with a cosine decay to 0 over the
run (per step); batch 128, reshuffled every epoch (seeded); the last partial batch is kept.
Prints one JSON line per epoch (bench fmnist_mlp, impl torch): training images/s, the epoch's
wall time and the test accuracy. Data is in memory as float tensors before timing starts.

  /usr/bin/python3 bench/peers/torch_fmnist_mlp.py --threads 2 --epochs 12
"""
import math
import os
import sys
import time

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402
from torch_fmnist import DATA_DIR, read_idx  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--impl", default="eager", choices=["eager", "jit_trace"])
    args = p.parse_args()
    pb.setup_env(args)
    import torch
    import torch.nn as nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    d = args.data_dir
    norm = lambda a: (torch.from_numpy(a.astype("float32") / 255.0) - 0.2860) / 0.3530  # noqa: E731
    Xtr = norm(read_idx(os.path.join(d, "train-images-idx3-ubyte.gz"))).unsqueeze(1)
    Ytr = torch.from_numpy(read_idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype("int64"))
    Xte = norm(read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"))).unsqueeze(1)
    Yte = torch.from_numpy(read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype("int64"))

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    n = Xtr.shape[0]
    steps_per_epoch = math.ceil(n / args.batch)
    total = steps_per_epoch * args.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    loss_fn = nn.CrossEntropyLoss()
    fwd = model
    if args.impl == "jit_trace":
        fwd = torch.jit.trace(model, Xtr[:args.batch])
    ctx = pb.torch_context(torch)
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(1, args.epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=gen)
        t = time.perf_counter()
        run_loss = 0.0
        for i in range(0, n, args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(fwd(Xtr[idx]), Ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
            run_loss += float(loss)
        train_s = time.perf_counter() - t
        model.eval()
        with torch.no_grad():
            correct = int((model(Xte).argmax(1) == Yte).sum())
        pb.emit({"bench": "fmnist_mlp", "case": "train_epoch", "impl": "torch", "variant": args.impl,
                 "epoch": epoch, "batch": args.batch, "value": n / train_s, "unit": "images/s",
                 "epoch_s": train_s, "train_loss": run_loss / steps_per_epoch,
                 "test_accuracy": correct / Xte.shape[0]}, args, ctx)


if __name__ == "__main__":
    main()
