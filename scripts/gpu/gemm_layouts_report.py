#!/usr/bin/env python3
"""Sets the linear layers that scripts/gpu/gpu_gemm_layouts.sh timed against AIConfigurator's
forward-only GEMM table of the same GPU (datasets/gpus/aiconfigurator/<gpu>/gemm.csv, NT layout,
TensorRT-LLM, CUDA-graph replay): how far a forward table carries to our forward (the harness)
and to the backward (dgrad (m, k, n) + wgrad (n, k, m), other layouts), which the public tables
never time (docs/gpu-data.md, "Backward GEMMs").

    python3 scripts/gpu/gemm_layouts_report.py --db STORE --gpu h200_sxm [--campaign gemm-layouts] > report.md

Prints one row per layer (ours fwd and bwd, the table's three GEMMs, the ratios) and the medians
of fwd / table(fwd) and bwd / (table(dgrad) + table(wgrad)). A layer whose GEMMs are not all in the
table gets "-" ratios.
"""
import argparse
import csv
import json
import os
import sqlite3
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--gpu", required=True, help="AIConfigurator GPU folder (h200_sxm, h100_sxm)")
    ap.add_argument("--campaign", default="gemm-layouts")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--table-root", default=os.path.join(ROOT, "datasets/gpus/aiconfigurator"))
    a = ap.parse_args()
    name = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}.get(a.dtype, a.dtype)
    table = {}
    path = os.path.join(a.table_root, a.gpu, "gemm.csv")
    if not os.path.exists(path):
        sys.exit(f"gemm_layouts_report: {path} does not exist")
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["gemm_dtype"] == name:
                table[(int(r["m"]), int(r["n"]), int(r["k"]))] = float(r["latency_ms"])
    if not os.path.exists(a.db):
        sys.exit(f"gemm_layouts_report: {a.db} does not exist")
    con = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    rows = con.execute("SELECT device, dims, dtype, status, fwd_median_ms, bwd_median_ms FROM layers "
                       "WHERE campaign=? AND layer_type='linear' ORDER BY id", (a.campaign,)).fetchall()
    if not rows:
        sys.exit(f"gemm_layouts_report: no linear rows of campaign {a.campaign} in {a.db}")
    print(f"# Linear layers against AIConfigurator's {a.gpu} {name} table\n")
    print(f"Store `{a.db}`, campaign `{a.campaign}`, device {rows[0][0]}.\n")
    print("| m | n | k | dtype | status | ours fwd ms | ours bwd ms | table fwd | table dgrad | table wgrad "
          "| fwd / table | bwd / table |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rf, rb = [], []
    for dev, dims, dtype, status, fwd, bwd in rows:
        d = json.loads(dims) if dims.startswith("[") else [int(x) for x in dims.split("x")]
        m, k, n = d[0], d[1], d[2]  # linear dims: tokens, d_in, d_out, bias
        tf, td, tw = table.get((m, n, k)), table.get((m, k, n)), table.get((n, k, m))
        f1 = fwd / tf if tf and fwd else None
        b1 = bwd / (td + tw) if td and tw and bwd else None
        if f1 and status == "ok":
            rf.append(f1)
        if b1 and status == "ok":
            rb.append(b1)
        cell = lambda v: f"{v:.4g}" if v else "-"
        print(f"| {m} | {n} | {k} | {dtype} | {status} | {cell(fwd)} | {cell(bwd)} | {cell(tf)} | {cell(td)} "
              f"| {cell(tw)} | {cell(f1)} | {cell(b1)} |")
    print()
    med = lambda v: f"{statistics.median(v):.3f} (n = {len(v)})" if v else "- (no layer of the table's shapes)"
    print(f"Median ours fwd / table fwd: {med(rf)}; median ours bwd / (table dgrad + table wgrad): {med(rb)}.")
    flash_report(con, a)


def flash_report(con, a):
    """The flash_attention layers against the same GPU's context-attention table (forward only):
    ours fwd / table fwd, and ours bwd / ours fwd (flash_attention's FLOP ratio is 2.5 at
    head_dim = v_dim: a ratio above it is the backward's lower utilisation)."""
    path = os.path.join(a.table_root, a.gpu, f"context_attention_{a.dtype}.csv")
    table = {}
    if os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if int(r["window_size"]) == 0:
                    key = tuple(int(r[c]) for c in ("batch_size", "seq_len", "num_heads", "num_kv_heads", "head_dim"))
                    table[key] = float(r["latency_ms"])
    rows = con.execute("SELECT dims, status, fwd_median_ms, bwd_median_ms FROM layers "
                       "WHERE campaign=? AND layer_type='flash_attention' ORDER BY id", (a.campaign,)).fetchall()
    if not rows:
        return
    print(f"\n## flash_attention against `{path}`\n")
    print("| batch | heads | kv | seq | head_dim | status | ours fwd ms | ours bwd ms | table fwd | fwd / table | bwd / fwd |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rf, rb = [], []
    for dims, status, fwd, bwd in rows:
        d = json.loads(dims) if dims.startswith("[") else [int(x) for x in dims.split("x")]
        b, h, kv, s, hd = d[0], d[1], d[2], d[3], d[5]
        tf = table.get((b, s, h, kv, hd))
        f1 = fwd / tf if tf and fwd else None
        b1 = bwd / fwd if bwd and fwd else None
        if f1 and status == "ok":
            rf.append(f1)
        if b1 and status == "ok":
            rb.append(b1)
        cell = lambda v: f"{v:.4g}" if v else "-"
        print(f"| {b} | {h} | {kv} | {s} | {hd} | {status} | {cell(fwd)} | {cell(bwd)} | {cell(tf)} | {cell(f1)} | {cell(b1)} |")
    med = lambda v: f"{statistics.median(v):.3f} (n = {len(v)})" if v else "-"
    print(f"\nMedian ours fwd / table fwd: {med(rf)}; median ours bwd / ours fwd: {med(rb)} (FLOP ratio 2.5).")


if __name__ == "__main__":
    main()
