#!/usr/bin/env python3
"""MRE % (mean APE), p90 and signed bias (geometric mean of predicted / measured) per
model_type of the cpu-llamas runs, from an `scaledl eval` predictions.csv(.gz).
Usage: by_type.py PRED.csv[.gz] [PRED2 ...] (one column group per file, `label=PATH` names it)."""
import csv, gzip, math, sys
from collections import defaultdict

def read(path):
    op = gzip.open if path.endswith(".gz") else open
    rows = defaultdict(lambda: defaultdict(list))  # method -> type -> [(measured, predicted)]
    with op(path, "rt") as f:
        for r in csv.DictReader(f):
            if r.get("sweep", "0") != "0":  # the training machine's sweep runs, reported beside the test
                continue
            seeds.add(r["seed"])
            t = r["model"].split("[", 1)[0]
            t = "llama-style" if t.startswith("TinyLlama") else t  # its config's _name_or_path
            rows[r["method"]][t].append((float(r["measured_ms"]), float(r["predicted_ms"])))
    return rows

def stats(v):
    ape = sorted(abs(p - m) / m * 100 for m, p in v)
    bias = (math.exp(sum(math.log(p / m) for m, p in v) / len(v)) - 1) * 100
    return f"{sum(ape) / len(ape):.1f} ({ape[int(0.9 * (len(ape) - 1))]:.0f}, {bias:+.0f})"

seeds = set()
files = [a.split("=", 1) if "=" in a else (a, a) for a in sys.argv[1:]]
data = [(label, read(path)) for label, path in files]
methods = sorted({m for _, d in data for m in d})
types = sorted({t for _, d in data for m in d for t in d[m]}, key=lambda t: (t != "llama-style", t))
head = [f"{label} {m}" for label, _ in data for m in methods]
print(f"MRE % (p90, bias %) per model_type, over {len(seeds)} seed(s)")
print("| model_type (runs) | " + " | ".join(head) + " |")
print("|---" * (len(head) + 1) + "|")
for t in types + ["all"]:
    cells, n = [], 0
    for _, d in data:
        for m in methods:
            v = [x for tt, xs in d[m].items() for x in xs] if t == "all" else d[m].get(t, [])
            n = max(n, len(v))
            cells.append(stats(v) if v else "-")
    print(f"| {t} ({n // max(1, len(seeds))}) | " + " | ".join(cells) + " |")
