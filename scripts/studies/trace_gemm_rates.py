#!/usr/bin/env python3
"""The FP32 share of the spec peak that each GPU's linear layers reach inside NeuSight's
per-node traces (datasets/neusight/labels/*/*.csv, inference runs: one forward time per
torch.fx node) against the same GPU's aligned operator rows timed alone (M, N, K
multiples of 8, 50 us or more), medians (docs/unseen-gpu.md, "What limits the targets").

    scaledl import neusight --root datasets/neusight --db ns.sqlite
    python3 scripts/studies/trace_gemm_rates.py ns.sqlite
"""
import ast
import csv
import glob
import json
import os
import sqlite3
import statistics as st
import sys

csv.field_size_limit(10**9)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    peak = {}
    for (rec,) in db.execute("select record from devices"):
        r = json.loads(rec)
        peak[r["name"]] = r["peak_fp32_gflops"]
    alone = {}
    for dev, dims, ms in db.execute(
            "select device, dims, fwd_median_ms from layers where layer_type = 'linear' and status = 'ok'"):
        m, k, n = json.loads(dims)[:3]
        name = dev.split(":", 1)[1]
        if m % 8 or n % 8 or k % 8 or ms < 0.05 or name not in peak:
            continue
        alone.setdefault(name, []).append(2 * m * n * k / ms / 1e6 / peak[name])
    print("| GPU | linear nodes in traces | share of peak in the traces | aligned rows alone | share alone |")
    print("|---|---|---|---|---|")
    for d in sorted(glob.glob("datasets/neusight/labels/*/")):
        folder = os.path.basename(d.rstrip("/")).replace("_", " ")
        name = next((p for p in peak if p.replace("-", " ") == folder.replace("-", " ")), None)
        if name is None:
            continue
        inside = []
        for f in glob.glob(d + "*-inf-*.csv"):
            for r in csv.DictReader(open(f)):
                if r["op"] != "call_module" or r["kernel"] != "Linear":
                    continue
                shape = ast.literal_eval(r["input_shapes"])[0]
                rows = 1
                for x in shape[:-1]:
                    rows *= x
                t = float(r["fw_latency"])
                out = ast.literal_eval(r["output_shape"])[-1]
                if t > 0:
                    inside.append(2 * rows * shape[-1] * out / t / 1e6 / peak[name])
        if inside and alone.get(name):
            print(f"| {name} | {len(inside)} | {st.median(inside):.2f} | {len(alone[name])} | "
                  f"{st.median(alone[name]):.2f} |")


if __name__ == "__main__":
    main()
