#!/usr/bin/env python3
"""How much of each measured iteration the host's per-node cost explains.

Reads the predictions.csv of `scaledl eval` (its `nodes` column: the nodes of each
run's layer graph) and, per device, compares the method's prediction (default: the
plain sum of the layer models) with the two-resource form

    T = max(prediction, nodes x d)

where d (ms per graph node) is what the host needs to issue one node of an eager
iteration. d is fitted on a random half of the device's runs (the d minimising the
mean |log(T / measured)|) and scored on the other half, 20 times; the table gives the
MRE without and with the host term, the fitted d, and the smallest measured / nodes of
any run (a bound no run of that host went under).

    scaledl eval --db R.sqlite --protocol id --methods sum --seeds 3 --kernel-time --out DIR
    python3 scripts/studies/host_bound.py DIR/predictions.csv [--method sum]

Only the standard library: runs on a fresh machine.
"""
import argparse
import collections
import csv
import math
import random
import sys


def fit(runs):
    """d minimising sum |log(max(p, n d) / m)| over a grid up to the largest m / n."""
    top = max(m / n for n, p, m in runs)
    best, best_err = 0.0, sum(abs(math.log(p / m)) for n, p, m in runs)
    for i in range(1, 401):
        d = top * i / 400
        err = sum(abs(math.log(max(p, n * d) / m)) for n, p, m in runs)
        if err < best_err:
            best, best_err = d, err
    return best


def mre(runs, d):
    return 100 * sum(abs(max(p, n * d) / m - 1) for n, p, m in runs) / len(runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("predictions", help="predictions.csv of scaledl eval (with a nodes column)")
    ap.add_argument("--method", default="sum")
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    by_dev = collections.defaultdict(dict)  # device -> run key -> (nodes, [predictions], measured)
    with open(a.predictions, newline="") as f:
        reader = csv.DictReader(f)
        if "nodes" not in (reader.fieldnames or []):
            sys.exit(f"host_bound: {a.predictions} has no nodes column (written by scaledl eval since 2026-11-27)")
        for r in reader:
            if r["method"] != a.method:
                continue
            key = (r["model"], r["batch"], r["seq_len"], r["mode"], r["measured_ms"])
            e = by_dev[r["device"]].setdefault(key, [int(r["nodes"]), [], float(r["measured_ms"])])
            e[1].append(float(r["predicted_ms"]))
    if not by_dev:
        sys.exit(f"host_bound: no rows of method {a.method} in {a.predictions}")
    print(f"method {a.method}; d fitted on random halves of each device's runs, scored on the other half "
          f"({a.repeats} halves; devices with 8 runs or more)\n")
    print("| device | runs | MRE % | MRE % with max(T, nodes x d) | d, us per node (all runs) | smallest measured / nodes, us |")
    print("|---|---|---|---|---|---|")
    for dev, d in sorted(by_dev.items()):
        runs = [(n, sum(ps) / len(ps), m) for n, ps, m in d.values()]
        base, host = [], []
        rng = random.Random(0)
        enough = len(runs) >= 8  # a fit on fewer than 4 runs says nothing
        for _ in range(a.repeats if enough else 0):
            idx = list(range(len(runs)))
            rng.shuffle(idx)
            tr = [runs[i] for i in idx[: len(idx) // 2]]
            te = [runs[i] for i in idx[len(idx) // 2:]]
            dd = fit(tr)
            base.append(mre(te, 0))
            host.append(mre(te, dd))
        cv = (f"{sum(base) / len(base):.1f} | {sum(host) / len(host):.1f}" if base else "- | -")
        dfit = f"{1000 * fit(runs):.1f}" if enough else "-"
        print(f"| {dev} | {len(runs)} | {cv} | {dfit} | "
              f"{1000 * min(m / n for n, p, m in runs):.1f} |")


if __name__ == "__main__":
    main()
