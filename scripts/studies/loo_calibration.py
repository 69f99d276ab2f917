#!/usr/bin/env python3
"""Leave one GPU out, then calibrate the held-out GPU by K of its own timings (docs/results/gpus/README.md).

    python3 scripts/studies/loo_calibration.py PREDICTIONS.csv K [--type linear] [--draws 5] [--regimes]

PREDICTIONS.csv: what `scaledl eval layers --leave-one-out device --predictions F` writes. For
each held-out GPU and dtype, K rows are drawn as `predict --calibrate` would use them (kernel
time >= 50 us, GEMM dims M, N, K multiples of 8; libscaledl/include/scaledl/learn/calibration.hpp),
their median log(measured / predicted) scales the GPU's other rows, and those are scored.
Prints the MAPE per GPU and dtype (first draw) and over all draws, spec sheet vs calibrated.
--regimes: one factor per GEMM regime instead (m <= 128 or not, weights in half the L2 or not;
gemm_error_split.py; a GPU without a sheet under models/devices has no L2 here), where the drawn
rows hold at least 3 of it; the GPU's one factor elsewhere.
"""
import argparse
import collections
import csv
import math
import random

from gemm_error_split import load_specs, regime  # same folder


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("predictions")
    ap.add_argument("k", type=int)
    ap.add_argument("--type", default="linear")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--regimes", action="store_true")
    a = ap.parse_args()
    l2 = {name: spec["l2_mb"] for name, spec in load_specs().items()}
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
            by_regime = collections.defaultdict(list)
            for i in picked:
                by_regime[regime(rs[i][0], dtype, l2.get(gpu, 0.0))].append(math.log(rs[i][1] / rs[i][2]))
            regime_factor = {r: math.exp(sorted(v)[len(v) // 2]) for r, v in by_regime.items() if len(v) >= 3}
            rest = [r for i, r in enumerate(rs) if i not in picked]
            e0 = [abs(p - t) / t * 100 for _, t, p in rest]
            if a.regimes:
                e1 = [abs(p * regime_factor.get(regime(d, dtype, l2.get(gpu, 0.0)), factor) - t) / t * 100
                      for d, t, p in rest]
            else:
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
