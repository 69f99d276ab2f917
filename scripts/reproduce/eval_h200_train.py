#!/usr/bin/env python3
"""Predicts our H200 training iterations (datasets/h200/training-kinds/hf-train.csv: Hugging Face
models trained as the Trainer runs them with bf16=True: autocast BF16 over FP32 weights, SDPA
attention, fused AdamW; plus LoRA runs) with the shipped path, `scaledl predict` from the H200's
spec sheet and the default bundle, and writes the errors (protocol `h200-hf-train-shipped`;
docs/unseen-gpu.md, "H200 training iterations").

    python3 scripts/reproduce/eval_h200_train.py [--scaledl build/tools/scaledl] \
        [--bundle models/bundles/default] [--out docs/results/h200-training]

Each run is predicted twice: the whole iteration (`--mode train --optimizer adamw`) against the
measured iteration (label: mean of the fastest 5 of up to 12 iterations), and the forward-backward
alone (`--mode fwd-bwd`) against the median of 3 forward-backward passes, so that the optimizer's
share is checked apart; the peak memory predicted for the iteration against
torch.cuda.max_memory_allocated, with `--keep-outputs`: the harness holds the model's outputs (its
logits) through the backward (`--no-keep-outputs`: as the Trainer, which frees them). The dtype recipe is what the runs did: `--dtype amp-bf16`
(autocast over FP32 weights, the Trainer's bf16=True) for full training, `--dtype bf16` for the
LoRA runs (base weights loaded in BF16); `--full-dtype bf16` predicts the full runs as a model
loaded in BF16 instead (what `--dtype bf16` assumed before amp-bf16 existed). Nothing here is
fitted: no H200 iteration trains the bundle.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LORA = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up",
        "down_proj": "down"}


def predict(a, row, mode):
    lora = row["lora"] not in ("", "-")
    cmd = [a.scaledl, "predict", os.path.join(ROOT, row["config"]), "--bundle", a.bundle, "--device-spec",
           a.device_spec, "--batch", row["batch"], "--seq", row["seq"], "--dtype", "bf16" if lora else a.full_dtype,
           "--framework", "hf-sdpa", "--mode", mode, "--json"]
    # The harness (scripts/gpu/gpu_training_kinds.py) runs `out = model(**kw); out.loss.backward()`:
    # `out` holds the logits through the backward (memory only).
    if a.keep_outputs:
        cmd += ["--keep-outputs"]
    if mode == "train":
        cmd += ["--optimizer", "adamw"]
    if lora:
        cmd += ["--lora-rank", "16", "--lora-targets", ",".join(LORA[t] for t in row["lora"].split(","))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    return json.loads(out.stdout), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scaledl", default=os.path.join(ROOT, "build/tools/scaledl"))
    ap.add_argument("--no-keep-outputs", dest="keep_outputs", action="store_false",
                    help="predict the peak of a loop that frees the logits before the backward (the Trainer's)")
    ap.add_argument("--bundle", default=os.path.join(ROOT, "models/bundles/default"))
    ap.add_argument("--device-spec", default="h200-sxm")
    ap.add_argument("--full-dtype", default="amp-bf16", help="--dtype of the full-training runs (amp-bf16, bf16)")
    ap.add_argument("--runs", default=os.path.join(ROOT, "datasets/h200/training-kinds/hf-train.csv"))
    ap.add_argument("--out", help="folder for predictions-<full dtype>.csv (printed only without it)")
    a = ap.parse_args()
    with open(a.runs, newline="") as f:
        runs = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    rows, errs = [], {"train": [], "fwd-bwd": [], "lora": [], "memory": [], "sum": []}
    for r in runs:
        res = {}
        for mode, measured in (("train", "label_ms"), ("fwd-bwd", "fwdbwd_ms")):
            js, why = predict(a, r, mode)
            if js is None:
                res[mode] = (None, why)
                continue
            pred = float(js["t_iter_ms"])
            res[mode] = (pred, float(r[measured]))
            if mode == "train":
                res["memory"] = (js["memory"]["peak_gb"], float(r["peak_gib"]) * 2**30 / 1e9)
                if r["lora"] in ("", "-"):  # the layer sum alone, before the refinement's alpha
                    errs["sum"].append(float(js["t_sum_ms"]) / float(r[measured]) - 1)
        out = {"model": r["model"], "batch": r["batch"], "seq": r["seq"], "lora": r["lora"]}
        for mode in ("train", "fwd-bwd"):
            pred, meas = res[mode]
            if pred is None:
                out[f"{mode}_error"] = meas
                continue
            e = pred / meas - 1
            out.update({f"{mode}_measured_ms": f"{meas:.1f}", f"{mode}_predicted_ms": f"{pred:.1f}",
                        f"{mode}_error_pct": f"{100 * e:+.1f}"})
            (errs["lora"] if r["lora"] not in ("", "-") and mode == "train" else errs[mode]).append(e)
        if "memory" in res:
            pm, mm = res["memory"]
            out.update({"peak_measured_gb": f"{mm:.1f}", "peak_predicted_gb": f"{pm:.1f}",
                        "peak_error_pct": f"{100 * (pm / mm - 1):+.1f}"})
            errs["memory"].append(pm / mm - 1)
        rows.append(out)
    fields = ["model", "batch", "seq", "lora", "train_measured_ms", "train_predicted_ms", "train_error_pct",
              "fwd-bwd_measured_ms", "fwd-bwd_predicted_ms", "fwd-bwd_error_pct", "peak_measured_gb",
              "peak_predicted_gb", "peak_error_pct", "train_error", "fwd-bwd_error"]
    w = csv.DictWriter(sys.stdout, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"predictions-{a.full_dtype}.csv"), "w", newline="") as f:
            w2 = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
            w2.writeheader()
            w2.writerows(rows)

    def mape(xs):
        return (f"MAPE {100 * statistics.mean(abs(x) for x in xs):.1f} %, mean {100 * statistics.mean(xs):+.1f} %, "
                f"n = {len(xs)}") if xs else "n = 0"
    print(f"\nfull training iterations: {mape(errs['train'])}", file=sys.stderr)
    print(f"  their layer sums (T_sum, before the refinement): {mape(errs['sum'])}", file=sys.stderr)
    print(f"LoRA iterations: {mape(errs['lora'])}", file=sys.stderr)
    print(f"forward-backward (every run, LoRA too): {mape(errs['fwd-bwd'])}", file=sys.stderr)
    print(f"peak memory (every run): {mape(errs['memory'])}", file=sys.stderr)


if __name__ == "__main__":
    main()
