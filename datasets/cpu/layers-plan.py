#!/usr/bin/env python3
"""Writes layers-plan.json: the first CPU layer campaign (layers-README.md here).

Shapes resemble Transformer layers (tokens 64..2048, hidden 64..1024) but
matmuls are capped at ~1.1 GFLOP forward so that the whole campaign runs in a
few minutes on a 2-core CPU. Standard library only; deterministic.
"""
import json
import os

MAX_MM_FLOP = 1.1e9
cfgs = []


def add(t, **dims):
    cfgs.append({"type": t, "dims": dims, "dtype": "fp32"})


for tokens in (64, 256, 512, 1024, 2048):
    for d_in, d_out in ((64, 256), (256, 256), (256, 1024), (1024, 256), (512, 512), (768, 768), (768, 3072)):
        if 2 * tokens * d_in * d_out <= MAX_MM_FLOP:
            add("linear", tokens=tokens, d_in=d_in, d_out=d_out, bias=1)
add("linear", tokens=512, d_in=512, d_out=512, bias=0)
add("linear", tokens=1024, d_in=256, d_out=1024, bias=0)

for bh, s, hd in ((8, 128, 64), (16, 128, 64), (24, 256, 64), (48, 128, 64), (8, 512, 32), (12, 256, 64)):
    add("bmm", batch=bh, m=s, n=hd, k=s)   # Q K^T
    add("bmm", batch=bh, m=s, n=s, k=hd)   # P V
for b, h, s, hd in ((1, 4, 64, 32), (1, 8, 128, 64), (2, 8, 128, 64), (2, 12, 128, 64), (4, 12, 128, 64),
                    (1, 12, 256, 64), (2, 4, 256, 32), (1, 8, 512, 64), (2, 16, 64, 64), (4, 4, 128, 32),
                    (1, 16, 256, 64), (2, 12, 256, 64)):
    add("attention", batch=b, heads=h, seq_q=s, seq_k=s, head_dim=hd)

for tokens, hidden in ((64, 64), (256, 256), (512, 512), (512, 768), (1024, 768), (2048, 256), (1024, 1024),
                       (2048, 1024), (256, 1024), (128, 512)):
    add("layernorm", tokens=tokens, hidden=hidden)
for tokens, hidden in ((64, 64), (256, 512), (512, 768), (1024, 1024), (2048, 512), (2048, 1024), (128, 256),
                       (1024, 256)):
    add("rmsnorm", tokens=tokens, hidden=hidden)
for rows, cols in ((512, 64), (1024, 128), (3072, 128), (2048, 256), (6144, 256), (4096, 512), (1536, 128),
                   (8192, 64)):
    add("softmax", rows=rows, cols=cols)

elements = (64 * 64, 256 * 256, 512 * 768, 1024 * 768, 2048 * 512, 2048 * 1024)
for t in ("dropout", "gelu", "relu", "silu", "add", "mul"):
    for n in elements:
        add(t, elements=n)

for tokens, vocab, hidden in ((128, 8000, 256), (512, 8000, 512), (512, 30522, 768), (2048, 30522, 256),
                              (256, 50257, 512), (1024, 32000, 512)):
    add("embedding", tokens=tokens, vocab=vocab, hidden=hidden)
for batch, hidden in ((1, 192), (2, 192), (1, 384), (4, 384), (1, 768), (4, 768)):
    add("conv2d_patch", batch=batch, channels=3, hidden=hidden, image=224, patch=16)
for tokens, classes in ((128, 1000), (512, 1000), (128, 8000), (512, 8000), (256, 30522), (512, 32000)):
    add("cross_entropy", tokens=tokens, classes=classes)
for params in (100_000, 1_000_000, 4_000_000):
    for kind in (0, 1, 2):
        add("optimizer", params=params, kind=kind)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers-plan.json")
with open(out, "w") as f:
    f.write(json.dumps({"kind": "layers", "configs": cfgs}, indent=None, separators=(",", ":")).replace("},{", "},\n{") + "\n")
print(f"{len(cfgs)} configs -> {out}")
