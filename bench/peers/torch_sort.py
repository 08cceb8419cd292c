#!/usr/bin/python3
"""PyTorch peer of `symjax_bench sort`: torch.sort (values and indices), torch.argsort and
torch.topk(k) of a --rows x --n float32 tensor along its last axis, eager. Milliseconds per call.

  /usr/bin/python3 bench/peers/torch_sort.py --threads 2 --rows 1 --n 1048576 --k 5
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--k", type=int, default=5)
    args = p.parse_args()
    pb.setup_env(args)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = pb.torch_context(torch)
    x = torch.randn(args.rows, args.n)
    for case, f in (("sort", lambda: torch.sort(x, dim=-1)),
                    ("argsort", lambda: torch.argsort(x, dim=-1)),
                    ("top_k", lambda: torch.topk(x, args.k, dim=-1))):
        r = pb.measure(f, args)
        pb.emit({
            "bench": "sort", "case": case, "impl": "torch", "variant": "eager", "rows": args.rows,
            "n": args.n, "k": args.k, "value": 1e3 * r["median_s"], "unit": "ms",
            **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
