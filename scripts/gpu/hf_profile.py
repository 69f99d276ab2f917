#!/usr/bin/env python3
"""Profiles Hugging Face runs on a GPU, kernel by kernel, to find work the layer
graph lacks (docs/unseen-gpu.md, "Switch-XL at 2,048 tokens").

Each run (mode:model:seq:batch) is built and run as scripts/gpu/hf_e2e_bench.py
builds and times it (FP32, TF32 off, eager attention), warmed up, then one
iteration is timed by CUDA events and profiled by torch.profiler. Written per
run under --out:
  <run>-kernels.csv  CUDA kernels: name, calls, device ms
  <run>-ops.csv      aten operators with their input shapes: calls, self device ms, self CPU ms
  summary.csv        one row per run: wall ms (events), kernel ms (sum of kernel
                     times), the device's busy share, kernel launches
Wall ms well above kernel ms means the device waited on the host (synchronising
operators such as boolean-mask indexing, launch-bound stretches): time no layer
model of a kernel can see.

    python3 scripts/gpu/hf_profile.py --out $OUT/profile \\
        --runs inference:switchxl4:512:1,inference:switchxl4:2048:1,inference:gpt3_xl:2048:2

Needs torch and transformers; runs on the GPU machine. --device cpu profiles on
the host (wall clock; for a dry run where no GPU is).
"""
import argparse
import csv
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_timing  # noqa: E402


def device_us(evt, self_only):
    """Device time of a profiler average in microseconds (attribute names of torch 1.13 and 2.x)."""
    names = (["self_device_time_total", "self_cuda_time_total"] if self_only
             else ["device_time_total", "cuda_time_total"])
    for n in names:
        v = getattr(evt, n, None)
        if v is not None:
            return float(v)
    return 0.0


def is_kernel(evt):
    t = getattr(evt, "device_type", None)
    return t is not None and str(t).endswith("CUDA")


def profile_run(run, device, warmup=2):
    """Runs run() `warmup` times, then once timed and profiled. Returns (wall_ms, kernels, ops):
    kernels = [(name, calls, ms)], ops = [(op, shapes, calls, self_device_ms, self_cpu_ms)]."""
    cuda_timing.time_runs(run, 0, warmup, device=device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as prof:
        wall = cuda_timing.time_runs(run, 1, 0, device=device)[0]
    kernels = [(e.key, e.count, device_us(e, True) / 1e3) for e in prof.key_averages() if is_kernel(e)]
    ops = []
    for e in prof.key_averages(group_by_input_shape=True):
        if is_kernel(e) or not e.key.startswith("aten::"):
            continue
        ops.append((e.key, str(e.input_shapes), e.count, device_us(e, True) / 1e3, e.self_cpu_time_total / 1e3))
    kernels.sort(key=lambda k: -k[2])
    ops.sort(key=lambda o: -(o[3] if device == "cuda" else o[4]))
    return wall, kernels, ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True, help="comma-separated mode:model:seq:batch")
    ap.add_argument("--configs", default="datasets/neusight/model_configs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    import hf_e2e_bench  # needs transformers

    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for spec in filter(None, a.runs.split(",")):
        mode, name, seq, batch = spec.split(":")
        cfg, model = hf_e2e_bench.build(os.path.join(a.configs, name + ".json"), device=a.device)
        hf_e2e_bench.MODEL_PARAMS[:] = list(model.parameters())
        run = hf_e2e_bench.step_fn(cfg, model, mode, int(batch), int(seq), device=a.device)
        wall, kernels, ops = profile_run(run, a.device)
        tag = f"{name}-{mode}-{seq}-{batch}"
        with open(os.path.join(a.out, tag + "-kernels.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "calls", "device_ms"])
            w.writerows([(k, c, f"{ms:.4f}") for k, c, ms in kernels])
        with open(os.path.join(a.out, tag + "-ops.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "input_shapes", "calls", "self_device_ms", "self_cpu_ms"])
            w.writerows([(o, s, c, f"{d:.4f}", f"{h:.4f}") for o, s, c, d, h in ops])
        kms = sum(k[2] for k in kernels)
        launches = sum(k[1] for k in kernels)
        rows.append(dict(run=tag, wall_ms=f"{wall:.3f}", kernel_ms=f"{kms:.3f}",
                         busy=f"{kms / wall:.3f}" if wall > 0 else "", launches=launches))
        print(rows[-1], flush=True)
        del model, run
        hf_e2e_bench.MODEL_PARAMS.clear()
        if a.device == "cuda":
            torch.cuda.empty_cache()
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["run", "wall_ms", "kernel_ms", "busy", "launches"])
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
