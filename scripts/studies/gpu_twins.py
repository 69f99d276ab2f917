#!/usr/bin/env python3
"""The same layer models in distribution: how well do they predict a GPU whose other rows they
trained on? Copies the store of scripts/studies/gpu_loo.sh, gives every GPU with layer rows a
twin (the same spec record, named "<name> twin") and moves a random half of its rows to the twin
(seed 1), so that leave-one-GPU-out holding out a twin trains on the GPU's other half. Then
summarises the twins' held-out GEMM rows (linear, forward) by dtype and kernel time.

    python3 scripts/studies/gpu_twins.py make out/gpus/gpus.sqlite out/gpus/twins.sqlite
    build/tools/scaledl eval layers --db out/gpus/twins.sqlite --db datasets/h100/h100.sqlite \\
        --leave-one-out device --methods xgboost --types linear <the bundle's layer options> \\
        --predictions out/gpus/twins.csv
    python3 scripts/studies/gpu_twins.py table out/gpus/twins.csv [out/gpus/loo.csv]

The second table argument (gpu_loo.sh's predictions) adds the held-out-GPU column."""
import collections
import csv
import json
import random
import shutil
import sqlite3
import sys

BUCKETS = [(0.005, "< 5 us"), (0.02, "5-20 us"), (0.1, "20-100 us"), (float("inf"), ">= 100 us")]


def make(src, dst):
    shutil.copyfile(src, dst)
    c = sqlite3.connect(dst)
    rng = random.Random(1)
    with_rows = {d for (d,) in c.execute("SELECT DISTINCT device FROM layers")}
    for key, name, kind, rec in c.execute("SELECT key, name, kind, record FROM devices ORDER BY key").fetchall():
        if key not in with_rows:
            continue
        r = json.loads(rec)
        r["name"] = name + " twin"
        twin = f"{kind}:{r['name']}"
        c.execute("INSERT INTO devices (key, name, kind, record) VALUES (?, ?, ?, ?)",
                  (twin, r["name"], kind, json.dumps(r)))
        ids = [i for (i,) in c.execute("SELECT id FROM layers WHERE device = ? ORDER BY id", (key,))]
        rng.shuffle(ids)
        c.executemany("UPDATE layers SET device = ? WHERE id = ?", [(twin, i) for i in ids[:len(ids) // 2]])
    c.commit()
    print(f"{dst}: {len(with_rows)} GPUs, each with a twin holding half its rows")


def errors(path, twins):
    out = collections.defaultdict(list)
    for r in csv.DictReader(open(path)):
        if r["type"] != "linear" or r["direction"] != "fwd" or r["device"].endswith(" twin") != twins:
            continue
        m, p = float(r["measured_ms"]), float(r["predicted_ms"])
        b = next(label for lim, label in BUCKETS if m < lim)
        for key in ((r["dtype"], "all rows"), (r["dtype"], b)):
            out[key].append(abs(p / m - 1))
    return out


def table(twin_csv, loo_csv=None):
    tw = errors(twin_csv, True)
    lo = errors(loo_csv, False) if loo_csv else {}
    print("| GEMM dtype | rows | kernel time | in distribution (twin held out): MAPE % |"
          + (" GPU type held out (the same command on gpus.sqlite): MAPE % |" if lo else ""))
    print("|---|---|---|---|" + ("---|" if lo else ""))
    for dt in ("bf16", "fp16", "fp8", "fp32"):
        for _, label in [(0, "all rows")] + BUCKETS:
            v = tw.get((dt, label))
            if not v:
                continue
            cell = f" {100 * sum(lo[(dt, label)]) / len(lo[(dt, label)]):.1f} |" if lo.get((dt, label)) else ""
            print(f"| {dt} | {len(v)} | {label} | {100 * sum(v) / len(v):.1f} |" + cell)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "table":
        table(*sys.argv[2:])
    else:
        sys.exit(__doc__)
