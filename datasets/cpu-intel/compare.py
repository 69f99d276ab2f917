#!/usr/bin/env python3
"""This machine against cpu-v2 on the configs both measured (same resume key):
ratio of iteration times and of ok layer forward times (README.md here).
  python3 datasets/cpu-intel/compare.py     (repository root)"""
import sqlite3


def q(path, sql):
    return dict(sqlite3.connect(path).execute(sql))


def stats(r):
    r = sorted(r)
    return f"{len(r)} configs, median {r[len(r) // 2]:.2f}x, p10 {r[len(r) // 10]:.2f}x, p90 {r[9 * len(r) // 10]:.2f}x"


I = q("datasets/cpu-intel/cpu-intel.sqlite", "select config_key, iter_median_ms from models")
A = {}
for p in ("datasets/cpu-v2/cpu-v2.sqlite", "datasets/cpu-v2/cpu-v2-rest.sqlite"):
    A.update(q(p, "select config_key, iter_median_ms from models where campaign = 'cpu-v2-models'"))
print("iterations:", stats(I[k] / A[k] for k in I if A.get(k)))
IL = q("datasets/cpu-intel/cpu-intel.sqlite", "select config_key, fwd_median_ms from layers where status = 'ok'")
AL = q("datasets/cpu-v2/cpu-v2.sqlite", "select config_key, fwd_median_ms from layers where status = 'ok'")
print("layer forward:", stats(IL[k] / AL[k] for k in IL if k in AL))
