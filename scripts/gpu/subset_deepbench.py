#!/usr/bin/env python3
"""Compact, deterministic copy of the DeepBench tables for datasets/gpus/deepbench.

Reads <src>/{gemm,allreduce,specs}.csv (baidu-research/DeepBench results/train/*.xlsx
at commit da81ba7820739e2e506dc27f382d15be5479f98f, converted to CSV) and writes
every row of them to <out> with only the columns `scaledl import deepbench` reads
(libscaledl/src/gpudata/deepbench.cpp). conv.csv and rnn.csv are left out: the
importer maps none of their rows (no layer type of ours) and treats them as absent.

Usage: python3 scripts/gpu/subset_deepbench.py --src ../shared/data/deepbench --out datasets/gpus/deepbench
"""
import argparse
import csv
import io
import os
import shutil

COLUMNS = {
    "gemm.csv": ["device", "precision", "m", "n", "k", "a_transpose", "b_transpose", "time_ms"],
    "allreduce.csv": ["device", "algorithm", "size_bytes_fp32", "num_ranks", "num_nodes", "mean_ms", "std_ms",
                      "gbytes_per_s_reported"],
    "specs.csv": ["device", "key", "value"],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="DeepBench data folder (gemm.csv, allreduce.csv, specs.csv)")
    ap.add_argument("--out", required=True, help="output folder (datasets/gpus/deepbench)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, keep in COLUMNS.items():
        src = os.path.join(a.src, name)
        with open(src, newline="") as f:
            rows = list(csv.reader(f))
        header = rows[0]
        missing = [c for c in keep if c not in header]
        if missing:
            raise SystemExit(f"{src}: the header lacks {', '.join(missing)}")
        idx = [header.index(c) for c in keep]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(keep)
        for r in rows[1:]:
            w.writerow([r[i] for i in idx])
        with open(os.path.join(a.out, name), "w", newline="") as f:
            f.write(buf.getvalue())
        print(f"{name}: {len(rows) - 1} rows")
    shutil.copyfile(os.path.join(a.src, "LICENSE"), os.path.join(a.out, "LICENSE"))


if __name__ == "__main__":
    main()
