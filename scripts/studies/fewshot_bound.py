#!/usr/bin/env python3
"""How far a few measured operators of the held-out GPU would take the per-operator
error (docs/unseen-gpu.md, "What limits the targets"): from the rows that
`scaledl eval layers --leave-one-out device --predictions FILE` writes, draw K rows of
each held-out GPU and operator type as if measured, fit a correction of the prediction
on them, and score the other rows. Not a product path: a bound on what a short
benchmark on the GPU could give.

    python3 scripts/studies/fewshot_bound.py FILE.csv [--rows K] [--seeds 5]

Corrections, per GPU and type, in log(measured / predicted):
  median  the median of the K rows' log ratios
  linear  a ridge fit (lambda 1) on [1, all GEMM dims a multiple of 8, log predicted ms]
Prints the MRE % per type and in all, without and with each correction.
"""
import argparse
import collections
import csv
import math
import random


def ridge(X, y, lam):
    """Solves (X'X + lam I) w = X'y by Gaussian elimination (a few columns)."""
    n = len(X[0])
    A = [[sum(x[i] * x[j] for x in X) + (lam if i == j else 0) for j in range(n)] for i in range(n)]
    b = [sum(x[i] * t for x, t in zip(X, y)) for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            f = A[j][i] / A[i][i]
            for k in range(i, n):
                A[j][k] -= f * A[i][k]
            b[j] -= f * b[i]
    w = [0.0] * n
    for i in reversed(range(n)):
        w[i] = (b[i] - sum(A[i][k] * w[k] for k in range(i + 1, n))) / A[i][i]
    return w


def aligned(kind, dims):
    if kind == "linear":
        mkn = dims[:3]
    elif kind == "bmm":
        mkn = dims[1:4]
    else:
        return 0.0
    return 1.0 if all(d % 8 == 0 for d in mkn) else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("predictions")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    if a.rows < 3 or a.seeds < 1:
        ap.error("--rows must be >= 3 and --seeds >= 1")
    groups = collections.defaultdict(list)
    with open(a.predictions, newline="") as f:
        for r in csv.DictReader(f):
            m, p = float(r["measured_ms"]), float(r["predicted_ms"])
            dims = [int(x) for x in r["dims"].split("x")]
            groups[(r["device"], r["type"])].append((m, p, aligned(r["type"], dims)))
    err = collections.defaultdict(list)  # (type, method) -> relative errors
    for (_, kind), rows in sorted(groups.items()):
        if len(rows) <= a.rows:
            continue
        for seed in range(a.seeds):
            order = list(range(len(rows)))
            random.Random(seed).shuffle(order)
            fit = [rows[i] for i in order[: a.rows]]
            test = [rows[i] for i in order[a.rows :]]
            r = [math.log(m / p) for m, p, _ in fit]
            med = sorted(r)[len(r) // 2]
            w = ridge([[1.0, al, math.log(p)] for _, p, al in fit], r, 1.0)
            for m, p, al in test:
                for method, c in (("none", 0.0), ("median", med), ("linear", w[0] + w[1] * al + w[2] * math.log(p))):
                    e = abs(p * math.exp(c) - m) / m
                    err[(kind, method)].append(e)
                    err[("all", method)].append(e)
    print(f"K = {a.rows} rows per held-out GPU and type, {a.seeds} draws: MRE % of the other rows")
    print("| type | as predicted | median correction | linear correction |")
    print("|---|---|---|---|")
    for kind in sorted({k for k, _ in err}, key=lambda k: (k == "all", k)):
        cells = [f"{100 * sum(err[(kind, m)]) / len(err[(kind, m)]):.1f}" for m in ("none", "median", "linear")]
        print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
