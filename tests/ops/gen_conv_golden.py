#!/usr/bin/python3
"""Records PyTorch's convolutions and poolings for tests/ops/ConvGoldenTest.cpp.

Run with Debian's interpreter (it has torch and numpy):  /usr/bin/python3 tests/ops/gen_conv_golden.py

Each case applies one torch.nn.functional op (conv1d, conv2d, conv_transpose1d/2d, max_pool1d/2d,
avg_pool1d/2d) to fixed inputs and records, in float64, its output y and the gradients of
sum(y * r) for a fixed cotangent r with respect to x (and w). The C++ test maps the same
arguments to symjax's conv / conv_transpose / max_pool / avg_pool and compares on every backend.

Inputs are multiples of 1/32 in [-3, 3] (max pooling inputs are distinct, so windows have no
ties): their products are multiples of 1/1024 below 2^4, and sums of a few hundred of them are
exact in float32 as in float64, so a float32 backend must reproduce the convolutions exactly up
to the final rounding, whatever its summation order.

Writes tests/ops/golden/conv_torch.json.
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden", "conv_torch.json")

rng = np.random.RandomState(20240611)


def grid(shape):
    """Multiples of 1/32 in [-3, 3]."""
    return rng.randint(-96, 97, size=shape) / 32.0


def distinct(shape):
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n // 2) / 32.0).reshape(shape)


def tensor(a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def flat(a):
    return {"shape": list(a.shape), "data": [float(v) for v in np.asarray(a).reshape(-1)]}


CASES = []


def case(name, op, args, x, w=None):
    """op: the torch.nn.functional name; args: its keyword arguments (torch's conventions)."""
    tx = tensor(x)
    inputs = [tx]
    if w is not None:
        tw = tensor(w)
        inputs.append(tw)
        y = getattr(F, op)(tx, tw, **args)
    else:
        y = getattr(F, op)(tx, **args)
    r = grid(tuple(y.shape))
    (y * torch.tensor(r)).sum().backward()
    c = {"name": name, "op": op, "args": args, "x": flat(x), "r": flat(r),
         "y": flat(y.detach().numpy()), "dx": flat(tx.grad.numpy())}
    if w is not None:
        c["w"] = flat(w)
        c["dw"] = flat(tw.grad.numpy())
    CASES.append(c)


def main():
    case("conv1d_stride2_pad1", "conv1d", dict(stride=2, padding=1), grid((2, 3, 9)), grid((4, 3, 3)))
    case("conv1d_dilation2_groups3", "conv1d", dict(padding=2, dilation=2, groups=3),
         grid((2, 3, 10)), grid((6, 1, 3)))
    case("conv2d_pad1", "conv2d", dict(padding=1), grid((2, 3, 8, 7)), grid((4, 3, 3, 3)))
    case("conv2d_stride2_dilation2_groups2", "conv2d",
         dict(stride=2, padding=(2, 1), dilation=2, groups=2), grid((2, 4, 9, 8)), grid((6, 2, 3, 2)))
    case("conv2d_depthwise_stride2", "conv2d", dict(stride=2, padding=1, groups=4),
         grid((2, 4, 7, 7)), grid((8, 1, 3, 3)))
    # torch's 'same' (stride 1): total pad d (k - 1), the smaller half first, as our SAME
    case("conv2d_same_even_kernel", "conv2d", dict(padding="same"), grid((1, 2, 6, 5)),
         grid((3, 2, 4, 3)))
    case("conv_transpose1d_stride2", "conv_transpose1d", dict(stride=2, padding=1),
         grid((2, 3, 5)), grid((3, 2, 3)))
    case("conv_transpose2d_stride2_outpad1", "conv_transpose2d",
         dict(stride=2, padding=1, output_padding=1), grid((2, 4, 5, 5)), grid((4, 3, 3, 3)))
    case("conv_transpose2d_groups2_dilation2", "conv_transpose2d",
         dict(stride=(1, 2), padding=(2, 1), groups=2, dilation=2), grid((1, 4, 4, 3)),
         grid((4, 2, 3, 3)))
    case("max_pool1d_overlap", "max_pool1d", dict(kernel_size=3, stride=2, padding=1),
         distinct((2, 3, 9)))
    case("max_pool2d_2x2", "max_pool2d", dict(kernel_size=2), distinct((2, 3, 8, 8)))
    case("max_pool2d_3x3_stride2_pad1", "max_pool2d", dict(kernel_size=3, stride=2, padding=1),
         distinct((2, 3, 9, 8)))
    case("avg_pool1d_include_pad", "avg_pool1d",
         dict(kernel_size=3, stride=2, padding=1, count_include_pad=True), grid((2, 3, 9)))
    case("avg_pool2d_include_pad", "avg_pool2d",
         dict(kernel_size=3, stride=2, padding=1, count_include_pad=True), grid((2, 3, 9, 8)))
    case("avg_pool2d_exclude_pad", "avg_pool2d",
         dict(kernel_size=(3, 2), stride=(2, 1), padding=1, count_include_pad=False),
         grid((2, 3, 7, 6)))
    text = json.dumps({"generator": "tests/ops/gen_conv_golden.py", "torch": torch.__version__,
                       "cases": CASES}, separators=(",", ":"))
    with open(OUT, "w") as f:
        f.write(text + "\n")
    print("wrote %s: %d cases, %d bytes" % (OUT, len(CASES), len(text)))


if __name__ == "__main__":
    main()
