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

Output: <out>/ops/<op>/<Device>.csv with the artifact's columns OPName, Latency
(ms, 6 significant digits), Device and the shape, then CV (of the 25 runs) and
Set (transformer or the GPU file the shape came from); rows are flushed as they
are measured, a
shape that does not fit is written to <out>/skipped.csv. <out>/env.json records
the library versions and the device. Needs torch and a CUDA GPU.

    python3 scripts/neusight_ops_bench.py --root datasets/neusight --out /tmp/out/ops --budget-s 240
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


def make_fn(op, shape, dev):
    g = torch.Generator(device=dev).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=dev, generator=g)
    if op == "linear":
        _, m, n, k = shape
        x, w, b = rnd(1, m, n), rnd(k, n), rnd(k)
        return lambda: F.linear(x, w, b)
    if op == "bmm":
        bb, m, n, k = shape
        a, c = rnd(bb, m, n), rnd(bb, n, k)
        return lambda: torch.bmm(a, c)
    bb, h = shape
    x = rnd(bb, h)
    if op == "ln":
        w, b = rnd(h), rnd(h)
        return lambda: F.layer_norm(x, (h,), w, b)
    if op == "softmax":
        return lambda: F.softmax(x, dim=-1)
    if op in ("add", "mul", "div", "pow"):
        y = rnd(bb, h)
        fn = {"add": torch.add, "mul": torch.mul, "div": torch.div, "pow": torch.pow}[op]
        return lambda: fn(x, y)
    if op == "addu":
        return lambda: x + 2.0
    if op == "mulu":
        return lambda: x * 2.0
    if op == "divu":
        return lambda: x / 2.0
    if op == "powu":
        return lambda: torch.pow(x, 3.0)
    return {"relu": lambda: F.relu(x), "gelu": lambda: F.gelu(x), "tanh": lambda: torch.tanh(x)}[op]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="datasets/neusight")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("neusight_ops_bench: error: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    name = torch.cuda.get_device_name(0)
    fname = name.replace(" ", "_")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "env.json"), "w") as f:
        json.dump({"device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
                   "runs": a.runs, "warmup": a.warmup, "tf32": False,
                   "label": "mean of the fastest 5 runs, ms"}, f, indent=1)
    work = work_list(a.root)
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
                       + ["CV", "Set"])
            writers[op] = (w, f)
        try:
            ms = cuda_timing.time_runs(make_fn(op, shape, dev), a.runs, a.warmup)
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
        w.writerow([op, f"{sum(fast) / len(fast):.6g}", name] + list(shape) + [f"{cv:.4f}", where])
        done += 1
        if done % 200 == 0:
            for f in files:
                f.flush()
            print(f"{done} rows at {time.time() - t0:.0f} s", flush=True)
        if i % 50 == 0:
            torch.cuda.empty_cache()
    for f in files:
        f.close()
    skipped.close()
    print(f"wrote {done} rows in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
