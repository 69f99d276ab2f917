#!/usr/bin/env python3
"""The model plan of datasets/cpu-llamas: every 6th config of cpu-v2's Llama plan, built as
each Llama-family model_type that no CPU campaign had measured (Mistral, Qwen2, Qwen3, Gemma,
Gemma 2, Gemma 3, Phi-3, Mixtral, Qwen3-MoE) with the same sizes (hidden, FFN, heads, kv
heads, layers, vocab, batch, seq). head_dim = hidden / heads for every type (Gemma's
configs give 256); Mixtral 4 experts, top 2; Qwen3-MoE 8 experts of FFN/4, top 2."""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
base = json.load(open(os.path.join(here, "..", "cpu-v2", "plans", "llama.json")))["configs"][::6]
types = {
    "llama-style": {},  # the family the training data has: the reference on this machine
    "mistral-7b": {},
    "qwen2-0.5b": {},
    "qwen3-0.6b": {},
    "gemma-2b": {},
    "gemma2-2b": {},
    "gemma3-1b": {},
    "phi3-mini": {},
    "mixtral-8x7b": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3-30b-a3b": {"num_experts": 8, "num_experts_per_tok": 2},
    "pythia-160m": {},  # gpt_neox: added to the plan after the first 90 runs (README)
}
configs = []
for i, c in enumerate(base):
    for name, extra in types.items():
        o = dict(c["overrides"])
        if name != "pythia-160m":  # GPTNeoXConfig has no head_dim and no kv heads
            o["head_dim"] = o["hidden_size"] // o["num_attention_heads"]
        else:
            o.pop("num_key_value_heads", None)
        if name == "qwen3-30b-a3b":
            o["moe_intermediate_size"] = max(1, o["intermediate_size"] // 4)
        o.update(extra)
        configs.append({"model": f"../../models/{name}.json", "overrides": o, "settings": c["settings"]})
json.dump({"kind": "models", "configs": configs}, sys.stdout, indent=1)
print()
