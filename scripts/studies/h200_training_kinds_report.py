#!/usr/bin/env python3
"""Summarises the kernel measurements of datasets/h200/training-kinds/ (scripts/gpu/gpu_training_kinds.sh
on the H200 lent on 2026-11-29) against the public forward-only tables of the same GPU
(datasets/gpus/aiconfigurator/h200_sxm) and the H200's spec sheet (models/devices/h200-sxm.json):

  - GEMMs: ours (PyTorch 2.11, cuBLAS) / the table (TensorRT-LLM, CUDA-graph replay) per layout and
    dtype; each layout against NT at the same (M, N, K); the misaligned leading dimension; FP8 against
    BF16 and the cost of an eager activation quantisation;
  - attention: forward against the context-attention table, backward / forward, and the backends;
  - the kernels around the GEMMs: achieved bandwidth, backward / forward;
  - AdamW: bytes per second of the fused, foreach and for-loop steps.

    python3 scripts/studies/h200_training_kinds_report.py > docs/results/h200-training/kinds.md
"""
import collections
import csv
import json
import os
import statistics as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.path.join(ROOT, "datasets/h200/training-kinds")
T = os.path.join(ROOT, "datasets/gpus/aiconfigurator/h200_sxm")
BIG = 1e11  # FLOP: GEMMs of at least this much work (> ~0.15 ms on this GPU)


def rows(path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["status"] == "ok"]


def q(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def summary(xs):
    return f"{st.median(xs):.3f} [{q(xs, 0.1):.3f}, {q(xs, 0.9):.3f}] (n = {len(xs)})" if xs else "-"


def gemms():
    table = {}
    with open(os.path.join(T, "gemm.csv"), newline="") as f:
        for r in csv.DictReader(f):
            table[({"bfloat16": "bf16"}.get(r["gemm_dtype"], r["gemm_dtype"]), int(r["m"]), int(r["n"]), int(r["k"]))] = \
                float(r["latency_ms"])
    ours = collections.defaultdict(dict)
    for r in rows(os.path.join(D, "gemm.csv")):
        ours[(int(r["m"]), int(r["n"]), int(r["k"]))][(r["dtype"], r["variant"], r["layout"])] = float(r["median_ms"])
    print("## GEMMs\n")
    print("Median [10th, 90th percentile] of the ratio of times; all = every shape, big = 2MNK >= 1e11 FLOP. "
          "M = 4097 (a leading dimension that is no multiple of 8 in the TN layout) is left out of the layout rows "
          "and given apart.\n")
    print("| ratio | all | big |")
    print("|---|---|---|")

    def ratio(num, den, table_den=False, keep=lambda s: True):
        out = {"all": [], "big": []}
        for s, d in ours.items():
            if not keep(s) or num not in d:
                continue
            if table_den:
                t = table.get((num[0],) + s)
                if t is None:
                    continue
                v = d[num] / t
            elif den in d:
                v = d[num] / d[den]
            else:
                continue
            out["all"].append(v)
            if 2.0 * s[0] * s[1] * s[2] >= BIG:
                out["big"].append(v)
        return out
    aligned = lambda s: s[0] != 4097
    for lay in ("NT", "NN", "TN"):
        r = ratio(("bf16", "gemm", lay), None, True, aligned)
        print(f"| BF16 {lay} / table (NT) | {summary(r['all'])} | {summary(r['big'])} |")
    for lay in ("NN", "TN"):
        r = ratio(("bf16", "gemm", lay), ("bf16", "gemm", "NT"), keep=aligned)
        print(f"| BF16 {lay} / BF16 NT, same (M, N, K) | {summary(r['all'])} | {summary(r['big'])} |")
    r = ratio(("bf16", "gemm", "TN"), ("bf16", "gemm", "NT"), keep=lambda s: s[0] == 4097)
    print(f"| BF16 TN / NT at M = 4097 | {summary(r['all'])} | {summary(r['big'])} |")
    r = ratio(("bf16", "gemm", "NN"), ("bf16", "gemm", "NT"), keep=lambda s: s[0] == 4097)
    print(f"| BF16 NN / NT at M = 4097 | {summary(r['all'])} | {summary(r['big'])} |")
    r = ratio(("fp8", "gemm", "NT"), ("bf16", "gemm", "NT"))
    print(f"| FP8 GEMM / BF16 GEMM (NT) | {summary(r['all'])} | {summary(r['big'])} |")
    r = ratio(("fp8", "gemm", "NT"), None, True)
    print(f"| FP8 GEMM alone / table FP8 (which includes the quantisation) | {summary(r['all'])} | {summary(r['big'])} |")
    r = ratio(("fp8", "quant+gemm", "NT"), None, True)
    print(f"| FP8 eager quantisation + GEMM / table FP8 | {summary(r['all'])} | {summary(r['big'])} |")
    r = ratio(("fp8", "quant+gemm", "NT"), ("fp8", "gemm", "NT"))
    print(f"| FP8 eager quantisation + GEMM / GEMM alone | {summary(r['all'])} | {summary(r['big'])} |")
    best = collections.defaultdict(float)
    for r in rows(os.path.join(D, "gemm.csv")):
        k = f"{r['dtype']} {r['variant']} {r['layout']}"
        best[k] = max(best[k], float(r["tflops"]))
    with open(os.path.join(ROOT, "models/devices/h200-sxm.json")) as f:
        spec = json.load(f)
    peaks = {k: v for k, v in spec.items() if k.startswith("peak_") and k.endswith("_gflops")}
    print("\nBest rate measured (TFLOP/s): " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(best.items())) +
          f". Spec sheet: {', '.join(f'{k} {v / 1e3:.0f}' for k, v in sorted(peaks.items()))} (TFLOP/s).\n")


