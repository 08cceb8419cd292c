#!/usr/bin/python3
"""Records torch.nn.RNN/GRU/LSTM outputs, final states, gradients and a short SGD run, for
tests/parity/RnnParityTest.cpp. Run with Debian's interpreter (it has torch):
    /usr/bin/python3 tests/parity/gen_rnn_parity.py

Each case builds a PyTorch layer in float64 with its default initialisation (seeded), a batch
[T, N, in] (or [N, T, in] with batch_first), optional h0/c0 and optional lengths (through
pack_padded_sequence, so padded steps neither change the state nor produce output), and the
loss sum(output * R) + sum(h_n * S) (+ sum(c_n * U) for LSTM) with fixed random R, S, U.
Writes rnn/rnn_parity.json: per case the configuration, the parameters (PyTorch names and
layout), the inputs, output, h_n, c_n, the gradient of every input and parameter, and the
parameters after 5 SGD steps (lr 0.01) on that loss.
"""
import json
import os

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

HERE = os.path.dirname(os.path.abspath(__file__))
T, N, IN, H = 5, 3, 4, 6

CASES = [
    # name, kind, layers, bidirectional, batch_first, nonlinearity, with_state, lengths
    ("lstm_2layer_bidir_state", "LSTM", 2, True, False, None, True, None),
    ("gru_2layer_bidir_lengths", "GRU", 2, True, False, None, False, [5, 3, 1]),
    ("rnn_relu_batch_first", "RNN", 1, False, True, "relu", True, None),
    ("rnn_tanh_lengths", "RNN", 1, True, False, "tanh", False, [2, 5, 4]),
    ("lstm_1layer_lengths_batch_first", "LSTM", 1, True, True, None, True, [4, 5, 2]),
]


def tolist(t):
    return t.detach().numpy().reshape(-1).tolist()


def run(layer, kind, x, h0, c0, lengths, batch_first):
    inp = x
    if lengths is not None:
        inp = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=False)
    state = None
    if h0 is not None:
        state = (h0, c0) if kind == "LSTM" else h0
    out, st = layer(inp, state)
    if lengths is not None:
        out, _ = pad_packed_sequence(out, batch_first=batch_first, total_length=T)
    if kind == "LSTM":
        return out, st[0], st[1]
    return out, st, None


def main():
    torch.manual_seed(7)
    rng = np.random.default_rng(11)
    cases = []
    for name, kind, layers, bidir, bf, nl, with_state, lengths in CASES:
        kw = dict(num_layers=layers, bidirectional=bidir, batch_first=bf)
        if kind == "RNN":
            kw["nonlinearity"] = nl
        layer = getattr(nn, kind)(IN, H, **kw).double()
        d = 2 if bidir else 1
        xshape = (N, T, IN) if bf else (T, N, IN)
        x = torch.tensor(rng.uniform(-1, 1, xshape), requires_grad=True)
        h0 = torch.tensor(rng.uniform(-0.5, 0.5, (layers * d, N, H)), requires_grad=True) if with_state else None
        c0 = torch.tensor(rng.uniform(-0.5, 0.5, (layers * d, N, H)), requires_grad=True) \
            if with_state and kind == "LSTM" else None
        R = torch.tensor(rng.uniform(-1, 1, (N, T, d * H) if bf else (T, N, d * H)))
        S = torch.tensor(rng.uniform(-1, 1, (layers * d, N, H)))
        U = torch.tensor(rng.uniform(-1, 1, (layers * d, N, H)))
        params = {n: p.detach().numpy().copy() for n, p in layer.named_parameters()}

        def loss_of():
            out, hn, cn = run(layer, kind, x, h0, c0, lengths, bf)
            loss = (out * R).sum() + (hn * S).sum()
            if cn is not None:
                loss = loss + (cn * U).sum()
            return loss, out, hn, cn

        loss, out, hn, cn = loss_of()
        layer.zero_grad()
        loss.backward()
        case = {
            "name": name, "kind": kind, "layers": layers, "bidirectional": bidir, "batch_first": bf,
            "nonlinearity": nl or "tanh", "lengths": lengths,
            "x": tolist(x), "h0": tolist(h0) if h0 is not None else None,
            "c0": tolist(c0) if c0 is not None else None,
            "R": tolist(R), "S": tolist(S), "U": tolist(U),
            "params": {n: v.reshape(-1).tolist() for n, v in params.items()},
            "shapes": {n: list(v.shape) for n, v in params.items()},
            "loss": loss.item(), "output": tolist(out), "h_n": tolist(hn),
            "c_n": tolist(cn) if cn is not None else None,
            "grad_x": tolist(x.grad), "grad_h0": tolist(h0.grad) if h0 is not None else None,
            "grad_c0": tolist(c0.grad) if c0 is not None else None,
            "grads": {n: tolist(p.grad) for n, p in layer.named_parameters()},
        }
        opt = torch.optim.SGD(layer.parameters(), lr=0.01)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            l, _, _, _ = loss_of()
            losses.append(l.item())
            l.backward()
            opt.step()
        case["sgd_losses"] = losses
        case["sgd_params"] = {n: tolist(p) for n, p in layer.named_parameters()}
        cases.append(case)
    with open(os.path.join(HERE, "rnn", "rnn_parity.json"), "w") as f:
        json.dump({"T": T, "N": N, "in": IN, "hidden": H, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
