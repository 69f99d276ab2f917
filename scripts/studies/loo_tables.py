#!/usr/bin/env python3
"""Markdown tables of a leave-one-GPU-out run from its per-row predictions.

    python3 scripts/studies/loo_tables.py PREDICTIONS.csv [--method xgboost] > tables.md

PREDICTIONS.csv is what `scaledl eval layers --leave-one-out device --predictions F` writes
(method,fold,device,type,dims,dtype,direction,measured_ms,predicted_ms). Prints, per layer
type, direction and dtype: the MAPE over every held-out GPU's rows (each GPU predicted by
layer models that never saw it), the median of the per-GPU MAPEs, the MAPE over the rows of
at least 20 us of kernel time (a row's measured_ms is its kernel time: the harness's timing
floor taken off, so a faster row is mostly what is left of that floor), and one column per GPU.
MAPE = mean |predicted - measured| / measured, in %.
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict

LONG_MS = 0.02  # rows of at least this kernel time (ms) get a MAPE of their own


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("predictions")
    ap.add_argument("--method", default="xgboost")
    a = ap.parse_args()
    err = defaultdict(list)  # (type, dir, dtype, gpu) -> relative errors
    long_err = defaultdict(list)  # (type, dir, dtype) -> relative errors of rows >= LONG_MS
    with open(a.predictions, newline="") as f:
        for r in csv.DictReader(f):
            if r["method"] != a.method:
                continue
            m, p = float(r["measured_ms"]), float(r["predicted_ms"])
            if m <= 0:
                sys.exit(f"loo_tables: measured_ms={m} in {a.predictions}")
            err[(r["type"], r["direction"], r["dtype"], r["fold"])].append(abs(p - m) / m)
            if m >= LONG_MS:
                long_err[(r["type"], r["direction"], r["dtype"])].append(abs(p - m) / m)
    groups = sorted({k[:3] for k in err})
    gpus = sorted({k[3] for k in err})
    print("| type | dir | dtype | rows | MAPE % (all rows) | median of GPUs % | GPUs | rows >= 20 us | MAPE % of those |")
    print("|---|---|---|---|---|---|---|---|---|")
    alone = []
    for g in groups:
        per = {gpu: err[g + (gpu,)] for gpu in gpus if g + (gpu,) in err}
        rows = [e for v in per.values() for e in v]
        if len(per) < 2:  # one GPU has this kind: held out, no GPU in training has it
            alone.append(f"{g[0]} {g[1]} {g[2]} ({next(iter(per))}: {100 * statistics.mean(rows):.0f} %)")
            continue
        med = statistics.median(100 * statistics.mean(v) for v in per.values())
        lng = long_err.get(g, [])
        lmape = f"{100 * statistics.mean(lng):.1f}" if lng else ""
        print(f"| {g[0]} | {g[1]} | {g[2]} | {len(rows)} | {100 * statistics.mean(rows):.1f} | {med:.1f} | {len(per)} "
              f"| {len(lng)} | {lmape} |")
    groups = [g for g in groups if sum(g + (gpu,) in err for gpu in gpus) >= 2]
    if alone:
        print()
        print("Kinds only one GPU has (held out, no training GPU has them, so an extrapolation "
              "from other dtypes or directions): " + "; ".join(alone) + ".")
    print()
    print("Per held-out GPU (MAPE %, rows):")
    print()
    print("| GPU | " + " | ".join(f"{t} {d} {dt}" for t, d, dt in groups) + " |")
    print("|---|" + "---|" * len(groups))
    for gpu in gpus:
        cells = []
        for g in groups:
            v = err.get(g + (gpu,))
            cells.append(f"{100 * statistics.mean(v):.1f} ({len(v)})" if v else "")
        print(f"| {gpu} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
