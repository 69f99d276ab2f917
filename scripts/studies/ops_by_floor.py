#!/usr/bin/env python3
"""Per-operator leave-one-GPU-out errors split by the host's timing floor, from the
per-row CSVs of `scaledl eval layers --predictions` (docs/unseen-gpu.md, "Sustained bandwidth").

    python3 scripts/studies/ops_by_floor.py "LABEL=rows.csv" [...]

The floor of a (GPU, operator type) is its fastest row: what timing one operator costs
the measuring host (24-58 us on NeuSight's hosts, 11-14 us on ours). Rows near it measure
the host, rows well above it the GPU. For each CSV: MRE % (signed bias %) per held-out GPU
over all rows, over the rows at >= 3x their floor, per type over those rows, and over all
rows with each prediction raised to the held-out host's floor (max(prediction, floor):
what a known host floor would add).
"""
import collections
import csv
import sys


def table(label, path):
    rows = list(csv.DictReader(open(path)))
    floor = collections.defaultdict(lambda: float("inf"))
    for r in rows:
        k = (r["device"], r["type"])
        floor[k] = min(floor[k], float(r["measured_ms"]))
    devices = sorted({r["device"] for r in rows})
    name = lambda d: d.split(":", 1)[-1].replace("NVIDIA ", "").replace("Tesla ", "")

    def cell(sel, pred=lambda r: float(r["predicted_ms"])):
        by = collections.defaultdict(list)
        for r in rows:
            if not sel(r):
                continue
            t = float(r["measured_ms"])
            e = (pred(r) - t) / t
            by[r["device"]].append(e)
            by["all"].append(e)
        out = []
        for d in ["all"] + devices:
            v = by.get(d, [])
            out.append(f"{100 * sum(map(abs, v)) / len(v):.1f} ({100 * sum(v) / len(v):+.0f})" if v else "")
        return out

    above = lambda r: float(r["measured_ms"]) >= 3 * floor[(r["device"], r["type"])]
    print(f"\n{label} (`{path}`): MRE % per held-out GPU (signed bias % in brackets)\n")
    print("| rows | all | " + " | ".join(name(d) for d in devices) + " |")
    print("|---" * (len(devices) + 2) + "|")
    print("| all rows | " + " | ".join(cell(lambda r: True)) + " |")
    print("| rows >= 3x their floor | " + " | ".join(cell(above)) + " |")
    for t in sorted({r["type"] for r in rows}):
        print(f"| {t}, >= 3x floor | " + " | ".join(cell(lambda r, t=t: r["type"] == t and above(r))) + " |")
    print("| all rows, max(prediction, held-out floor) | " +
          " | ".join(cell(lambda r: True, lambda r: max(float(r["predicted_ms"]), floor[(r["device"], r["type"])])))
          + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: ops_by_floor.py LABEL=rows.csv [...]")
    for a in sys.argv[1:]:
        label, _, path = a.partition("=")
        table(label, path)
