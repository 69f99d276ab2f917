#!/usr/bin/env python3
"""A machine against cpu-v2 on the configs both measured (same resume key):
ratio of iteration times and of ok layer forward times (README.md here).
  python3 datasets/cpu-intel/compare.py [NAME]     (repository root; NAME: cpu-intel,
  or another machine measured by campaign.sh, e.g. cpu-zen4)"""
import sqlite3
import sys


def q(path, sql):
    return dict(sqlite3.connect(path).execute(sql))


def stats(r):
    r = sorted(r)
    return f"{len(r)} configs, median {r[len(r) // 2]:.2f}x, p10 {r[len(r) // 10]:.2f}x, p90 {r[9 * len(r) // 10]:.2f}x"


NAME = sys.argv[1] if len(sys.argv) > 1 else "cpu-intel"
STORE = f"datasets/{NAME}/{NAME}.sqlite"
I = q(STORE, "select config_key, iter_median_ms from models")
A = {}
for p in ("datasets/cpu-v2/cpu-v2.sqlite", "datasets/cpu-v2/cpu-v2-rest.sqlite"):
    A.update(q(p, "select config_key, iter_median_ms from models where campaign = 'cpu-v2-models'"))
print("iterations:", stats(I[k] / A[k] for k in I if A.get(k)))
IL = q(STORE, "select config_key, fwd_median_ms from layers where status = 'ok'")
AL = q("datasets/cpu-v2/cpu-v2.sqlite", "select config_key, fwd_median_ms from layers where status = 'ok'")
print("layer forward:", stats(IL[k] / AL[k] for k in IL if k in AL))
