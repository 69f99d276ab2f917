#!/usr/bin/env python3
"""Sums a NeuSight label's per-node trace into an iteration and compares it with
the label: the nodes of block 0 (the first through the last node named
`layer_0` / `h_0`) times the label's layer count, plus every other node once.
Nodes were timed one at a time, so a sum above the label means operators timed
alone ran slower than inside the model (docs/unseen-gpu.md).

    python3 scripts/studies/trace_sum.py datasets/neusight/labels/Tesla_T4/bert_large-inf-512-8.csv --layers 24
"""
import argparse
import csv
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="labels/<GPU>/<label>.csv (datasets/neusight keeps these)")
    ap.add_argument("--layers", type=int, required=True, help="transformer blocks of the labelled model")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.trace)))
    in0 = [i for i, r in enumerate(rows) if re.search(r"(layer|h)_0(_|$)", r["Name"])]
    if not in0:
        sys.exit(f"{a.trace}: no node of block 0 (a name with layer_0 or h_0)")
    ms = [float(r["fw_latency"] or 0) for r in rows]
    block = sum(ms[in0[0]:in0[-1] + 1])
    est = block * a.layers + sum(ms) - block
    label = json.load(open(a.trace[:-4] + ".json"))["e2e_latency"]
    print(f"{a.trace}: block {block:.2f} ms x {a.layers} + rest {sum(ms) - block:.2f} ms = {est:.1f} ms; "
          f"label {label:.1f} ms ({100 * (est / label - 1):+.1f} %)")


if __name__ == "__main__":
    main()
