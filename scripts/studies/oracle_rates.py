#!/usr/bin/env python3
"""An oracle experiment of docs/unseen-gpu.md ("Sustained bandwidth"): a copy of a
NeuSight-style store whose GPU records carry each GPU's own measured rates in place of
its spec peaks, so that `scaledl eval` / `eval layers` on the copy show what knowing
those rates would give. Not a product path: the held-out GPU's rates come from its own
rows (what a probe on it would measure).

    python3 scripts/studies/oracle_rates.py SRC.sqlite DST.sqlite --gemm top|median [--bandwidth]

--gemm top     FP32 rate = median rate of the tenth of its `linear` rows with the most FLOP,
               set to 0.75 of the new peak (peak_fp32_gflops = rate / 0.75)
--gemm median  FP32 rate = median rate of its `linear` rows at 3x its fastest `linear` row
               or more, set to 0.6 of the new peak
--bandwidth    also peak_mem_bw_gbs = the median rate of its largest tenth of `add` rows / 0.8
Prints, per GPU, the rates used and their share of the spec, and the median share of
the peak its `linear` rows of 0.2-1 ms reach.
"""
import argparse
import json
import shutil
import sqlite3
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--gemm", choices=["top", "median"], required=True)
    ap.add_argument("--bandwidth", action="store_true")
    a = ap.parse_args()
    shutil.copy(a.src, a.dst)
    db = sqlite3.connect(a.dst)
    for key, text in list(db.execute("select key, record from devices")):
        rec = json.loads(text)
        lin = []
        for d, t in db.execute("select dims, fwd_median_ms from layers where device=? and layer_type='linear' "
                               "and status='ok' and dtype='fp32'", (key,)):
            d = json.loads(d)
            fl = 2.0 * d[0] * d[1] * d[2]
            lin.append((fl, t, fl / (t * 1e-3) / 1e9))
        if len(lin) < 5:
            continue
        peak = rec["peak_fp32_gflops"]
        mid = [r for _, t, r in lin if 0.2 <= t < 1.0]
        if a.gemm == "top":
            lin.sort(reverse=True)
            gf = statistics.median(r for _, _, r in lin[:max(5, len(lin) // 10)])
            rec["peak_fp32_gflops"] = gf / 0.75
        else:
            floor = min(t for _, t, _ in lin)
            gf = statistics.median(r for _, t, r in lin if t >= 3 * floor)
            rec["peak_fp32_gflops"] = gf / 0.6
        line = f"{key}: linear {gf:.0f} GFLOP/s ({gf / peak:.2f} of {peak:.0f})"
        if mid:
            line += f", rows of 0.2-1 ms {statistics.median(mid) / peak:.2f}"
        if a.bandwidth:
            add = [(json.loads(d)[0] * 12.0, t) for d, t in db.execute(
                "select dims, fwd_median_ms from layers where device=? and layer_type='add' and status='ok' "
                "and dtype='fp32'", (key,))]
            add.sort(reverse=True)
            bw = statistics.median(b / (t * 1e-3) / 1e9 for b, t in add[:max(5, len(add) // 10)])
            line += f"; add {bw:.0f} GB/s ({bw / rec['peak_mem_bw_gbs']:.2f} of {rec['peak_mem_bw_gbs']:.0f})"
            rec["peak_mem_bw_gbs"] = bw / 0.8
        print(line)
        db.execute("update devices set record=? where key=?", (json.dumps(rec), key))
    db.commit()


if __name__ == "__main__":
    main()
