#!/usr/bin/env python3
"""Per GPU of NeuSight-layout operator sets (docs/unseen-gpu.md, "Operators on the
H100 and H200"): the best FP32 GEMM rate among its linear rows as a share of its
spec-sheet FP32 peak, and its timing floor (the fastest row of any operator).
With --by-alignment (docs/unseen-gpu.md, "What limits the targets"): the median share
of the peak of its linear rows of 1 ms or more (ops/linear and ops-transformer-shapes)
whose M, N and K are all multiples of 4 ("aligned") and of the others ("odd"), and of
those above and below 50 ms.
With --by-duration (docs/unseen-gpu.md, "Odd shapes and the T4's clock"): the same median
shares by alignment (M, N and K multiples of 4; only K; none) and duration (1-5, 5-50 and
above 50 ms), so that a power limit (a share falling with duration at every alignment) and
an architecture's cost of odd shapes (at every duration) can be told apart.
Standard library only.

    python3 scripts/studies/gemm_efficiency.py [--by-alignment | --by-duration] datasets/neusight datasets/h100/neusight-ops ...
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


def shares(root, gpu, rows):
    """(M x N x K alignment class, duration class, share of the FP32 peak) of the rows of 1 ms or more."""
    peak = peak_gflops(root, gpu)
    shapes = os.path.join(root, "ops-transformer-shapes", "linear.csv")
    if os.path.exists(shapes):
        rows = rows + [r for r in csv.DictReader(open(shapes)) if r["Device"].replace(" ", "_") == gpu]
    for r in rows:
        ms = float(r["Latency"])
        if ms < 1:
            continue
        m, n, k = int(r["B"]) * int(r["M"]), int(r["N"]), int(r["K"])
        al = "aligned" if all(d % 4 == 0 for d in (m, n, k)) else "K only" if k % 4 == 0 else "odd"
        dur = "above 50 ms" if ms > 50 else "5-50 ms" if ms > 5 else "1-5 ms"
        yield al, dur, 2 * m * n * k / (ms * 1e-3) / (peak * 1e9)


def by_duration(roots):
    cols = [(a, d) for a in ("aligned", "K only", "odd") for d in ("1-5 ms", "5-50 ms", "above 50 ms")]
    for root, gpu, rows in linear_sets(roots, [f"{a}, {d}" for a, d in cols]):
        groups = {}
        for al, dur, share in shares(root, gpu, rows):
            groups.setdefault((al, dur), []).append(share)
        cells = [f"{median(groups[c]):.2f} ({len(groups[c])})" if c in groups else "" for c in cols]
        print(f"| {gpu} | " + " | ".join(cells) + " |")


def by_alignment(roots):
    header = ["aligned", "odd", "rows", "above 50 ms", "below 50 ms"]
    for root, gpu, rows in linear_sets(roots, header):
        groups = {"aligned": [], "odd": [], "long": [], "short": []}
        for al, dur, share in shares(root, gpu, rows):
            groups["aligned" if al == "aligned" else "odd"].append(share)
            groups["long" if dur == "above 50 ms" else "short"].append(share)
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
    mode = [a for a in args if a.startswith("--")]
    args = [a for a in args if not a.startswith("--")]
    if not args or len(mode) > 1 or (mode and mode[0] not in ("--by-alignment", "--by-duration")):
        sys.exit(__doc__)
    {"--by-alignment": by_alignment, "--by-duration": by_duration}.get(mode[0] if mode else "", main)(args)
