#!/usr/bin/env python3
"""Times NeuSight's operator microbenchmarks on the GPU at hand, so that a GPU the
public data lacks gets per-operator labels of the same kind (docs/unseen-gpu.md,
"H200 operators").

Protocol of the artifact (datasets/neusight/README.md): FP32 with TF32 off, each
row the mean of the fastest 5 of 25 runs timed with CUDA events (here: 3 warm-up
runs first, a synchronize around each timed run). The shapes are those of the
committed subset, datasets/neusight/ops/<op>/<GPU>.csv and
ops-transformer-shapes/*.csv, each distinct (op, shape) once, in this order: the
Transformer shapes, then the A100's rows, then the V100's, then the other GPUs'
rows in a fixed shuffled order, until --budget-s is spent. Operators, as the
artifact defines them:
  linear B,M,N,K: nn.Linear(N -> K, bias) on [1, M, N] (B is 1)
  bmm    B,M,N,K: torch.bmm([B,M,N], [B,N,K])
  ln, softmax B,H: layer_norm over H (affine) / softmax over H of a [B,H] tensor
  add, mul, div, pow B,H: two [B,H] tensors
  addu, mulu, divu, powu B,H: a [B,H] tensor and a Python scalar (pow: 3.0)
  relu, gelu, tanh B,H: unary

--dtype bf16|fp16 times the same ops in that dtype; --backward also times each
op's backward (torch.autograd.grad of the output with a random gradient, with
respect to every tensor input, weights and bias included, as in training).

Output: <out>/ops/<op>/<Device>.csv with the artifact's columns OPName, Latency
(ms, 6 significant digits), Device and the shape, then (with --dtype other than
fp32 or --backward) DType and BwdLatency (ms, same protocol), then CV (of the 25
forward runs) and Set (transformer or the GPU file the shape came from);
`scaledl import neusight` reads DType and BwdLatency. Rows are flushed as they
are measured, a shape that does not fit is written to <out>/skipped.csv.
<out>/env.json records the library versions and the device. Needs torch and a
CUDA GPU; --device cpu --limit N is a dry run of the code paths on a few shapes.

    python3 scripts/gpu/neusight_ops_bench.py --root datasets/neusight --out /tmp/out/ops --budget-s 240
    python3 scripts/gpu/neusight_ops_bench.py --out /tmp/out/ops-bf16 --dtype bf16 --backward --budget-s 240
"""
import argparse
import csv
import glob
import json
import os
import random
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import cuda_timing

VEC_OPS = ["ln", "softmax", "add", "addu", "mul", "mulu", "div", "divu", "pow", "powu",
           "relu", "gelu", "tanh"]
MAT_OPS = ["linear", "bmm"]


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def shape_of(op, row):
    keys = "BMNK" if op in MAT_OPS else "BH"
    return tuple(int(row[k]) for k in keys)


def work_list(root):
    """Distinct (op, shape, set) in the order they are measured."""
    seen, order = set(), []

    def add(op, shape, where):
        if op in MAT_OPS or op in VEC_OPS:
            if (op, shape) not in seen:
                seen.add((op, shape))
                order.append((op, shape, where))

    for name in ["linear", "bmm", "vec"]:
        p = os.path.join(root, "ops-transformer-shapes", name + ".csv")
        if os.path.exists(p):
            for r in read_rows(p):
                add(r["OPName"], shape_of(r["OPName"], r), "transformer")
    files = sorted(glob.glob(os.path.join(root, "ops", "*", "*.csv")))
    first = [f for f in files if "A100" in f] + [f for f in files if "V100" in f]
    for f in first:
        for r in read_rows(f):
            add(r["OPName"], shape_of(r["OPName"], r), os.path.basename(f)[:-4])
    rest = []
    for f in files:
        if f not in first:
            rest += [(r["OPName"], shape_of(r["OPName"], r), os.path.basename(f)[:-4]) for r in read_rows(f)]
    random.Random(1).shuffle(rest)
    for op, shape, where in rest:
        add(op, shape, where)
    return order


