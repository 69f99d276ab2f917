#!/usr/bin/env python3
"""Prints the figures of README.md from the committed stores (standard library only):
row counts by status, CV spread, iteration-time range, per-family counts, probes.

    python3 datasets/cpu-v2/summary.py datasets/cpu-v2/cpu-v2.sqlite [datasets/cpu-v2/cpu-v2-2threads.sqlite]
"""
import json
import sqlite3
import statistics
import sys


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))] if v else float("nan")


for path in sys.argv[1:]:
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    print(f"== {path}")
    for (d,) in c.execute("select record from devices"):
        r = json.loads(d)
        print(f"device {r['kind']}:{r['name']}: matmul {r['measured_gflops']:.1f} GFLOP/s, copy {r['measured_bw_gbs']:.1f} GB/s")
    for (e,) in c.execute("select env from environments"):
        e = json.loads(e)
        print(f"environment: tool {e.get('tool', 'bench layers')}, commit {e.get('git_commit')}, threads {e.get('threads')}, "
              f"blas_threads {e.get('blas_threads')}, libtorch {e.get('libtorch')}")
    rows = c.execute("select status, count(*) from layers group by status").fetchall()
    if rows:
        print("layers by status:", dict(rows))
        for col in ("fwd_cv", "bwd_cv"):
            v = [x for (x,) in c.execute(f"select {col} from layers where {col} is not null")]
            print(f"  {col}: p10 {q(v, .1):.3f} median {q(v, .5):.3f} p90 {q(v, .9):.3f} max {max(v):.3f}")
        t = c.execute("select min(created_at), max(created_at) from layers").fetchone()
        print(f"  first/last row: {t[0]} / {t[1]}")
    for camp, in c.execute("select distinct campaign from models"):
        m = c.execute("select status, iter_median_ms, iter_cv, family, created_at from models where campaign=?",
                      (camp,)).fetchall()
        st = {}
        for s, *_ in m:
            st[s] = st.get(s, 0) + 1
        it = [x[1] for x in m]
        cv = [x[2] for x in m]
        fam = {}
        for x in m:
            fam[x[3]] = fam.get(x[3], 0) + 1
        print(f"models {camp}: {len(m)} runs {st}; usable (ok or iter CV <= 0.10): "
              f"{sum(1 for x in m if x[0] == 'ok' or x[2] <= 0.10)}")
        print(f"  iteration median {min(it):.2f} .. {max(it):.1f} ms (median {statistics.median(it):.1f} ms); "
              f"iter CV median {q(cv, .5):.3f} p90 {q(cv, .9):.3f} max {max(cv):.3f}")
        print(f"  per family: {dict(sorted(fam.items()))}")
        print(f"  first/last row: {min(x[4] for x in m)} / {max(x[4] for x in m)}")
