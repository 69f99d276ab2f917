#!/usr/bin/env python3
"""The model plan of datasets/cpu-deepseek: the nine sizes of cpu-llamas (every 6th config of
cpu-v2's Llama plan: hidden, FFN, heads, layers, vocab, batch, seq), built as DeepSeek-V2-Lite
(latent attention with one q projection, 2 shared experts), DeepSeek-V3 (q through a latent
too, 1 shared expert) and Qwen1.5-MoE (qwen2_moe, a sigmoid-gated shared expert), beside
llama-style (the family the training data has) as the reference on this machine.
Latent attention at head size d = hidden / heads: qk_nope d, qk_rope d/2 (even), v d, kv
latent hidden/4, q latent (V3) hidden/2. Mixtures: 8 experts of FFN/4, top 2; the first FFN
dense (FFN) where there are two layers or more; Qwen1.5-MoE's shared expert FFN/2. Then gpt-oss
(attention sinks, biased fused experts) at the same sizes, appended after the first 36 runs."""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
base = json.load(open(os.path.join(here, "..", "cpu-v2", "plans", "llama.json")))["configs"][::6]
configs = []
for c in base:
    o0 = dict(c["overrides"])
    h, heads, f = o0["hidden_size"], o0["num_attention_heads"], o0["intermediate_size"]
    d = h // heads
    moe = {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": max(1, f // 4),
           "first_k_dense_replace": 1 if o0["num_hidden_layers"] > 1 else 0, "moe_layer_freq": 1}
    mla = {"qk_nope_head_dim": d, "qk_rope_head_dim": max(2, d // 4 * 2), "v_head_dim": d,
           "kv_lora_rank": max(16, h // 4), "num_key_value_heads": heads}
    types = {
        "llama-style": {"head_dim": d},
        "deepseek-v2-lite": {**mla, **moe, "q_lora_rank": None, "n_shared_experts": 2},
        "deepseek-v3": {**mla, **moe, "q_lora_rank": max(16, h // 2), "n_shared_experts": 1},
        "qwen1.5-moe-a2.7b": {"head_dim": d, "num_experts": 8, "num_experts_per_tok": 2,
                              "moe_intermediate_size": max(1, f // 4),
                              "shared_expert_intermediate_size": max(1, f // 2)},
    }
    for name, extra in types.items():
        o = dict(o0)
        o.update(extra)
        configs.append({"model": f"../../models/{name}.json", "overrides": o, "settings": c["settings"]})
# Added after the first 36 runs (README): gpt-oss at the same sizes, appended so that the store's
# earlier runs keep their places: 8 experts of FFN/4, top 2, head_dim d.
for c in base:
    o = dict(c["overrides"])
    h, heads, f = o["hidden_size"], o["num_attention_heads"], o["intermediate_size"]
    o.update({"head_dim": h // heads, "intermediate_size": max(1, f // 4), "num_local_experts": 8,
              "num_experts_per_tok": 2})
    configs.append({"model": "../../models/gpt-oss-20b.json", "overrides": o, "settings": c["settings"]})
json.dump({"kind": "models", "configs": configs}, sys.stdout, indent=1)
print()
