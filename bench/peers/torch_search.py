#!/usr/bin/python3
"""PyTorch peer of `symjax_bench search`: torch.searchsorted of --n float32 queries into --n
sorted float32, torch.unique (sorted, with counts) of --n int32 in [0, n / 10), torch.bincount
of --n int64 in [0, 1000) (minlength 1000) and torch.histc with 100 bins, eager. Milliseconds
per call.

  /usr/bin/python3 bench/peers/torch_search.py --threads 2 --n 1048576
"""
import os
import sys

sys.path.insert(0, os.environ.get("SJ_PEERS", os.path.join(os.path.dirname(__file__), "../../../shared/bench")))
import peerbench as pb  # noqa: E402


def main():
    p = pb.base_parser(__doc__)
    p.add_argument("--n", type=int, default=1 << 20)
    args = p.parse_args()
    pb.setup_env(args)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = pb.torch_context(torch)
    n = args.n
    a = torch.sort(torch.randn(n)).values
    q = torch.randn(n)
    xi = torch.randint(0, max(n // 10, 1), (n,), dtype=torch.int32)
    xl = torch.randint(0, 1000, (n,), dtype=torch.int64)
    for case, f in (("searchsorted", lambda: torch.searchsorted(a, q)),
                    ("unique", lambda: torch.unique(xi, sorted=True, return_counts=True)),
                    ("bincount", lambda: torch.bincount(xl, minlength=1000)),
                    ("histogram", lambda: torch.histc(q, bins=100))):
        r = pb.measure(f, args)
        pb.emit({
            "bench": "search", "case": case, "impl": "torch", "variant": "eager", "n": n,
            "value": 1e3 * r["median_s"], "unit": "ms", **r,
        }, args, ctx)


if __name__ == "__main__":
    main()
