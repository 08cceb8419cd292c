#!/usr/bin/python3
"""Records a small CNN's outputs, loss, gradients and SGD trajectory in PyTorch, for
tests/parity/CnnParityTest.cpp.  Run with Debian's interpreter:
    /usr/bin/python3 tests/parity/gen_cnn_parity.py

The network (float32, NCHW, weights OIHW as in symjax):
    conv 3->6 3x3 pad 1 (SAME) - BN - ReLU - maxpool 2x2
    conv 6->8 3x3 stride 1 no padding (VALID) - BN - ReLU - avgpool 2x2 stride 1
    flatten (8*1*1... see shapes below) - dense -> 5
on a batch of 6 images 3x8x8 with labels, mean softmax cross-entropy. Batch norm: eps 1e-5,
PyTorch momentum 0.1 (symjax's momentum 0.9: running = 0.9 running + 0.1 batch), the running
variance uses the unbiased batch variance in both.

Writes cnn/cnn_parity.json:
  params      initial parameters in symjax's layout (conv OIHW, dense [in, out])
  x, y        the batch
  train       logits, loss and gradients of every parameter, train mode, initial parameters
  eval0       logits in eval mode with the initial running statistics (mean 0, var 1)
  steps       loss before each of 10 SGD steps (lr 0.05, momentum 0.9; train mode)
  final       parameters and running statistics after the 10 steps
  eval        logits in eval mode after the 10 steps
"""
import json
import os

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(7)
rng = np.random.RandomState(42)


def t(a):
    return torch.tensor(np.asarray(a, dtype=np.float32))


x = t(rng.normal(size=(6, 3, 8, 8)).round(5))
y = torch.tensor(rng.randint(0, 5, size=6), dtype=torch.int64)

conv1 = nn.Conv2d(3, 6, 3, padding=1)
bn1 = nn.BatchNorm2d(6, eps=1e-5, momentum=0.1)
conv2 = nn.Conv2d(6, 8, 3)
bn2 = nn.BatchNorm2d(8, eps=1e-5, momentum=0.1)
dense = nn.Linear(8 * 1 * 1, 5)
# 8x8 -conv SAME-> 8x8 -maxpool 2-> 4x4 -conv VALID-> 2x2 -avgpool 2, stride 1-> 1x1
net = nn.Sequential(conv1, bn1, nn.ReLU(), nn.MaxPool2d(2), conv2, bn2, nn.ReLU(),
                    nn.AvgPool2d(2, stride=1), nn.Flatten(), dense)
with torch.no_grad():  # non-trivial BN affine parameters
    for bn in (bn1, bn2):
        bn.weight.copy_(t(1 + 0.2 * rng.normal(size=bn.weight.shape)))
        bn.bias.copy_(t(0.1 * rng.normal(size=bn.bias.shape)))

NAMES = {"conv1/W": conv1.weight, "conv1/b": conv1.bias, "bn1/gamma": bn1.weight,
         "bn1/beta": bn1.bias, "conv2/W": conv2.weight, "conv2/b": conv2.bias,
         "bn2/gamma": bn2.weight, "bn2/beta": bn2.bias, "dense/W": dense.weight,
         "dense/b": dense.bias}


def ours(name, v):
    v = v.detach().numpy()
    return v.T if name == "dense/W" else v  # symjax's dense kernel is [in, out]


def tolist(a):
    return np.asarray(a, dtype=np.float64).round(9).tolist()


out = {"x": tolist(x), "y": y.tolist(),
       "params": {k: tolist(ours(k, v)) for k, v in NAMES.items()}}
loss_fn = nn.CrossEntropyLoss()

net.eval()
with torch.no_grad():
    out["eval0"] = tolist(net(x))

net.train()
logits = net(x)
loss = loss_fn(logits, y)
loss.backward()
out["train"] = {"logits": tolist(logits.detach()), "loss": float(loss),
                "grads": {k: tolist(ours(k, v.grad)) for k, v in NAMES.items()}}
# undo the running-statistics update of that forward, so the SGD run starts fresh
for bn in (bn1, bn2):
    bn.reset_running_stats()
net.zero_grad()

opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
losses = []
for _ in range(10):
    opt.zero_grad()
    loss = loss_fn(net(x), y)
    loss.backward()
    opt.step()
    losses.append(float(loss))
out["steps"] = losses
final = {k: tolist(ours(k, v)) for k, v in NAMES.items()}
for i, bn in ((1, bn1), (2, bn2)):
    final[f"bn{i}/running_mean"] = tolist(bn.running_mean)
    final[f"bn{i}/running_var"] = tolist(bn.running_var)
out["final"] = final
net.eval()
with torch.no_grad():
    out["eval"] = tolist(net(x))

os.makedirs(os.path.join(HERE, "cnn"), exist_ok=True)
with open(os.path.join(HERE, "cnn", "cnn_parity.json"), "w") as f:
    json.dump(out, f)
print("wrote", os.path.join(HERE, "cnn", "cnn_parity.json"))
