#!/usr/bin/env python3
"""How well a layer campaign repeats with one pass and with several (`bench layers
--passes N`, docs/bench.md, "Several passes"): a store holding two campaigns of each
kind, timed interleaved on one machine (scripts/studies/passes_check.sh), compared pair by
pair over the configs ok in both campaigns of the pair.

    python3 scripts/studies/passes_repeat.py STORE.sqlite [A B [C D ...]]

Default pairs: one-a / one-b and three-a / three-b. Prints, per pair and direction, the
configs compared and the ratio B / A of their medians: median, p10, p90, the share
outside +-10 %, and the mean |log ratio| (%)."""
import math
import sqlite3
import statistics as st
import sys


def rows(db, campaign):
    q = "select config_key, fwd_median_ms, bwd_median_ms from layers where campaign = ? and status = 'ok'"
    return {k: (f, b) for k, f, b in db.execute(q, (campaign,))}


def quantile(xs, q):
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo = math.floor(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def main():
    if len(sys.argv) < 2 or len(sys.argv) % 2:
        sys.exit(__doc__)
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    names = sys.argv[2:] or ["one-a", "one-b", "three-a", "three-b"]
    print("| pair | direction | configs | median B/A | p10 | p90 | outside +-10 % | mean abs log ratio % |")
    print("|---|---|---|---|---|---|---|---|")
    for a, b in zip(names[::2], names[1::2]):
        ra, rb = rows(db, a), rows(db, b)
        for d, name in ((0, "fwd"), (1, "bwd")):
            r = [rb[k][d] / ra[k][d] for k in ra.keys() & rb.keys()
                 if ra[k][d] and rb[k][d] and ra[k][d] > 0 and rb[k][d] > 0]
            if not r:
                continue
            out = sum(1 for x in r if abs(x - 1) > 0.10) / len(r)
            mal = 100 * st.mean(abs(math.log(x)) for x in r)
            print(f"| {a} / {b} | {name} | {len(r)} | {st.median(r):.3f} | {quantile(r, 0.1):.3f} | "
                  f"{quantile(r, 0.9):.3f} | {100 * out:.0f} % | {mal:.1f} |")


if __name__ == "__main__":
    main()
