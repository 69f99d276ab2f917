#!/usr/bin/env python3
"""Writes the layer plan of scripts/gpu/gpu_gemm_layouts.sh: BF16 linear layers (bias 0) whose
forward GEMM (m, n, k) and both backward GEMMs, dgrad (m, k, n) and wgrad (n, k, m), are all
on the compact AIConfigurator grid (datasets/gpus/aiconfigurator: m and every (n, k) pair of
{1024, 4096, 8192}), so that the measured forward and backward of each layer can be set against
the forward-only NT table of the same GPU (scripts/gpu/gemm_layouts_report.py).

    python3 scripts/gpu/make_gemm_layout_plan.py > datasets/h200/gemm-layouts-plan.json
    python3 scripts/gpu/make_gemm_layout_plan.py --small   # a CPU dry run's plan (sizes 64, 128)
Then 16 causal flash_attention layers (SDPA) on the context-attention grid's shapes, timed forward
and backward.
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
    # Causal fused attention (SDPA: FlashAttention-2 on CUDA) on shapes of the compact
    # AIConfigurator context-attention grid, forward and backward: the forward against the table,
    # the backward / forward ratio that no public table has (flash_attention's backward).
    flash = [(1, 4, 2, 64, 32), (2, 4, 4, 128, 32)] if a.small else [
        (b, h, kv, s, d) for (h, kv) in [(32, 8), (32, 32)] for d in [64, 128]
        for (b, s) in [(8, 1024), (4, 2048), (2, 4096), (1, 8192)]]
    configs += [{"type": "flash_attention", "dtype": a.dtype,
                 "dims": {"batch": b, "heads": h, "kv_heads": kv, "seq_q": s, "seq_k": s, "head_dim": d,
                          "v_dim": d, "causal": 1}} for b, h, kv, s, d in flash]
    print(json.dumps({"kind": "layers", "configs": configs}, indent=1))


if __name__ == "__main__":
    main()
