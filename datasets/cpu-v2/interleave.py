#!/usr/bin/env python3
"""Merges model plans (same folder) into one, taking one config of each family in
turn, so that a campaign stopped early has measured every family alike."""
import json
import sys

plans = [json.load(open(p))["configs"] for p in sys.argv[1:]]
out = []
for i in range(max(len(p) for p in plans)):
    for p in plans:
        if i < len(p):
            out.append(p[i])
print(json.dumps({"kind": "models", "configs": out}, indent=None).replace('}}, {"model"', '}},\n{"model"'))