def make_fn(op, shape, dev, dtype=torch.float32, grad=False):
    """The op's forward as a function of no arguments, and its tensor inputs (which
    require grad when `grad`)."""
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*s):
        t = torch.randn(*s, device=dev, generator=g).to(dtype)
        return t.requires_grad_(grad)

    if op == "linear":
        _, m, n, k = shape
        x, w, b = rnd(1, m, n), rnd(k, n), rnd(k)
        return (lambda: F.linear(x, w, b)), [x, w, b]
    if op == "bmm":
        bb, m, n, k = shape
        a, c = rnd(bb, m, n), rnd(bb, n, k)
        return (lambda: torch.bmm(a, c)), [a, c]
    bb, h = shape
    x = rnd(bb, h)
    if op == "ln":
        w, b = rnd(h), rnd(h)
        return (lambda: F.layer_norm(x, (h,), w, b)), [x, w, b]
    if op in ("add", "mul", "div", "pow"):
        y = rnd(bb, h)
        fn = {"add": torch.add, "mul": torch.mul, "div": torch.div, "pow": torch.pow}[op]
        return (lambda: fn(x, y)), [x, y]
    unary = {"softmax": lambda: F.softmax(x, dim=-1), "addu": lambda: x + 2.0, "mulu": lambda: x * 2.0,
             "divu": lambda: x / 2.0, "powu": lambda: torch.pow(x, 3.0), "relu": lambda: F.relu(x),
             "gelu": lambda: F.gelu(x), "tanh": lambda: torch.tanh(x)}
    return unary[op], [x]


def backward_fn(fwd, inputs):
    """The op's backward: gradients of its output (times a fixed random gradient)
    with respect to `inputs`; the graph is kept so that it can run again."""
    y = fwd()
    gy = torch.randn_like(y)
    return lambda: torch.autograd.grad(y, inputs, gy, retain_graph=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="datasets/neusight")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--backward", action="store_true", help="also time each op's backward (BwdLatency)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a dry run, wall-clock timed")
    ap.add_argument("--limit", type=int, default=0, help="at most this many shapes (0 = all)")
    a = ap.parse_args()
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("neusight_ops_bench: error: no CUDA device (--device cpu for a dry run)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    extra_cols = a.dtype != "fp32" or a.backward  # the fp32 forward files keep the artifact's columns
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    fname = name.replace(" ", "_")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "env.json"), "w") as f:
        json.dump({"device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
                   "runs": a.runs, "warmup": a.warmup, "tf32": False, "dtype": a.dtype,
                   "backward": a.backward,
                   "label": "mean of the fastest 5 runs, ms"}, f, indent=1)
    work = work_list(a.root)
    if a.limit > 0:
        work = work[:a.limit]
    print(f"{len(work)} distinct (op, shape) on {name}", flush=True)
    writers, files = {}, []
    skipped = open(os.path.join(a.out, "skipped.csv"), "w", newline="")
    skw = csv.writer(skipped)
    skw.writerow(["OPName", "shape", "why"])
    t0, done = time.time(), 0
    for i, (op, shape, where) in enumerate(work):
        if time.time() - t0 > a.budget_s:
            print(f"budget spent after {done} of {len(work)}", flush=True)
            break
        if op not in writers:
            d = os.path.join(a.out, "ops", op)
            os.makedirs(d, exist_ok=True)
            f = open(os.path.join(d, fname + ".csv"), "w", newline="")
            files.append(f)
            w = csv.writer(f)
            w.writerow(["OPName", "Latency", "Device"] + list("BMNK" if op in MAT_OPS else "BH")
                       + (["DType", "BwdLatency"] if extra_cols else []) + ["CV", "Set"])
            writers[op] = (w, f)
        try:
            fwd, inputs = make_fn(op, shape, dev, dtype, grad=a.backward)
            with torch.set_grad_enabled(a.backward):
                ms = cuda_timing.time_runs(fwd, a.runs, a.warmup, device=dev)
                bwd_ms = (cuda_timing.time_runs(backward_fn(fwd, inputs), a.runs, a.warmup, device=dev)
                          if a.backward else None)
            del fwd, inputs
        except torch.cuda.OutOfMemoryError:
            skw.writerow([op, "x".join(map(str, shape)), "oom"])
            torch.cuda.empty_cache()
            continue
        except RuntimeError as e:
            skw.writerow([op, "x".join(map(str, shape)), str(e).splitlines()[0][:200]])
            torch.cuda.empty_cache()
            continue
        fast = sorted(ms)[:5]
        cv = statistics.pstdev(ms) / statistics.mean(ms) if statistics.mean(ms) > 0 else 0.0
        w, f = writers[op]
        bwd_cell = [] if not extra_cols else [a.dtype, f"{sum(sorted(bwd_ms)[:5]) / 5:.6g}" if bwd_ms else ""]
        w.writerow([op, f"{sum(fast) / len(fast):.6g}", name] + list(shape) + bwd_cell + [f"{cv:.4f}", where])
        done += 1
        if done % 200 == 0:
            for f in files:
                f.flush()
            print(f"{done} rows at {time.time() - t0:.0f} s", flush=True)
        if i % 50 == 0 and dev == "cuda":
            torch.cuda.empty_cache()
    for f in files:
        f.close()
    skipped.close()
    print(f"wrote {done} rows in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
