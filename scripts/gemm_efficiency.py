#!/usr/bin/env python3
"""Per GPU of NeuSight-layout operator sets (docs/unseen-gpu.md, "Operators on the
H100 and H200"): the best FP32 GEMM rate among its linear rows as a share of its
spec-sheet FP32 peak, and its timing floor (the fastest row of any operator).
With --by-alignment (docs/unseen-gpu.md, "What limits the targets"): the median share
of the peak of its linear rows of 1 ms or more (ops/linear and ops-transformer-shapes)
whose M, N and K are all multiples of 4 ("aligned") and of the others ("odd"), and of
those above and below 50 ms.
Standard library only.

    python3 scripts/gemm_efficiency.py [--by-alignment] datasets/neusight datasets/h100/neusight-ops ...
"""
import csv
import glob
import json
import os
import sys


def peak_gflops(root, gpu):
    with open(os.path.join(root, "device_configs", gpu + ".json")) as f:
        d = json.load(f)
    return float(d.get("SingleFLOPs") or d.get("peak_fp32_gflops"))


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")


def linear_sets(roots, header):
    """Prints a table header, then yields (root, gpu, linear rows) of every GPU."""
    print("| GPU | " + " | ".join(header) + " |")
    print("|---" * (len(header) + 1) + "|")
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "ops", "linear", "*.csv"))):
            yield root, os.path.basename(path)[:-4], list(csv.DictReader(open(path)))


def by_alignment(roots):
    header = ["aligned", "odd", "rows", "above 50 ms", "below 50 ms"]
    for root, gpu, rows in linear_sets(roots, header):
        peak = peak_gflops(root, gpu)
        shapes = os.path.join(root, "ops-transformer-shapes", "linear.csv")
        if os.path.exists(shapes):
            rows += [r for r in csv.DictReader(open(shapes)) if r["Device"].replace(" ", "_") == gpu]
        groups = {"aligned": [], "odd": [], "long": [], "short": []}
        for r in rows:
            ms = float(r["Latency"])
            if ms < 1:
                continue
            mnk = [int(r["B"]) * int(r["M"]), int(r["N"]), int(r["K"])]
            share = 2 * mnk[0] * mnk[1] * mnk[2] / (ms * 1e-3) / (peak * 1e9)
            groups["aligned" if all(d % 4 == 0 for d in mnk) else "odd"].append(share)
            groups["long" if ms > 50 else "short"].append(share)
        n = len(groups["aligned"]) + len(groups["odd"])
        cells = [f"{median(groups[g]):.2f} ({len(groups[g])})" for g in ("aligned", "odd")]
        cells += [str(n)] + [f"{median(groups[g]):.2f}" for g in ("long", "short")]
        print(f"| {gpu} | " + " | ".join(cells) + " |")


def main(roots):
    header = ["best FP32 GEMM, GFLOP/s", "spec peak", "share", "fastest row, µs"]
    for root, gpu, rows in linear_sets(roots, header):
        best = max(2 * int(r["M"]) * int(r["N"]) * int(r["K"]) / float(r["Latency"]) / 1e6 for r in rows)
        floor = min(float(r["Latency"]) for p in glob.glob(os.path.join(root, "ops", "*", gpu + ".csv"))
                    for r in csv.DictReader(open(p)))
        peak = peak_gflops(root, gpu)
        print(f"| {gpu} | {best:,.0f} | {peak:,.0f} | {100 * best / peak:.0f} % | {1000 * floor:.1f} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    align = "--by-alignment" in args
    args = [a for a in args if a != "--by-alignment"]
    if not args:
        sys.exit(__doc__)
    by_alignment(args) if align else main(args)
