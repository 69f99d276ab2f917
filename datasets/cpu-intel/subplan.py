#!/usr/bin/env python3
"""Every k-th config of each cpu-v2 family plan (k = argv[1]), families taken in
turn as in ../cpu-v2/interleave.py: a test set that spans every family and, since
a plan lists its configs by layer count first, every size of that family."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cpu-v2"))
from interleave import dump, interleave  # noqa: E402

k = int(sys.argv[1])
fams = ["bert", "gpt2", "t5", "vit", "deit", "llama", "opt", "gptneo"]
print(dump(interleave([json.load(open(f"../cpu-v2/plans/{f}.json"))["configs"][::k] for f in fams])))
