#!/usr/bin/python3
"""Compares symjax's rows of two or more bench/run result files, measured in one session.

Usage: tools/bench_compare.py BEFORE.jsonl AFTER.jsonl [BEFORE2.jsonl AFTER2.jsonl ...]

Files alternate before, after (runs interleaved so that drift of the machine hits both). Rows
are matched on every field that describes the case (bench, case, arch, batch, kind, steps,
width, load); each side's figure is the median over its files. Prints a Markdown table: the
figures, after/before as a speed ratio (above 1: faster; "ms" rows are inverted so that the
ratio always reads as speed), and a flag on rows slower by more than 3%.
"""
import json
import statistics
import sys

KEY_FIELDS = ("bench", "case", "arch", "batch", "kind", "steps", "width", "load")
LOWER_IS_BETTER = {"ms", "us", "s"}


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("impl") != "symjax":
                continue
            key = tuple((k, r[k]) for k in KEY_FIELDS if k in r)
            rows.setdefault(key, []).append((r["value"], r["unit"]))
    return rows


def main(paths):
    if len(paths) < 2 or len(paths) % 2:
        sys.exit(__doc__)
    before, after = {}, {}
    for i, p in enumerate(paths):
        side = before if i % 2 == 0 else after
        for k, vs in load(p).items():
            side.setdefault(k, []).extend(vs)
    print("| case | unit | before | after | speed after/before |")
    print("|---|---|---|---|---|")
    worst = None
    for k in before:
        if k not in after:
            continue
        unit = before[k][0][1]
        b = statistics.median(v for v, _ in before[k])
        a = statistics.median(v for v, _ in after[k])
        ratio = (b / a) if unit in LOWER_IS_BETTER else (a / b)
        flag = " **slower**" if ratio < 0.97 else ""
        name = " ".join(str(v) for _, v in k)
        print(f"| {name} | {unit} | {b:.4g} | {a:.4g} | {ratio:.3f}{flag} |")
        worst = ratio if worst is None else min(worst, ratio)
    if worst is not None:
        print(f"\nworst ratio: {worst:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
