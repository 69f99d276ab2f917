#!/usr/bin/env python3
"""Leave one GPU out, then calibrate the held-out GPU by K of its own timings (docs/results/gpus/README.md).

    python3 scripts/studies/loo_calibration.py PREDICTIONS.csv K [--type linear] [--draws 5]

PREDICTIONS.csv: what `scaledl eval layers --leave-one-out device --predictions F` writes. For
each held-out GPU and dtype, K rows are drawn as `predict --calibrate` would use them (kernel
time >= 50 us, GEMM dims M, N, K multiples of 8; libscaledl/include/scaledl/learn/calibration.hpp),
their median log(measured / predicted) scales the GPU's other rows, and those are scored.
Prints the MAPE per GPU and dtype (first draw) and over all draws, spec sheet vs calibrated.
"""
import argparse
import collections
import csv
import math
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("predictions")
    ap.add_argument("k", type=int)
    ap.add_argument("--type", default="linear")
    ap.add_argument("--draws", type=int, default=5)
    a = ap.parse_args()
    rows = collections.defaultdict(list)
    with open(a.predictions, newline="") as f:
        for r in csv.DictReader(f):
            if r["type"] == a.type and r["direction"] == "fwd":
                rows[(r["device"].split(":", 1)[1], r["dtype"])].append(
                    (r["dims"], float(r["measured_ms"]), float(r["predicted_ms"])))
    spec, cal = collections.defaultdict(list), collections.defaultdict(list)
    for draw in range(a.draws):
        rnd = random.Random(draw)
        for (gpu, dtype), rs in sorted(rows.items()):
            usable = [i for i, (d, t, _) in enumerate(rs)
                      if t >= 0.05 and all(int(v) % 8 == 0 for v in d.split("x")[:3])]
            if len(usable) < a.k + 5:
                continue
            picked = set(rnd.sample(usable, a.k))
            logs = sorted(math.log(rs[i][1] / rs[i][2]) for i in picked)
            factor = math.exp(logs[len(logs) // 2])
            rest = [r for i, r in enumerate(rs) if i not in picked]
            e0 = [abs(p - t) / t * 100 for _, t, p in rest]
            e1 = [abs(p * factor - t) / t * 100 for _, t, p in rest]
            spec[dtype] += e0
            cal[dtype] += e1
            if draw == 0:
                print(f"{gpu} {dtype}: spec sheet {sum(e0) / len(e0):.1f} %, "
                      f"calibrated by {a.k} {sum(e1) / len(e1):.1f} %")
    for dtype in sorted(spec):
        print(f"all {dtype}: spec sheet {sum(spec[dtype]) / len(spec[dtype]):.1f} %, "
              f"calibrated by {a.k} {sum(cal[dtype]) / len(cal[dtype]):.1f} % ({a.draws} draws)")


if __name__ == "__main__":
    main()
