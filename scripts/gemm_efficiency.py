#!/usr/bin/env python3
"""Per GPU of NeuSight-layout operator sets (docs/unseen-gpu.md, "Operators on the
H100 and H200"): the best FP32 GEMM rate among its linear rows as a share of its
spec-sheet FP32 peak, and its timing floor (the fastest row of any operator).
Standard library only.

    python3 scripts/gemm_efficiency.py datasets/neusight datasets/h100/neusight-ops datasets/h200/neusight-ops
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


def main(roots):
    print("| GPU | best FP32 GEMM, GFLOP/s | spec peak | share | fastest row, µs |")
    print("|---|---|---|---|---|")
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "ops", "linear", "*.csv"))):
            gpu = os.path.basename(path)[:-4]
            best = max(2 * int(r["M"]) * int(r["N"]) * int(r["K"]) / float(r["Latency"]) / 1e6
                       for r in csv.DictReader(open(path)))
            floor = min(float(r["Latency"]) for p in glob.glob(os.path.join(root, "ops", "*", gpu + ".csv"))
                        for r in csv.DictReader(open(p)))
            peak = peak_gflops(root, gpu)
            print(f"| {gpu} | {best:,.0f} | {peak:,.0f} | {100 * best / peak:.0f} % | {1000 * floor:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
