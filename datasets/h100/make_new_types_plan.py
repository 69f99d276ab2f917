#!/usr/bin/env python3
"""The model plan datasets/h100/new-types-plan.json, for the next lent GPU (scripts/gpu/gpu_campaign.sh,
NEW_TYPES_S): the model_types no GPU has run (Mixtral, Qwen3-MoE, DeepSeek-V2-Lite / V3, gpt-oss,
Qwen3, Gemma 2) beside llama-style, at three sizes each, BF16 training with AdamW, as the zoo runs
them (experts as batched matmuls at their mean load). Not yet run: no GPU was lent since.
    python3 datasets/h100/make_new_types_plan.py > datasets/h100/new-types-plan.json"""
import json, sys

sizes = [  # hidden, heads, kv heads, FFN, layers, batch, seq
    (1024, 16, 4, 4096, 4, 8, 1024),
    (2048, 16, 4, 5632, 4, 4, 1024),
    (2048, 32, 8, 8192, 8, 4, 2048),
]
configs = []
for h, H, kv, f, L, b, s in sizes:
    d = h // H
    base = {"hidden_size": h, "num_attention_heads": H, "num_hidden_layers": L, "vocab_size": 32000}
    moe = {"moe_intermediate_size": f // 4}
    types = {
        "llama-style": {"num_key_value_heads": kv, "intermediate_size": f, "head_dim": d},
        "qwen3-0.6b": {"num_key_value_heads": kv, "intermediate_size": f, "head_dim": d},
        "gemma2-2b": {"num_key_value_heads": kv, "intermediate_size": f, "head_dim": d},
        "mixtral-8x7b": {"num_key_value_heads": kv, "intermediate_size": f, "num_local_experts": 8,
                         "num_experts_per_tok": 2},
        "qwen3-30b-a3b": {"num_key_value_heads": kv, "head_dim": d, "num_experts": 16, "num_experts_per_tok": 4, **moe},
        "deepseek-v2-lite": {"intermediate_size": f, "qk_nope_head_dim": d, "qk_rope_head_dim": d // 2,
                             "v_head_dim": d, "kv_lora_rank": h // 4, "n_routed_experts": 16,
                             "num_experts_per_tok": 4, "first_k_dense_replace": 1, **moe},
        "deepseek-v3": {"intermediate_size": f, "qk_nope_head_dim": d, "qk_rope_head_dim": d // 2,
                        "v_head_dim": d, "kv_lora_rank": h // 4, "q_lora_rank": h // 2, "n_routed_experts": 16,
                        "num_experts_per_tok": 4, "first_k_dense_replace": 1, **moe},
        "gpt-oss-20b": {"num_key_value_heads": kv, "head_dim": d, "intermediate_size": f // 4,
                        "num_local_experts": 16, "num_experts_per_tok": 4},
    }
    for name, extra in types.items():
        configs.append({"model": f"../../models/{name}.json", "overrides": {**base, **extra},
                        "settings": {"batch": b, "seq_len": s, "dtype": "bf16", "optimizer": "adamw"}})
json.dump({"kind": "models", "configs": configs}, sys.stdout, indent=1)
print()
