#!/usr/bin/env python3
"""Merges model plans (same folder) into one, taking one config of each family in
turn, so that a campaign stopped early has measured every family alike."""
import json
import sys


def interleave(plans):
    """plans: lists of configs -> one list, one config of each plan in turn."""
    out = []
    for i in range(max(len(p) for p in plans)):
        for p in plans:
            if i < len(p):
                out.append(p[i])
    return out


def dump(configs):
    return json.dumps({"kind": "models", "configs": configs}, indent=None).replace('}}, {"model"', '}},\n{"model"')


if __name__ == "__main__":
    print(dump(interleave([json.load(open(p))["configs"] for p in sys.argv[1:]])))
