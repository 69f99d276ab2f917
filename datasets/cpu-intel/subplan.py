#!/usr/bin/env python3
"""Every k-th config of each cpu-v2 family plan (k = argv[1]), families taken in
turn as in ../cpu-v2/interleave.py: a test set that spans every family and, since
a plan lists its configs by layer count first, every size of that family."""
import json
import sys

k = int(sys.argv[1])
fams = ["bert", "gpt2", "t5", "vit", "deit", "llama", "opt", "gptneo"]
plans = [json.load(open(f"../cpu-v2/plans/{f}.json"))["configs"][::k] for f in fams]
out = []
for i in range(max(len(p) for p in plans)):
    for p in plans:
        if i < len(p):
            out.append(p[i])
print(json.dumps({"kind": "models", "configs": out}, indent=None).replace('}}, {"model"', '}},\n{"model"'))
