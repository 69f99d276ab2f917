#!/usr/bin/env python3
"""Two passes of the layer plan on this machine as one store: a copy of cpu-zen4.sqlite
whose layer rows carry the geometric mean of the two passes' medians (cpu-zen4.sqlite,
layers-again.sqlite), ok where either pass was ok (docs/results/cpu-zen4/README.md).
  python3 datasets/cpu-zen4/merge_passes.py OUT.sqlite      (repository root)"""
import math
import shutil
import sqlite3
import sys

out = sys.argv[1]
shutil.copyfile("datasets/cpu-zen4/cpu-zen4.sqlite", out)
again = {r[0]: r[1:] for r in sqlite3.connect("datasets/cpu-zen4/layers-again.sqlite").execute(
    "select config_key, fwd_median_ms, bwd_median_ms, status from layers")}


def gmean(x, y):
    return math.sqrt(x * y) if x and y and x > 0 and y > 0 else x


c = sqlite3.connect(out)
for i, key, fwd, bwd, status in list(c.execute("select id, config_key, fwd_median_ms, bwd_median_ms, status from layers")):
    if key not in again:
        continue
    f2, b2, s2 = again[key]
    c.execute("update layers set fwd_median_ms = ?, bwd_median_ms = ?, status = ? where id = ?",
              (gmean(fwd, f2), gmean(bwd, b2), "ok" if "ok" in (status, s2) else "unstable", i))
c.commit()
print(out, dict(c.execute("select status, count(*) from layers group by status").fetchall()))
