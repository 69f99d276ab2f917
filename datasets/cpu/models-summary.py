#!/usr/bin/env python3
"""Summarises a models campaign store (README-models.md): rows per status and
family, iteration-time range, and the CV (stddev/mean over the timed repeats)
of iter and iter_noopt. Standard library only.
    python3 datasets/cpu/models-summary.py datasets/cpu/models.sqlite
"""
import json
import sqlite3
import statistics
import sys

db = sqlite3.connect(sys.argv[1] if len(sys.argv) > 1 else "datasets/cpu/models.sqlite")
rows = db.execute("SELECT family, status, iter_median_ms, iter_cv, noopt_median_ms, noopt_cv, node_times, reason "
                  "FROM models").fetchall()
print(f"rows: {len(rows)}")
by = {}
for f, s, *_ in rows:
    by.setdefault(s, {}).setdefault(f, 0)
    by[s][f] += 1
for s, fams in sorted(by.items()):
    print(f"status {s}: {sum(fams.values())}  " + ", ".join(f"{k} {v}" for k, v in sorted(fams.items())))
timed = [r for r in rows if r[1] in ("ok", "unstable")]
if timed:
    it = [r[2] for r in timed]
    cv = [r[3] for r in timed]
    cvn = [r[5] for r in timed]
    print(f"iter median ms: min {min(it):.2f}  median {statistics.median(it):.2f}  max {max(it):.2f}")
    print(f"iter cv: median {statistics.median(cv):.3f}  p90 {sorted(cv)[int(0.9 * (len(cv) - 1))]:.3f}  max {max(cv):.3f}")
    print(f"iter_noopt cv: median {statistics.median(cvn):.3f}  max {max(cvn):.3f}")
    # Instrumented sum of per-node times vs the uninstrumented iteration (the "gap").
    ratios = []
    for r in timed:
        nt = json.loads(r[6])
        total = sum(ms for _, ms in nt if ms is not None)
        if nt and r[2] > 0:
            ratios.append(total / r[2])
    if ratios:
        print(f"sum(node_times) / iter: median {statistics.median(ratios):.2f}  min {min(ratios):.2f}  max {max(ratios):.2f}")
for r in rows:
    if r[1] in ("oom", "error"):
        print(f"failed ({r[1]}): {r[7]}")
