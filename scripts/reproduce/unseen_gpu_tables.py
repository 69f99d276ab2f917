#!/usr/bin/env python3
"""Markdown tables of the unseen-GPU protocol (docs/results/unseen-gpu/README.md):
  python3 scripts/reproduce/unseen_gpu_tables.py e2e DIR...      end-to-end leave-one-GPU-out (scaledl eval reports)
  python3 scripts/reproduce/unseen_gpu_tables.py ops NAME=JSON... per-operator leave-one-GPU-out (scaledl eval layers --json)
Standard library only."""
import csv
import collections
import json
import os
import sys


NEUSIGHT_GPUS = ("A100-PCIE-40GB", "P100-PCIE-16GB", "Tesla P4", "Tesla T4", "V100-PCIE-32GB")


def short(dev):
    return dev.split(":", 1)[-1].replace("NVIDIA ", "").replace("Tesla ", "")


def e2e(dirs):
    for d in dirs:
        rep = json.load(open(os.path.join(d, "report.json")))
        rows = rep["summary"]
        groups = sorted({r["family"] for r in rows if r["family"].startswith("device ") and
                         r["family"].rsplit(" ", 1)[-1] in ("inference", "fwd-bwd", "train")})
        print(f"\n`{d}` ({rep['seeds']} seeds; MRE % mean ± sd over seeds, signed bias % in brackets)\n")
        print("| method | all | " + " | ".join(f"{short(g[7:].rsplit(' ', 1)[0])} {g.rsplit(' ', 1)[-1]}"
                                               for g in groups) + " |")
        print("|---|---|" + "---|" * len(groups))
        for m in rep["methods"]:
            cells = []
            for g in ["all"] + groups:
                r = next((x for x in rows if x["method"] == m and x["family"] == g), None)
                cells.append("–" if r is None else f"{r['mre_pct']:.1f} ± {r['mre_sd']:.1f} ({r['bias_pct']:+.0f})")
            print(f"| {m} | " + " | ".join(cells) + " |")
        # Per run: measured and the mean prediction over seeds of every method.
        pred = collections.defaultdict(list)
        meas = {}
        for p in csv.DictReader(open(os.path.join(d, "predictions.csv"))):
            k = (short(p["device"]), p["model"], p.get("mode", ""), int(p["batch"]), int(p["seq_len"]))
            meas[k] = float(p["measured_ms"])
            pred[(k, p["method"])].append(float(p["predicted_ms"]))
        print("\nPer run (mean prediction over seeds, APE %):\n")
        print("| GPU | model | mode | batch | seq | measured ms | " + " | ".join(rep["methods"]) + " |")
        print("|---|---|---|---|---|---|" + "---|" * len(rep["methods"]))
        for k in sorted(meas):
            cells = []
            for m in rep["methods"]:
                v = pred.get((k, m))
                if not v:
                    cells.append("–")
                    continue
                mean = sum(v) / len(v)
                cells.append(f"{mean:.1f} ({100 * abs(mean - meas[k]) / meas[k]:.0f})")
            print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {meas[k]:.1f} | " + " | ".join(cells) + " |")


def ops(args):
    for a in args:
        name, path = a.split("=", 1)
        res = json.load(open(path))["default"]["results"]
        res = [r for r in res if r["method"] == "xgboost"]
        devs = sorted({r["device"] for r in res} - {"all"})
        types = sorted({r["type"] for r in res} - {"all"})
        # With GPUs beyond NeuSight's five, also their five pooled (row-weighted), comparable
        # with the five-GPU protocol's "all".
        five = [d for d in devs if any(g in d for g in NEUSIGHT_GPUS)]
        extra = len(five) < len(devs)
        print(f"\n{name} (`{path}`): MRE % of xgboost per held-out GPU (signed bias % in brackets)\n")
        print("| type | all | " + ("NeuSight's five | " if extra else "") + " | ".join(short(d) for d in devs) + " |")
        print("|---|---|" + ("---|" if extra else "") + "---|" * len(devs))
        for t in ["all"] + types:
            cells = []
            for d in ["all"] + (["five"] if extra else []) + devs:
                if d == "five":
                    rs = [x for x in res if x["type"] == t and x["device"] in five]
                    n = sum(x["n"] for x in rs)
                    cells.append("–" if n == 0 else "%.1f (%+.0f)" % (
                        sum(x["mre_pct"] * x["n"] for x in rs) / n, sum(x.get("bias_pct", 0) * x["n"] for x in rs) / n))
                    continue
                r = next((x for x in res if x["type"] == t and x["device"] == d), None)
                cells.append("–" if r is None else f"{r['mre_pct']:.1f} ({r.get('bias_pct', 0):+.0f})")
            print(f"| {t} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("e2e", "ops"):
        sys.exit(__doc__)
    (e2e if sys.argv[1] == "e2e" else ops)(sys.argv[2:])
