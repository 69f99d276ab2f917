#!/usr/bin/env python3
"""The layer plan measured twice on this machine (cpu-zen4.sqlite, then layers-again.sqlite,
five minutes after the campaign ended): ratio again / first of each config's forward
median, over the configs ok both times and over all (README.md here).
  python3 datasets/cpu-zen4/repeat.py      (repository root)"""
import sqlite3


def rows(path):
    return {r[0]: r[1:] for r in sqlite3.connect(path).execute(
        "select config_key, fwd_median_ms, status from layers where fwd_median_ms > 0")}


def stats(r):
    r = sorted(r)
    return f"{len(r)} configs, median {r[len(r) // 2]:.3f}, p10 {r[len(r) // 10]:.3f}, p90 {r[9 * len(r) // 10]:.3f}"


A = rows("datasets/cpu-zen4/cpu-zen4.sqlite")
B = rows("datasets/cpu-zen4/layers-again.sqlite")
print("ok both times:", stats(B[k][0] / A[k][0] for k in A if k in B and A[k][1] == B[k][1] == "ok"))
print("all:", stats(B[k][0] / A[k][0] for k in A if k in B))
