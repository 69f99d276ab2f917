#!/usr/bin/env python3
"""MRE % (p90, bias %) per model_type and per campaign of this store, from an `scaledl eval`
predictions.csv(.gz) of it: the llama-style runs were timed twice, with the first 36 runs
(cpu-deepseek-models, 01:42-01:47 UTC) and again with the gpt-oss runs (cpu-deepseek-recheck,
03:08 UTC), so that each type can be set beside llama-style timed in the same minutes.
Usage: by_campaign.py label=PRED.csv[.gz] [label=PRED2 ...]"""
import csv, gzip, math, os, sqlite3, sys
from collections import defaultdict

here = os.path.dirname(os.path.abspath(__file__))
runs = defaultdict(list)  # model name -> [(measured ms, campaign)]
for name, ms, c in sqlite3.connect(os.path.join(here, "cpu-deepseek.sqlite")).execute(
        "select model_name, iter_median_ms, campaign from models"):
    runs[name].append((ms, c))

def campaign(name, ms):  # the run of that name whose time the CSV prints (6 significant digits)
    return min(runs[name], key=lambda r: abs(r[0] - ms))[1]

def stats(v):
    ape = sorted(abs(p - m) / m * 100 for m, p in v)
    bias = (math.exp(sum(math.log(p / m) for m, p in v) / len(v)) - 1) * 100
    return f"{sum(ape) / len(ape):.1f} ({ape[int(0.9 * (len(ape) - 1))]:.0f}, {bias:+.0f})"

cols, rows = [], defaultdict(dict)
for arg in sys.argv[1:]:
    label, path = arg.split("=", 1)
    cols.append(label)
    groups = defaultdict(list)
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        for r in csv.DictReader(f):
            if r.get("sweep", "0") != "0":
                continue
            m, p = float(r["measured_ms"]), float(r["predicted_ms"])
            c = campaign(r["model"], m)
            t = r["model"].split("[", 1)[0]
            t = "llama-style" if t.startswith("TinyLlama") else t
            groups[(c.replace("cpu-deepseek-", ""), t)].append((m, p))
    for k, v in groups.items():
        rows[k][label] = f"{stats(v)} n={len(v)}"
print("| campaign | model_type | " + " | ".join(cols) + " |")
print("|---|---|" + "---|" * len(cols))
for k in sorted(rows, key=lambda k: (k[0], k[1] != "llama-style", k[1])):
    print(f"| {k[0]} | {k[1]} | " + " | ".join(rows[k].get(c, "-") for c in cols) + " |")
