#!/usr/bin/env python3
"""PyTorch on a GPU, the peer of `symjax_bench mlp_train` on "cuda" (bench/run gpu).

The same step as symjax's: MLP 784-512-512-10 (ReLU), softmax cross-entropy, SGD with momentum
0.9, lr 0.01, batch 128. A symjax call takes host arrays and returns host arrays, so the row
"host_io" does what a call does: the batch is copied from host memory to the GPU and the loss
comes back to the host (loss.item()) every step. "device" keeps the batch on the GPU and
synchronises once per step (PyTorch's best case). One JSON line per result, as bench/ expects.

Usage (on a GPU machine): python3 bench/peers/torch_gpu_mlp.py [--batch 128] [--seconds 2]
"""
import argparse
import json
import time

import torch
import torch.nn as nn


def measure(fn, seconds):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        if n % 10 == 0:
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if dt >= seconds:
                return dt / n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--seconds", type=float, default=2.0)
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    H, B = a.hidden, a.batch
    model = nn.Sequential(nn.Linear(784, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU(),
                          nn.Linear(H, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    xh, yh = torch.randn(B, 784), torch.arange(B) % 10
    xd, yd = xh.to(dev), yh.to(dev)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    cases = {
        "host_io": lambda: step(xh.to(dev), yh.to(dev)).item(),
        "device": lambda: step(xd, yd),
    }
    for impl, fn in cases.items():
        s = measure(fn, a.seconds)
        print(json.dumps({"bench": "mlp_train", "case": "train", "impl": "torch-cuda-" + impl,
                          "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                          "value": round(1.0 / s, 2), "unit": "steps/s", "batch": B}), flush=True)
    with torch.no_grad():
        s = measure(lambda: model(xh.to(dev)).cpu(), a.seconds)
    print(json.dumps({"bench": "mlp_train", "case": "infer", "impl": "torch-cuda-host_io",
                      "device": torch.cuda.get_device_name(), "value": round(1.0 / s, 2),
                      "unit": "batches/s", "batch": B}), flush=True)


if __name__ == "__main__":
    main()
