#!/usr/bin/env python3
"""Where the leave-one-GPU-out GEMM error comes from (docs/results/gpus/README.md, "What limits it").

    python3 scripts/studies/gemm_error_split.py out/gpus/loo.csv [--dtypes bf16 fp8] > split.md

Reads the held-out rows of `scaledl eval layers --leave-one-out device --predictions F` (the
linear forward rows) and each GPU's spec sheet under models/devices/, and prints two tables:

1. per GPU and dtype, the signed error (+ = predicted too slow) and MAPE of four groups of rows:
   m <= 128 or not (a GEMM that streams its weights), and whether the weights fit in half the
   L2 (a harness that repeats one GEMM finds them there: they are read at the L2's bandwidth);
2. per GPU and dtype, the median share of the dtype's spec peak that its GEMMs of >= 2 TFLOP
   reach, measured and predicted, with the board power per spec TFLOP/s;
3. per GPU and dtype, the fastest a GEMM of m <= 16 moves its bytes (weights, input, output),
   as a multiple of the spec memory bandwidth: above 1, the weights came from the L2.
"""
import argparse
import collections
import csv
import glob
import json
import os
import statistics

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load_specs():
    specs = {}
    for f in glob.glob(os.path.join(ROOT, "models", "devices", "*.json")):
        with open(f) as fh:
            j = json.load(fh)
        specs[j["name"]] = j
        for a in j.get("extra", {}).get("aliases", []):
            specs[a] = j
    return specs


def element_bytes(dtype):
    return {"fp8": 1, "fp32": 4}.get(dtype, 2)


def regime(dims, dtype, l2_mb):
    """(m <= 128, the n x k weights fit in half the L2) of a linear row's dims "m x k x n x bias"."""
    m, k, n = (int(v) for v in dims.split("x")[:3])  # linear dims: tokens, d_in, d_out
    return m <= 128, n * k * element_bytes(dtype) <= 0.5 * l2_mb * 1e6


def peak_gflops(spec, dtype):
    if dtype == "fp8":
        return spec.get("peak_fp8_gflops") or spec["peak_bf16_gflops"]
    if dtype == "fp32":
        return spec["peak_fp32_gflops"]
    return spec["peak_bf16_gflops"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("predictions")
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "fp8", "fp16"])
    a = ap.parse_args()
    specs = load_specs()
    groups = collections.defaultdict(list)  # (gpu, dtype, group) -> signed errors %
    share = collections.defaultdict(list)  # (gpu, dtype) -> (measured, predicted) share of peak
    stream = collections.defaultdict(float)  # (gpu, dtype) -> highest GB/s of an m <= 16 GEMM
    with open(a.predictions, newline="") as f:
        for r in csv.DictReader(f):
            if r["type"] != "linear" or r["direction"] != "fwd" or r["dtype"] not in a.dtypes:
                continue
            gpu = r["device"].split(":", 1)[1]
            spec = specs.get(gpu)
            if spec is None:
                continue
            m, k, n = (int(v) for v in r["dims"].split("x")[:3])  # linear dims: tokens, d_in, d_out
            t, p = float(r["measured_ms"]), float(r["predicted_ms"])
            small, fits = regime(r["dims"], r["dtype"], spec["l2_mb"])
            grp = ("m <= 128" if small else "m > 128") + (", weights in L2" if fits else ", weights not in L2")
            groups[(gpu, r["dtype"], grp)].append((p - t) / t * 100)
            eb = element_bytes(r["dtype"])
            if m <= 16:
                gbs = ((n * k + m * k) * eb + m * n * 2) / (t * 1e6)
                stream[(gpu, r["dtype"])] = max(stream[(gpu, r["dtype"])], gbs)
            flop = 2.0 * m * n * k
            if flop >= 2e12:
                pk = peak_gflops(spec, r["dtype"]) * 1e6  # FLOP per ms
                share[(gpu, r["dtype"])].append((flop / t / pk, flop / p / pk))
    names = ["m <= 128, weights in L2", "m <= 128, weights not in L2", "m > 128, weights in L2",
             "m > 128, weights not in L2"]
    print("| GPU | dtype | L2 MB | " + " | ".join(f"{g}: signed / MAPE % (rows)" for g in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for gpu, dtype in sorted({k[:2] for k in groups}):
        cells = []
        for g in names:
            e = groups.get((gpu, dtype, g), [])
            cells.append(f"{statistics.mean(e):+.0f} / {statistics.mean(map(abs, e)):.0f} ({len(e)})" if e else "")
        print(f"| {gpu} | {dtype} | {specs[gpu]['l2_mb']:g} | " + " | ".join(cells) + " |")
    print()
    print("| GPU | dtype | GEMMs >= 2 TFLOP | share of the spec peak, measured | predicted | board W per spec TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for (gpu, dtype), v in sorted(share.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        spec = specs[gpu]
        tdp = spec.get("extra", {}).get("tdp_w", 0) or 0
        w = f"{tdp / (peak_gflops(spec, dtype) / 1e3):.2f}" if tdp else "not on the sheet"
        print(f"| {gpu} | {dtype} | {len(v)} | {statistics.median(x for x, _ in v):.2f} | "
              f"{statistics.median(y for _, y in v):.2f} | {w} |")
    print()
    print("| GPU | dtype | L2 MB | spec GB/s | fastest m <= 16 GEMM, GB/s | x the spec bandwidth |")
    print("|---|---|---|---|---|---|")
    for (gpu, dtype), gbs in sorted(stream.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        bw = specs[gpu]["peak_mem_bw_gbs"]
        print(f"| {gpu} | {dtype} | {specs[gpu]['l2_mb']:g} | {bw:g} | {gbs:.0f} | {gbs / bw:.2f} |")


if __name__ == "__main__":
    main()
