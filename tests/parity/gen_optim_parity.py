#!/usr/bin/python3
"""Records PyTorch optimizer trajectories for tests/parity/NnOptimParityTest.cpp.

Run with Debian's interpreter (it has torch and numpy):  /usr/bin/python3 gen_optim_parity.py

The problem: a 5-7-3 MLP (tanh hidden layer) with fixed initial weights, a fixed batch of 8 and
the mean softmax cross-entropy. Everything is float64 so that a comparison to 1e-5 relative after
100 steps tests the update rules, not rounding. Weights are stored in symjax's layout: a dense
kernel W is [in, out] and the layer computes x @ W + b.

Writes data/problem.json (the problem) and data/<config>.json per optimizer configuration: the loss
before each of the 100 steps and the parameters after the last one.
"""
import json
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
STEPS = 100
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

rng = np.random.RandomState(1234)
problem = {
    "x": rng.normal(size=(8, 5)).round(6),
    "y": rng.randint(0, 3, size=8),
    "W1": (rng.normal(size=(5, 7)) * 0.6).round(6),
    "b1": (rng.normal(size=7) * 0.1).round(6),
    "W2": (rng.normal(size=(7, 3)) * 0.6).round(6),
    "b2": (rng.normal(size=3) * 0.1).round(6),
}
PARAMS = ["W1", "b1", "W2", "b2"]

# name -> (torch class, kwargs); the C++ test maps the same names to symjax optimizers
CONFIGS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1)),
    "sgd_wd": (torch.optim.SGD, dict(lr=0.1, weight_decay=0.05)),
    "momentum": (torch.optim.SGD, dict(lr=0.05, momentum=0.9)),
    "momentum_wd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.05)),
    "momentum_dampening": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.5)),
    "nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
    "nesterov_wd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05)),
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam_wd": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.05)),
    "amsgrad": (torch.optim.Adam, dict(lr=0.01, amsgrad=True)),
    "amsgrad_wd": (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.05)),
    # a large eps makes its placement (outside the square root) visible in the trajectory
    "adam_eps": (torch.optim.Adam, dict(lr=0.01, eps=1e-2)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    "rmsprop": (torch.optim.RMSprop, dict(lr=0.01)),
    "rmsprop_wd": (torch.optim.RMSprop, dict(lr=0.01, alpha=0.95, weight_decay=0.02)),
    "rmsprop_eps": (torch.optim.RMSprop, dict(lr=0.01, eps=1e-2)),
    "rmsprop_centered_momentum": (torch.optim.RMSprop, dict(lr=0.005, momentum=0.9, centered=True)),
    "adagrad": (torch.optim.Adagrad, dict(lr=0.1)),
    "adagrad_wd": (torch.optim.Adagrad, dict(lr=0.1, weight_decay=0.05, lr_decay=0.01)),
    "adagrad_eps": (torch.optim.Adagrad, dict(lr=0.1, eps=1e-2)),
    "adagrad_init_acc": (torch.optim.Adagrad, dict(lr=0.1, initial_accumulator_value=0.1)),
}


def loss_fn(p, x, y):
    h = torch.tanh(x @ p["W1"] + p["b1"])
    logits = h @ p["W2"] + p["b2"]
    return torch.nn.functional.cross_entropy(logits, y)


def trajectory(cls, kwargs, perturb=0.0):
    p = {k: torch.tensor(problem[k] * (1 + perturb), requires_grad=True) for k in PARAMS}
    x = torch.tensor(problem["x"])
    y = torch.tensor(problem["y"], dtype=torch.long)
    opt = cls([p[k] for k in PARAMS], **kwargs)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(p, x, y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses, {k: p[k].detach().numpy().ravel().tolist() for k in PARAMS}


def conditioning(cls, kwargs, losses, final):
    """Largest relative change of the recorded values when the initial weights move by 1e-12
    (relative). A trajectory that amplifies rounding (an optimizer near a chaotic regime) cannot
    be compared to 1e-5 after 100 steps, so such configurations are rejected."""
    l2, f2 = trajectory(cls, kwargs, perturb=1e-12)
    a = np.concatenate([losses] + [final[k] for k in PARAMS])
    b = np.concatenate([l2] + [f2[k] for k in PARAMS])
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-3)))


def main():
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(DATA, "problem.json"), "w") as f:
        json.dump({k: np.asarray(v).tolist() for k, v in problem.items()}, f)
    for name, (cls, kwargs) in CONFIGS.items():
        losses, final = trajectory(cls, kwargs)
        amp = conditioning(cls, kwargs, losses, final)
        assert amp < 1e-8, f"{name}: a 1e-12 perturbation changes the trajectory by {amp:.1e}"
        record = {"name": name, "optimizer": cls.__name__, "options": kwargs, "steps": STEPS,
                  "torch": torch.__version__, "losses": losses, "final": final}
        with open(os.path.join(DATA, name + ".json"), "w") as f:
            json.dump(record, f)
        print(f"{name:28s} loss {losses[0]:.6f} -> {losses[-1]:.6f}   sensitivity {amp:.1e}")


if __name__ == "__main__":
    main()
