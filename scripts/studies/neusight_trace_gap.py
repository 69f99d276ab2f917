#!/usr/bin/env python3
"""Kernels that the NeuSight labels' Hugging Face models run and ScaleDL's layer
graph does not have, measured from the per-node traces of the NeuSight artifact
(labels/<GPU>/<label>.csv: one transformer block, each torch.fx node timed in
isolation, fw + bw + AccumulateGrad in `latency`, ms).

Two groups, per transformer block:
  score  elementwise kernels on the [batch, heads, seq, seq] attention scores
         besides softmax and the two matmuls: the 1/sqrt(d) division, the causal
         `where` (GPT-2), the additive mask (BERT), OPT's mask add and clamp;
  gelu   HF's NewGELUActivation (gelu_new: GPT-2 / GPT-3 configs) is eight
         eager kernels on [batch, seq, 4h]; ScaleDL costs one fused GELU, so the
         other seven (all but the tanh) are missing.
Missing per iteration = per-block ms x num_layer (OPT's mask preparation is
counted per block though it runs once: an upper bound there).

With --predictions (a predictions.csv of `scaledl eval`), also the oracle
question: the MRE per GPU if each `sum` prediction (seed 0) had these kernels
added at their measured time on that GPU.

  python3 scripts/studies/neusight_trace_gap.py --root NEUSIGHT_ARTIFACT \
      [--predictions docs/results/unseen-gpu/e2e-transfer/predictions.csv]

NEUSIGHT_ARTIFACT is the NeuSight artifact's data folder (its labels/ holds the
.csv traces; datasets/neusight keeps the JSON labels only).
"""
import argparse
import collections
import csv
import glob
import json
import os
import re

SCORE_OPS = ("truediv", "where", "built-in function add", "built-in function sub", "built-in function mul",
             "built-in method max")
GELU_NODES = ("mul", "pow_1", "pow_2", "mul_1", "add_12", "mul_2", "add_13", "mul_3")  # tanh excluded


def shape4_square(shapes):
    for m in re.finditer(r"\[(\d+), (\d+), (\d+), (\d+)\]", shapes):
        if m.group(3) == m.group(4) and int(m.group(3)) > 1:
            return True
    return False


def trace_gap(path):
    rows = list(csv.DictReader(open(path)))
    score = gelu = 0.0
    has_tanh = any(r["Name"] == "tanh" for r in rows)
    for r in rows:
        lat = float(r["latency"] or 0)
        tgt, name = r["target"], r["Name"]
        if any(k in tgt for k in SCORE_OPS) and shape4_square(r["input_shapes"]) and lat > 0.05:
            score += lat
        elif has_tanh and name in GELU_NODES and "[" in r["input_shapes"] and lat > 0.05:
            gelu += lat
    return score, gelu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--predictions")
    a = ap.parse_args()
    labels = {}
    print("| GPU | label | e2e ms | layers | score ms/block | gelu ms/block | missing % of e2e |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(a.root, "labels", "*", "*.csv"))):
        gpu = os.path.basename(os.path.dirname(path))
        lab = json.load(open(path[:-4] + ".json"))
        nl = lab.get("num_layer") or 0
        m = re.match(r"(.*)-(inf|train)-(\d+)-(\d+)$", os.path.basename(path)[:-4])
        if not m or nl <= 0:
            continue
        score, gelu = trace_gap(path)
        miss = (score + gelu) * nl
        labels[(gpu, m.group(1), "inference" if m.group(2) == "inf" else "fwd-bwd", int(m.group(4)),
                int(m.group(3)))] = miss
        print(f"| {gpu} | {os.path.basename(path)[:-4]} | {lab['e2e_latency']:.1f} | {nl} | {score:.2f} | "
              f"{gelu:.2f} | {100 * miss / lab['e2e_latency']:.1f} |")
    if not a.predictions:
        return
    per = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])  # runs, traced, ape now, ape with the kernels
    for r in csv.DictReader(open(a.predictions)):
        if r["method"] != "sum" or r["seed"] != "0":
            continue
        dev = r["device"].replace("spec:", "").replace(" ", "_")
        key = (dev, r["model"], r["mode"], int(r["batch"]), int(r["seq_len"]))
        meas, pred = float(r["measured_ms"]), float(r["predicted_ms"])
        extra = labels.get(key)
        p = per[r["device"].replace("spec:", "")]
        p[0] += 1
        p[1] += extra is not None
        p[2] += abs(pred - meas) / meas
        p[3] += abs(pred + (extra or 0) - meas) / meas
    print()
    print("| GPU | runs | with a trace | sum MRE % | sum + missing kernels (oracle) MRE % |")
    print("|---|---|---|---|---|")
    tot = [0, 0, 0.0, 0.0]
    for g, p in sorted(per.items()):
        print(f"| {g} | {p[0]} | {p[1]} | {100 * p[2] / p[0]:.1f} | {100 * p[3] / p[0]:.1f} |")
        tot = [x + y for x, y in zip(tot, p)]
    print(f"| all | {tot[0]} | {tot[1]} | {100 * tot[2] / tot[0]:.1f} | {100 * tot[3] / tot[0]:.1f} |")


if __name__ == "__main__":
    main()
