#!/usr/bin/env python3
"""Writes the layer plan of scripts/gpu/gpu_gemm_layouts.sh: BF16 linear layers (bias 0) whose
forward GEMM (m, n, k) and both backward GEMMs, dgrad (m, k, n) and wgrad (n, k, m), are all
on the compact AIConfigurator grid (datasets/gpus/aiconfigurator: m and every (n, k) pair of
{1024, 4096, 8192}), so that the measured forward and backward of each layer can be set against
the forward-only NT table of the same GPU (scripts/gpu/gemm_layouts_report.py).

    python3 scripts/gpu/make_gemm_layout_plan.py > datasets/h200/gemm-layouts-plan.json
    python3 scripts/gpu/make_gemm_layout_plan.py --small   # a CPU dry run's plan (sizes 64, 128)
"""
import argparse
import itertools
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="sizes 64 and 128 (a CPU dry run)")
    ap.add_argument("--dtype", default="bf16")
    a = ap.parse_args()
    sizes = [64, 128] if a.small else [1024, 4096, 8192]
    configs = [{"type": "linear", "dtype": a.dtype, "dims": {"tokens": m, "d_in": k, "d_out": n, "bias": 0}}
               for m, n, k in itertools.product(sizes, repeat=3)]
    print(json.dumps({"kind": "layers", "configs": configs}, indent=1))


if __name__ == "__main__":
    main()
