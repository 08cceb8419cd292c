#!/usr/bin/python3
"""PyTorch peer of `symjax_bench matmul`: small float32 products with a bias (torch.addmm: the
dense layers of the benchmarks' networks) and float64 products (torch.matmul), eager, one
call per product. Microseconds per call; the cases are named as symjax's rows.

  /usr/bin/python3 bench/peers/torch_matmul.py --threads 2
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402

# (dtype, batch, m, k, n, bias): as bench/symjax_bench.cpp's matmul_bench
CASES = [("f32", 1, 32, 32, 10, True), ("f32", 1, 1, 784, 512, True),
         ("f32", 1, 1, 4096, 10, True), ("f32", 1, 128, 16, 16, True),
         ("f64", 1, 64, 64, 64, False), ("f64", 1, 512, 512, 512, False),
         ("f64", 256, 16, 16, 16, False), ("f64", 1, 1, 1000, 1000, False)]


def main():
    p = pb.base_parser(__doc__)
    args = p.parse_args()
    pb.setup_env(args)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = pb.torch_context(torch)
    for dt, batch, m, k, n, bias in CASES:
        dtype = torch.float32 if dt == "f32" else torch.float64
        lead = (batch,) if batch > 1 else ()
        a = torch.randn(*lead, m, k, dtype=dtype)
        w = torch.randn(*lead, k, n, dtype=dtype)
        b = torch.randn(n, dtype=dtype)
        out = torch.empty(*lead, m, n, dtype=dtype)
        if bias:
            def f():
                return torch.addmm(b, a, w)

            def f_out():
                return torch.addmm(b, a, w, out=out)
        else:
            def f():
                return torch.matmul(a, w)

            def f_out():
                return torch.matmul(a, w, out=out)
        name = f"{dt} {batch}x{m}x{k}x{n}" + (" + bias" if bias else "")
        for variant, fn in (("eager", f), ("eager_out", f_out)):
            r = pb.measure(fn, args)
            pb.emit({
                "bench": "matmul", "case": name, "impl": "torch", "variant": variant,
                "value": 1e6 * r["median_s"], "unit": "us",
                "gflops": 2.0 * batch * m * k * n / r["median_s"] * 1e-9, **r,
            }, args, ctx)


if __name__ == "__main__":
    main()
