#!/usr/bin/env python3
"""Where the predicted time of the three profiled H200 training runs goes, against where the
GPU spent it (datasets/h200/training-kinds/profile.csv: CUDA kernel time of one iteration, summed
by kernel name): matrix products, attention, the optimizer and everything else (elementwise
kernels, casts, norms, the loss), from `scaledl predict --json`'s by_type_ms (the layer sum before
the refinement's alpha) with --dtype amp-bf16 --framework hf-sdpa on the H200 spec sheet.

    python3 scripts/studies/h200_profile_split.py [--scaledl build/tools/scaledl]

Kernel names are put in a kind by their names (nvjet / cutlass / gemm: matrix products;
sdpa / flash / fmha: attention; multi_tensor / Adam: optimizer; the rest: other).
"""
import argparse
import collections
import csv
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = {"gpt2-large-4x1024": ("models/gpt2-large.json", 4, 1024),
        "qwen3-0.6b-8x2048": ("models/qwen3-0.6b.json", 8, 2048),
        "smollm3-3b-2x4096": ("models/smollm3-3b.json", 2, 4096)}
KINDS = ("matmul", "attention", "optimizer", "other")


def kernel_kind(name):
    k = name.lower()
    if "nvjet" in k or "gemm" in k or "cutlass" in k or "xmma" in k:
        return "matmul"
    if "sdpa" in k or "flash" in k or "fmha" in k:
        return "attention"
    if "multi_tensor" in k or "adam" in k:
        return "optimizer"
    return "other"


def type_kind(key):
    t = key.split(".")[0]
    if t in ("linear", "bmm", "conv2d_patch"):
        return "matmul"
    if t in ("flash_attention", "attention"):
        return "attention"
    if t == "optimizer":
        return "optimizer"
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scaledl", default=os.path.join(ROOT, "build/tools/scaledl"))
    a = ap.parse_args()
    measured = collections.defaultdict(lambda: collections.Counter())
    with open(os.path.join(ROOT, "datasets/h200/training-kinds/profile.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["kernel"] == "Optimizer.step#AdamW.step":  # a CPU-side range, not a kernel
                continue
            measured[r["run"]][kernel_kind(r["kernel"])] += float(r["device_ms"])
    print("| run | kind | profiled ms | predicted ms (layer sum) |")
    print("|---|---|---|---|")
    for run, (cfg, batch, seq) in RUNS.items():
        out = subprocess.run([a.scaledl, "predict", os.path.join(ROOT, cfg), "--bundle",
                              os.path.join(ROOT, "models/bundles/default"), "--device-spec", "h200-sxm", "--batch",
                              str(batch), "--seq", str(seq), "--dtype", "amp-bf16", "--framework", "hf-sdpa",
                              "--json"], capture_output=True, text=True, check=True)
        pred = collections.Counter()
        for k, v in json.loads(out.stdout)["by_type_ms"].items():
            pred[type_kind(k)] += v
        for kind in KINDS:
            print(f"| {run} | {kind} | {measured[run][kind]:.1f} | {pred[kind]:.1f} |")
        print(f"| {run} | all | {sum(measured[run].values()):.1f} | {sum(pred.values()):.1f} |")


if __name__ == "__main__":
    main()