def attention():
    table = {}
    with open(os.path.join(T, "context_attention_bf16.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if int(r["window_size"]) == 0:
                table[tuple(int(r[c]) for c in ("batch_size", "seq_len", "num_heads", "num_kv_heads", "head_dim"))] = \
                    float(r["latency_ms"])
    by = collections.defaultdict(list)
    fb = collections.defaultdict(dict)
    for r in rows(os.path.join(D, "attention.csv")):
        b, h, kv, s, d = (int(r[c]) for c in ("batch", "heads", "kv_heads", "seq", "head_dim"))
        f, bw = float(r["fwd_ms"]), float(r["bwd_ms"])
        c = int(r["causal"])
        flop = 4.0 * b * h * s * s * d * (0.5 if c else 1.0)
        be = r["backend"]
        if c and (b, s, h, kv, d) in table:
            by[(be, "fwd / table (causal)")].append(f / table[(b, s, h, kv, d)])
        by[(be, "bwd / fwd")].append(bw / f)
        by[(be, "fwd TFLOP/s")].append(flop / f / 1e9)
        by[(be, "bwd TFLOP/s (2.5x the forward's FLOP)")].append(2.5 * flop / bw / 1e9)
        fb[(b, h, kv, s, d, c)][be] = float(r["fwdbwd_ms"])
    print("## Attention (scaled_dot_product_attention, BF16)\n")
    print("Median [10th, 90th percentile] over the shapes each backend ran (causal and not; "
          "the memory-efficient backend ran no GQA shape).\n")
    print("| backend | quantity | value |")
    print("|---|---|---|")
    for (be, what), xs in sorted(by.items()):
        print(f"| {be} | {what} | {summary(xs)} |")
    for be in ("flash", "cudnn", "efficient"):
        xs = [v["default"] / v[be] for v in fb.values() if be in v and "default" in v]
        print(f"| default | forward + backward / {be} | {summary(xs)} |")
    print()


def kernels():
    print("## Kernels around the GEMMs (BF16, forward and backward through autograd)\n")
    with open(os.path.join(ROOT, "models/devices/h200-sxm.json")) as f:
        bw = json.load(f)["peak_mem_bw_gbs"]
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows(os.path.join(D, "kernels.csv")):
        op = r["op"] if not r["op"].startswith("embedding") else "embedding"
        f = float(r["fwd_ms"])
        by[op]["fwd GB/s"].append(float(r["fwd_bytes"]) / f / 1e6)
        by[op]["bwd / fwd"].append(float(r["bwd_ms"]) / f)
    print(f"Nominal bytes of the forward (inputs read + output written once) / time; spec bandwidth {bw:.0f} GB/s. "
          "Median [10th, 90th percentile] over the shapes (tokens 4,096 and 16,384 x hidden 1,024-8,192).\n")
    print("| op | forward GB/s | backward / forward |")
    print("|---|---|---|")
    for op, d in sorted(by.items()):
        print(f"| {op} | {summary(d['fwd GB/s'])} | {summary(d['bwd / fwd'])} |")
    print()


def optimizer():
    print("## AdamW step (FP32 parameters, gradients and moments)\n")
    print("28 bytes per parameter (read the parameter, gradient and two moments, write three).\n")
    print("| implementation | tensors | parameters | ms | GB/s |")
    print("|---|---|---|---|---|")
    for r in rows(os.path.join(D, "optimizer.csv")):
        ms = float(r["median_ms"])
        n = int(r["params"])
        print(f"| {r['impl']} | {r['tensors']} | {n / 1e6:.0f} M | {ms:.2f} | {28 * n / ms / 1e6:.0f} |")
    print()


def main():
    print("# H200 kernel measurements: what training launches\n")
    print("Generated by `python3 scripts/studies/h200_training_kinds_report.py` from "
          "`datasets/h200/training-kinds/` (README there: the GPU, the versions, the command).\n")
    gemms()
    attention()
    kernels()
    optimizer()


if __name__ == "__main__":
    main()
