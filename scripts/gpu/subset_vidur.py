#!/usr/bin/env python3
"""Compact, deterministic copy of Vidur's profiling data for datasets/gpus/vidur.

Reads <src>/profiling/ (microsoft/vidur data/profiling at commit
7d47513363ec447a741ac5e47241580b47724fbf) and writes the same layout under <out>
with only the columns `scaledl import vidur` reads (libscaledl/src/gpudata/vidur.cpp):

  compute/<gpu>/<org>/<model>/mlp.csv: one model per family (MODELS), the rows of
      every 8th distinct num_tokens counted from the largest (so 4096, or 32768 for
      Llama-3, is kept), every TP degree; the time_stats.<op>.median columns and
      the model and shape columns.
  network/<node type>/{all_reduce,send_recv}.csv: for each power of two from
      64 KiB up, the rows of the smallest size >= it; the median, rank, num_workers,
      size, collective and devices_per_node columns. Equal inputs give equal outputs,
      so a byte-identical upstream copy stays one here.

Usage: python3 scripts/gpu/subset_vidur.py --src ../shared/data/vidur --out datasets/gpus/vidur
"""
import argparse
import csv
import io
import os
import shutil

# One model per family (Llama-2, Llama-3, CodeLlama, InternLM, Qwen, phi).
MODELS = [
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Meta-Llama-3-8B",
    "codellama/CodeLlama-34b-Instruct-hf",
    "internlm/internlm-20b",
    "Qwen/Qwen-72B",
    "microsoft/phi-2",
]
SHAPE_COLUMNS = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
                 "num_tokens", "num_tensor_parallel_workers"]
TOKEN_STRIDE = 8
MIN_BYTES = 64 * 1024


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise SystemExit(f"{path}: empty file")
    return rows[0], rows[1:]


def write_csv(path, header, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    with open(path, "w", newline="") as f:
        f.write(buf.getvalue())


def project(header, rows, keep, path):
    missing = [c for c in keep if c not in header]
    if missing:
        raise SystemExit(f"{path}: the header lacks {', '.join(missing)}")
    idx = [header.index(c) for c in keep]
    return [[r[i] for i in idx] for r in rows]


def subset_mlp(src, out):
    header, rows = read_csv(src)
    medians = [c for c in header if c.startswith("time_stats.") and c.endswith(".median")]
    keep = medians + SHAPE_COLUMNS
    it = header.index("num_tokens")
    tokens = sorted({int(float(r[it])) for r in rows})
    chosen = {t for i, t in enumerate(tokens) if (len(tokens) - 1 - i) % TOKEN_STRIDE == 0}
    kept = [r for r in rows if int(float(r[it])) in chosen]
    write_csv(out, keep, project(header, kept, keep, src))
    return len(kept)


def subset_network(src, out, stem):
    header, rows = read_csv(src)
    keep = [f"time_stats.{stem}.median", "rank", "num_workers", "size", "collective", "devices_per_node"]
    isz = header.index("size")
    sizes = sorted({int(float(r[isz])) for r in rows})
    chosen = set()
    p = MIN_BYTES
    while sizes and p <= sizes[-1]:
        chosen.add(min(s for s in sizes if s >= p))
        p *= 2
    kept = [r for r in rows if int(float(r[isz])) in chosen]
    write_csv(out, keep, project(header, kept, keep, src))
    return len(kept)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="Vidur data folder (with profiling/)")
    ap.add_argument("--out", required=True, help="output folder (datasets/gpus/vidur)")
    a = ap.parse_args()
    prof = os.path.join(a.src, "profiling")
    compute = os.path.join(prof, "compute")
    network = os.path.join(prof, "network")
    for gpu in sorted(os.listdir(compute)):
        for model in MODELS:
            f = os.path.join(compute, gpu, model, "mlp.csv")
            if os.path.isfile(f):
                n = subset_mlp(f, os.path.join(a.out, "profiling", "compute", gpu, model, "mlp.csv"))
                print(f"compute/{gpu}/{model}/mlp.csv: {n} rows")
    for node in sorted(os.listdir(network)):
        for stem in ("all_reduce", "send_recv"):
            f = os.path.join(network, node, stem + ".csv")
            if os.path.isfile(f):
                n = subset_network(f, os.path.join(a.out, "profiling", "network", node, stem + ".csv"), stem)
                print(f"network/{node}/{stem}.csv: {n} rows")
    shutil.copyfile(os.path.join(a.src, "LICENSE"), os.path.join(a.out, "LICENSE"))


if __name__ == "__main__":
    main()
