#!/usr/bin/python3
"""PyTorch peer of `symjax_bench conv_stack_infer`: inference through LAYERS 3x3 convolutions of
CHANNELS channels (no bias), each followed by a ReLU, on BATCH images of SIZE x SIZE. Small
activations and many weights: what a call costs besides the convolutions shows.

Implementations (PyTorch 1.13 as Debian ships it), each in the plain and the channels-last layout:
  eager        the nn.Sequential under torch.no_grad()
  jit_frozen   torch.jit.script + freeze + optimize_for_inference (oneDNN's weight prepacking)
The value is milliseconds per call (lower is better).

  /usr/bin/python3 bench/peers/torch_conv_stack.py --threads 2 --channels 256 --layers 8 --size 8
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--channels", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args()
    pb.setup_env(args)
    import torch
    import torch.nn as nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    C, L, S, B = args.channels, args.layers, args.size, args.batch
    ctx = pb.torch_context(torch)
    for channels_last in (False, True):
        mf = torch.channels_last if channels_last else torch.contiguous_format
        x = torch.randn(B, C, S, S).contiguous(memory_format=mf)
        layers = []
        for _ in range(L):
            layers += [nn.Conv2d(C, C, 3, padding=1, bias=False), nn.ReLU()]
        model = nn.Sequential(*layers).eval().to(memory_format=mf)
        for impl in ("eager", "jit_frozen"):
            net = model if impl == "eager" else torch.jit.optimize_for_inference(
                torch.jit.freeze(torch.jit.script(model)))

            def call():
                with torch.no_grad():
                    return net(x)
            r = pb.measure(call, args)
            pb.emit({
                "bench": "conv_stack_infer", "case": "infer", "impl": impl,
                "channels_last": channels_last, "channels": C, "layers": L, "size": S, "batch": B,
                "weights_mb": L * C * C * 9 * 4 / 1e6, "value": 1e3 * r["median_s"], "unit": "ms",
                **r,
            }, args, ctx)


if __name__ == "__main__":
    main()
