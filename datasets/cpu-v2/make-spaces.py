#!/usr/bin/env python3
"""Writes spaces/<family>.json: the model design spaces of the cpu-v2 campaign
(README.md here). One space per family so that `scaledl plan` chooses a
D-optimal set of configurations for each family (ScaleDL section IV-A: 200 per
family; Llama, OPT and GPT-Neo 50 each). Standard library only; deterministic.

Sizes span 1..8 layers, hidden 64..512, up to 2048 tokens per batch. A FLOP
budget (estimated training FLOP per iteration <= MAX_GFLOP) keeps the largest
iterations near 1 s on one thread of the 2-core VM: without it the D-optimal
design would put most points at the corner where every size is largest.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_GFLOP = 40

TEXT = {
    # family: (base config, layers factor for the FLOP estimate, gated FFN, MLM/LM head)
    "bert": ("../../../models/bert-base.json", "1", False),
    "gpt2": ("../../../models/gpt2.json", "1", False),
    "t5": ("../../../models/t5-small.json", "2.5", False),
    "llama": ("../../../models/llama-style.json", "1", True),
    "opt": ("../../../models/opt-125m.json", "1", False),
    "gptneo": ("../../../models/gpt-neo-125m.json", "1", False),
}
VISION = {
    "vit": "../../../models/vit-base.json",
    "deit": "../../../models/deit-small.json",
}


def common(family):
    params = [
        {"name": "num_layers", "kind": "integer", "min": 1, "max": 8, "step": 1},
        {"name": "hidden", "kind": "grid", "values": [64, 128, 192, 256, 384, 512]},
        {"name": "heads", "kind": "grid", "values": [2, 4, 8]},
        {"name": "ffn_dim", "_comment": "FFN inner size: 2x or 4x hidden (constraint)", "kind": "grid",
         "values": [128, 256, 384, 512, 768, 1024, 1536, 2048]},
        {"name": "settings.batch", "kind": "grid", "values": [1, 2, 4, 8, 16]},
    ]
    if family == "llama":
        params.append({"name": "kv_heads", "kind": "grid", "values": [1, 2, 4]})
    return params


def space(family):
    vision = family in VISION
    params = common(family)
    derived = []
    cons = [{"expr": "ffn_dim == 2 * hidden || ffn_dim == 4 * hidden"},
            {"expr": "hidden % heads == 0 && hidden / heads >= 16", "_comment": "whole heads of >= 16 dims"}]
    if family == "llama":
        cons.append({"expr": "heads % kv_heads == 0"})
    if vision:
        base = VISION[family]
        params += [
            {"name": "settings.image_size", "kind": "grid", "values": [32, 64, 96, 128, 160, 224]},
            {"name": "overrides.patch_size", "kind": "grid", "values": [8, 16]},
        ]
        derived += [
            {"name": "overrides.image_size", "_comment": "position table = the trained image", "expr": "settings.image_size"},
            {"name": "tok", "expr": "settings.batch * ((settings.image_size / overrides.patch_size) * (settings.image_size / overrides.patch_size) + 2)"},
            {"name": "seqv", "expr": "(settings.image_size / overrides.patch_size) * (settings.image_size / overrides.patch_size) + 2"},
            {"name": "gflop", "expr": "(6 * tok * num_layers * (4 * hidden * hidden + 2 * hidden * ffn_dim) + 12 * num_layers * tok * seqv * hidden) / 1e9"},
        ]
        cons.append({"expr": "settings.image_size % overrides.patch_size == 0"})
    else:
        base, lf, gated = TEXT[family]
        params += [
            {"name": "settings.seq_len", "kind": "grid", "values": [32, 64, 128, 256, 512]},
            {"name": "overrides.vocab_size", "kind": "grid", "values": [1000, 4000, 8000]},
        ]
        ffn = "3 * hidden * ffn_dim" if gated else "2 * hidden * ffn_dim"
        derived += [
            {"name": "tok", "expr": "settings.batch * settings.seq_len"},
            {"name": "gflop", "expr": f"(6 * tok * ({lf} * num_layers * (4 * hidden * hidden + {ffn}) + overrides.vocab_size * hidden) + {lf} * 12 * num_layers * tok * settings.seq_len * hidden) / 1e9"},
        ]
        if family == "opt":
            derived.append({"name": "overrides.word_embed_proj_dim", "expr": "hidden"})
    cons += [
        {"expr": "tok <= 2048", "_comment": "at most 2048 tokens per batch"},
        {"expr": f"gflop <= {MAX_GFLOP}", "_comment": "iteration near 1 s or less on one thread"},
        {"max_memory_gb": 8},
    ]
    return {
        "_comment": f"cpu-v2 campaign, family {family}: written by make-spaces.py (README.md here).",
        "kind": "models",
        "terms": "quadratic",
        "fixed": {"settings.optimizer": "adamw", "settings.optimizer_step": True, "settings.dtype": "fp32"},
        "parameters": [{"name": "model", "kind": "categorical", "values": [{"label": family, "value": base}]}] + params,
        "derived": derived,
        "constraints": cons,
    }


for fam in list(TEXT) + list(VISION):
    with open(os.path.join(HERE, "spaces", f"{fam}.json"), "w") as f:
        json.dump(space(fam), f, indent=1)
        f.write("\n")
print("spaces:", ", ".join(list(TEXT) + list(VISION)))
