#!/usr/bin/env python3
"""Plans of the memory campaign (issue #15); writes plans/id.json and plans/ood.json.

id:  every 6th config of datasets/cpu-v2/plans/models.json (the D-optimal CPU
     designs of eight families: 1..8 layers, hidden 64..512), the mode cycling
     train / fwd-bwd / inference, so every family has all three modes.
ood: the reference models of models/ (GPT-2, GPT-Neo 125M, OPT-125m, BERT-base,
     T5-small, ViT-base, DeiT-small, Llama-style, Switch-base-8) as Hugging Face
     configures them, at batch 1-2: 4-60x the parameters of any id config.
Deterministic: no randomness, so the plans are reproducible from this script.
"""
import json, os

here = os.path.dirname(os.path.abspath(__file__))
src = json.load(open(os.path.join(here, "../cpu-v2/plans/models.json")))
modes = [{}, {"optimizer_step": False}, {"backward": False}]

def rebase(path):  # plan paths are relative to the plan file
    return os.path.relpath(os.path.normpath(os.path.join(here, "../cpu-v2/plans", path)), os.path.join(here, "plans"))

ids = []
for i, c in enumerate(src["configs"][::6]):
    c = dict(c)
    c["model"] = rebase(c["model"])
    c["settings"] = dict(c["settings"], **modes[i % 3])
    if c["settings"].get("backward") is False:
        c["settings"]["optimizer_step"] = False
    ids.append(c)

ood = []
refs = [("gpt2.json", {"seq_len": 128}), ("gpt-neo-125m.json", {"seq_len": 128}), ("opt-125m.json", {"seq_len": 128}),
        ("bert-base.json", {"seq_len": 128}), ("t5-small.json", {"seq_len": 128}), ("vit-base.json", {}),
        ("deit-small.json", {}), ("llama-style.json", {"seq_len": 128}), ("switch-base-8.json", {"seq_len": 64})]
for k, (f, extra) in enumerate(refs):
    for j, mode in enumerate(modes):
        s = {"batch": 1 + (k + j) % 2, "dtype": "fp32", "optimizer": "adamw", "optimizer_step": True}
        s.update(extra)
        s.update(mode)
        if s.get("backward") is False:
            s["optimizer_step"] = False
        ood.append({"model": "../../../models/" + f, "settings": s})

for name, cfgs in (("id", ids), ("ood", ood)):
    with open(os.path.join(here, "plans", name + ".json"), "w") as fh:
        json.dump({"kind": "models", "configs": cfgs}, fh, indent=1)
    print(name, len(cfgs), "configs")
