#!/usr/bin/env python3
"""Compact, deterministic subset of the AIConfigurator GPU timings for the repository.

Reads the CSV copy of ai-dynamo/aiconfigurator (../shared/data/aiconfigurator, README.md
there) and writes the same layout with fewer rows and only the columns that
`scaledl import aiconfigurator` (libscaledl/src/gpudata/aiconfigurator.cpp) reads:

  <gpu>/gemm.csv              rows with m in M_VALUES and (n, k) in NK_PAIRS (each pair on
                              every GPU whose grid has it), every gemm_dtype
  <gpu>/comm_collectives.csv  rows with message_size_bytes in COMM_BYTES (64 KiB .. 256 MiB
                              at powers of 4), every op, dtype and num_gpus, duplicates kept
                              (the importer picks one per size; they test that choice)
  <gpu>/context_attention_*  full causal rows of ATTN_* layouts, sizes and token counts
  other tables                (generation / encoder attention, custom all-reduce: skipped)
                              SKIPPED_ROWS evenly spaced rows, so the skip counts are tested
  manifest.csv, extra_unmerged_prs/manifest.csv: the rows of the tables written, with the
                              columns the importer reads (device, framework, version, kernel
                              source, source)
  LICENSE                     copied verbatim

Python 3 standard library only. Usage (from the repository root):
  python3 scripts/gpu/subset_aiconfigurator.py --src /work/shared/data/aiconfigurator \
      --out datasets/gpus/aiconfigurator
"""
import argparse
import csv
import io
import os
import shutil
import sys

EXTRA = "extra_unmerged_prs"
# Tokens of a GEMM: decode batches (1..64), prefill / training token counts, and the
# wave-quantisation probe 4097 beside 4096 (older grids of A100, B60, H20 stop at 8192 and
# have no 4097: they get the values they have).
M_VALUES = [1, 4, 16, 64, 256, 1024, 2048, 4096, 4097, 8192, 32768]
# (n, k): every pair of these feature sizes (small to large), plus two LM-head shapes.
NK_VALUES = [64, 512, 1024, 2048, 4096, 8192, 12288, 16384]
NK_PAIRS = {(n, k) for n in NK_VALUES for k in NK_VALUES} | {(65536, 4096), (65536, 8192)}
COMM_BYTES = {1 << e for e in range(16, 29, 2)}  # 64 KiB, 256 KiB, ..., 256 MiB
SKIPPED_ROWS = 24
# Context (prefill) attention, imported as the fused-attention kind: full causal rows
# (window_size 0) of these head layouts (MHA and GQA), head sizes, sequence lengths and
# batches, with 512 to 65,536 tokens in all (a training micro-batch's range).
ATTN_HEADS = {(16, 16), (32, 8), (32, 32), (64, 8)}
ATTN_HEAD_DIMS = {64, 128}
ATTN_SEQS = {128, 512, 1024, 2048, 4096, 8192, 16384}
ATTN_BATCHES = {1, 2, 4, 8, 16, 32}
ATTN_TOKENS = (512, 65536)

GEMM_COLUMNS = ["gemm_dtype", "m", "n", "k", "latency_ms"]
COMM_COLUMNS = ["source_folder", "ccl_version_field", "framework_field", "kernel_source", "op_name", "dtype",
                "num_gpus", "message_size_bytes", "latency_ms", "device_name"]
MANIFEST_COLUMNS = ["file", "gpu", "device_name", "table", "framework", "framework_version",
                    "framework_version_field", "kernel_source", "source"]


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        sys.exit(f"{path}: empty file")
    return rows[0], rows[1:]


def write_csv(path, header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write(buf.getvalue())


def project(header, rows, columns):
    """Rows restricted to `columns` (those the header has), in that order."""
    idx = [header.index(c) for c in columns if c in header]
    return [header[i] for i in idx], [[r[i] for i in idx] for r in rows]


def select(name, header, rows):
    col = {c: i for i, c in enumerate(header)}
    if name == "gemm.csv":
        keep = [r for r in rows
                if int(r[col["m"]]) in M_VALUES and (int(r[col["n"]]), int(r[col["k"]])) in NK_PAIRS]
        return project(header, keep, GEMM_COLUMNS)
    if name == "comm_collectives.csv":
        keep = [r for r in rows if int(r[col["message_size_bytes"]]) in COMM_BYTES]
        return project(header, keep, COMM_COLUMNS)
    if name.startswith("context_attention_"):
        def attn_row(r):
            b, sq = int(r[col["batch_size"]]), int(r[col["seq_len"]])
            return (int(r[col["window_size"]]) == 0
                    and (int(r[col["num_heads"]]), int(r[col["num_kv_heads"]])) in ATTN_HEADS
                    and int(r[col["head_dim"]]) in ATTN_HEAD_DIMS and sq in ATTN_SEQS and b in ATTN_BATCHES
                    and ATTN_TOKENS[0] <= b * sq <= ATTN_TOKENS[1])
        return header, [r for r in rows if attn_row(r)]
    # Tables the importer only counts: evenly spaced rows, all columns.
    n = min(SKIPPED_ROWS, len(rows))
    picks = sorted({i * (len(rows) - 1) // max(n - 1, 1) for i in range(n)}) if rows else []
    return header, [rows[i] for i in picks]


def subset_folder(src, out, written):
    """Every <gpu>/*.csv of `src` into `out`; `written` collects the relative paths."""
    for gpu in sorted(os.listdir(src)):
        gdir = os.path.join(src, gpu)
        if not os.path.isdir(gdir) or gpu in (EXTRA, "systems"):
            continue
        for name in sorted(os.listdir(gdir)):
            if not name.endswith(".csv"):
                continue
            header, rows = read_csv(os.path.join(gdir, name))
            h, keep = select(name, header, rows)
            write_csv(os.path.join(out, gpu, name), h, keep)
            written.append(f"{gpu}/{name}")
            print(f"{os.path.join(out, gpu, name)}: {len(keep)} of {len(rows)} rows")


def subset_manifest(src, out, written):
    header, rows = read_csv(os.path.join(src, "manifest.csv"))
    h, keep = project(header, [r for r in rows if r[header.index("file")] in written], MANIFEST_COLUMNS)
    write_csv(os.path.join(out, "manifest.csv"), h, keep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="the CSV copy of aiconfigurator (its README.md)")
    ap.add_argument("--out", required=True, help="output folder (replaced, except its README.md)")
    a = ap.parse_args()
    if os.path.isdir(a.out):
        for e in os.listdir(a.out):
            p = os.path.join(a.out, e)
            if e != "README.md":
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    for d in (a.src, os.path.join(a.src, EXTRA)):
        o = a.out if d == a.src else os.path.join(a.out, EXTRA)
        written = []
        subset_folder(d, o, written)
        subset_manifest(d, o, written)
    shutil.copyfile(os.path.join(a.src, "LICENSE"), os.path.join(a.out, "LICENSE"))


if __name__ == "__main__":
    main()
