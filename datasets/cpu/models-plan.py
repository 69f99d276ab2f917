#!/usr/bin/env python3
"""Writes datasets/cpu/models-plan.json: tiny configs of every zoo family for the
first CPU model campaign (see README-models.md). Deterministic (seeded); only
the standard library. Run from the repository root:
    python3 datasets/cpu/models-plan.py > datasets/cpu/models-plan.json
"""
import json
import random

rng = random.Random(20261122)

# family label -> (config file relative to this plan, size keys, extra overrides)
FAMILIES = {
    "bert":     ("../../models/bert-base.json", ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), {}),
    "bert-cls": ("../../models/bert-base.json", ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
                 {"architectures": ["BertForSequenceClassification"], "num_labels": 4}),
    "gpt2":     ("../../models/gpt2.json", ("n_embd", "n_layer", "n_head", "n_inner"), {}),
    "gpt-neo":  ("../../models/gpt-neo-125m.json", ("hidden_size", "num_layers", "num_heads", "intermediate_size"), {}),
    "opt":      ("../../models/opt-125m.json", ("hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim"), {}),
    "llama":    ("../../models/llama-style.json", ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), {}),
    "t5":       ("../../models/t5-small.json", ("d_model", "num_layers", "num_heads", "d_ff"), {}),
    "vit":      ("../../models/vit-base.json", ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), {}),
    "deit":     ("../../models/deit-tiny.json", ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), {}),
}
PER_FAMILY = 8

configs = []
for fam, (path, keys, extra) in FAMILIES.items():
    seen = set()
    while len([c for c in configs if c["_fam"] == fam]) < PER_FAMILY:
        hidden = rng.choice([64, 128, 192, 256])
        layers = rng.choice([1, 2, 3])
        heads = rng.choice([h for h in (2, 4, 8) if hidden % h == 0])
        ffn = hidden * rng.choice([2, 4])
        batch = rng.choice([1, 2, 4, 8])
        seq = rng.choice([32, 64, 128])
        opt = rng.choice(["adamw", "adamw", "adam", "sgd"])
        ov = dict(zip(keys, (hidden, layers, heads, ffn)))
        ov.update(extra)
        settings = {"batch": batch, "dtype": "fp32", "optimizer": opt}
        if fam in ("vit", "deit"):
            img, patch = rng.choice([(32, 8), (64, 16), (32, 4)])
            ov.update({"image_size": img, "patch_size": patch, "num_labels": 10})
            settings["image_size"] = img
        else:
            ov["vocab_size"] = rng.choice([500, 1000, 2000])
            settings["seq_len"] = seq
        if fam == "llama":
            ov["num_key_value_heads"] = rng.choice([k for k in (1, 2, heads) if heads % k == 0])
        if fam == "t5":
            ov["d_kv"] = hidden // heads
            ov["num_decoder_layers"] = layers
            settings["tgt_len"] = rng.choice([seq // 2, seq])
        if fam == "gpt-neo":
            ov["attention_types"] = [[["global", "local"], (layers + 1) // 2]]
            ov["num_layers"] = 2 * ((layers + 1) // 2)
        key = json.dumps([ov, settings], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        configs.append({"_fam": fam, "model": path, "overrides": ov, "settings": settings})

for c in configs:
    del c["_fam"]
print(json.dumps({"kind": "models", "configs": configs}, indent=1))
