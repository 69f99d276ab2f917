#!/usr/bin/env python3
"""Times Hugging Face models end to end on a GPU the way NeuSight's labels were
timed, so that a GPU the public data lacks gets labels of the same kind.

Protocol (datasets/neusight/README.md): FP32 with TF32 off, eager attention,
CUDA events around each iteration, the label is the mean of the fastest 5 of
the timed runs (25 when an iteration is short, fewer when it is long: see
--run-seconds). inference = forward under no_grad in eval mode; fwd-bwd =
forward with the LM loss and loss.backward() in train mode (dropout on), no
optimizer step, gradients set to None between iterations (untimed).

The runs are the (model, mode, seq, batch) of every single-GPU eager label in
--labels (the artifact's file names), plus --extra entries. One CSV row per run
is written (and flushed) as soon as it is measured; a run that does not fit in
memory is recorded as "oom". Needs torch and transformers; runs on the GPU
machine (docs/unseen-gpu.md, "An H200 test set").

    python3 scripts/gpu/hf_e2e_bench.py --out h200.csv --budget-s 300
"""
import argparse
import csv
import gc
import json
import os
import re
import statistics
import sys
import time

import torch
import transformers

import cuda_timing

LABEL_RE = re.compile(r"^(?P<model>[a-z0-9_]+)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)\.json$")


def label_runs(labels_dir):
    runs = set()
    for gpu in sorted(os.listdir(labels_dir)):
        for f in os.listdir(os.path.join(labels_dir, gpu)):
            m = LABEL_RE.match(f)  # -fusion / -dpN / -tpN / -ppN_M do not match
            if m:
                mode = "inference" if m["mode"] == "inf" else "fwd-bwd"
                runs.add((m["model"], mode, int(m["seq"]), int(m["batch"])))
    return runs


def build(cfg_path, device="cuda"):
    with open(cfg_path) as f:
        d = json.load(f)
    d.pop("torch_dtype", None)  # switchxl4's says bfloat16: the labels are FP32
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    cls = getattr(transformers, cfg.architectures[0])
    with torch.device(device):
        try:
            model = cls._from_config(cfg, attn_implementation="eager")
        except TypeError:
            cfg._attn_implementation = "eager"
            model = cls._from_config(cfg)
    model = model.float()
    impl = getattr(model.config, "_attn_implementation", "?")
    assert impl == "eager", f"attention implementation is {impl}, not eager"
    return cfg, model


def step_fn(cfg, model, mode, batch, seq, device="cuda"):
    vocab = cfg.vocab_size
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    kw = {"input_ids": ids}
    if cfg.is_encoder_decoder:
        kw["decoder_input_ids"] = torch.randint(0, vocab, (batch, seq), device=device)
    if mode == "inference":
        model.eval()

        def run():
            with torch.no_grad():
                model(**kw)
    else:
        model.train()
        kw["labels"] = kw.get("decoder_input_ids", ids)

        def run():
            model(**kw).loss.backward()
    return run


def clear_grads():
    for p in MODEL_PARAMS:
        p.grad = None


def time_runs(run, runs, warmup):
    """Gradients set to None (untimed) before each timed iteration."""
    return cuda_timing.time_runs(run, runs, warmup, before_each=clear_grads)


MODEL_PARAMS = []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", default="datasets/neusight/labels")
    ap.add_argument("--configs", default="datasets/neusight/model_configs")
    ap.add_argument("--extra", default="fwd-bwd:bert_large:512:4,fwd-bwd:gpt2_large:1024:4,fwd-bwd:gpt3_xl:2048:1,"
                    "fwd-bwd:gpt3_xl:2048:2,fwd-bwd:opt_13:2048:2,fwd-bwd:gpt3_27:2048:1,fwd-bwd:switchxl4:512:1",
                    help="comma-separated mode:model:seq:batch runs besides the labels'")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=25, help="timed runs at most")
    ap.add_argument("--run-seconds", type=float, default=6.0, help="fewer runs (>= 8) when runs x iteration exceed this")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=300, help="stop starting new runs after this many seconds")
    a = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    runs = label_runs(a.labels)
    for e in filter(None, a.extra.split(",")):
        mode, model, seq, batch = e.split(":")
        runs.add((model, mode, int(seq), int(batch)))
    # inference first (the labels' mode on every GPU), small models first within a mode
    order = sorted(runs, key=lambda r: (r[1] != "inference", r[0], r[2] * r[3]))
    t0 = time.time()
    fields = ["gpu", "model", "mode", "seq", "batch", "status", "label_ms", "median_ms", "cv", "runs", "torch",
              "transformers", "note"]
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "transformers": transformers.__version__}
    with open(a.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        by_model = {}
        for r in order:
            by_model.setdefault(r[0], []).append(r)
        for name in sorted(by_model, key=lambda n: min(order.index(r) for r in by_model[n])):
            try:
                cfg, model = build(os.path.join(a.configs, name + ".json"))
            except Exception as e:  # noqa: BLE001 -- recorded, the other models still run
                for (_, mode, seq, batch) in by_model[name]:
                    w.writerow(dict(env, model=name, mode=mode, seq=seq, batch=batch, status="error",
                                    note=f"build: {type(e).__name__}: {e}"[:300]))
                fh.flush()
                print(f"{name}: build failed: {e}", flush=True)
                continue
            MODEL_PARAMS[:] = list(model.parameters())
            for (_, mode, seq, batch) in sorted(by_model[name], key=order.index):
                row = dict(env, model=name, mode=mode, seq=seq, batch=batch)
                if time.time() - t0 > a.budget_s:
                    row.update(status="skipped", note="time budget")
                else:
                    try:
                        run = step_fn(cfg, model, mode, batch, seq)
                        probe = time_runs(run, 1, a.warmup)[0]
                        n = max(8, min(a.runs, int(a.run_seconds * 1000 / probe)))
                        t = time_runs(run, n, 0)
                        fast = sorted(t)[:5]
                        row.update(status="ok", label_ms=f"{sum(fast) / len(fast):.3f}",
                                   median_ms=f"{statistics.median(t):.3f}",
                                   cv=f"{statistics.pstdev(t) / statistics.mean(t):.4f}", runs=n)
                    except torch.cuda.OutOfMemoryError:
                        row.update(status="oom")
                    except Exception as e:  # noqa: BLE001 -- recorded, the other runs still run
                        row.update(status="error", note=f"{type(e).__name__}: {e}"[:300])
                    run = None
                    for p in MODEL_PARAMS:
                        p.grad = None
                    gc.collect()
                    torch.cuda.empty_cache()
                w.writerow(row)
                fh.flush()
                print(f"[{time.time() - t0:6.1f} s] {row}", flush=True)
            del model
            MODEL_PARAMS.clear()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
