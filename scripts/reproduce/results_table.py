#!/usr/bin/env python3
"""Markdown table of MRE % (mean ± sd over seeds) per method and protocol from
`scaledl eval` reports:  python3 scripts/reproduce/results_table.py docs/results/cpu-v2/{id,ood-size,ood-family,cross-device}
Standard library only."""
import json
import os
import sys

reports = [(os.path.basename(d.rstrip("/")), json.load(open(os.path.join(d, "report.json")))) for d in sys.argv[1:]]
methods = reports[0][1]["methods"]
print("| method | " + " | ".join(f"{n} (n = {next(r['n'] for r in rep['summary'] if r['family'] == 'all')}, "
                                  f"{rep['seeds']} seed{'s' if rep['seeds'] > 1 else ''})" for n, rep in reports) + " |")
print("|---|" + "---|" * len(reports))
for m in methods:
    cells = []
    for _, rep in reports:
        row = next((r for r in rep["summary"] if r["method"] == m and r["family"] == "all"), None)
        if row is None or row["mre_pct"] is None:
            cells.append("–")
        elif rep["seeds"] > 1:
            cells.append(f"{row['mre_pct']:.1f} ± {row['mre_sd']:.1f} (p90 {row['p90_pct']:.0f})")
        else:
            cells.append(f"{row['mre_pct']:.1f} (p90 {row['p90_pct']:.0f})")
    print(f"| {m} | " + " | ".join(cells) + " |")

# Interval coverage and the per-family checks of issue #12, when the reports have them.
if any("intervals" in rep for _, rep in reports):
    cells = []
    for _, rep in reports:
        iv = next((r for r in rep.get("intervals", []) if r["method"] == "scaledl-tc"), None)
        cells.append("–" if iv is None else
                     f"{iv['coverage80_pct']:.1f} / {iv['coverage95_pct']:.1f}" +
                     (f" (sd {iv['coverage80_pct_sd']:.1f} / {iv['coverage95_pct_sd']:.1f})" if rep["seeds"] > 1 else ""))
    print("| scaledl-tc interval coverage % (80 / 95 nominal) | " + " | ".join(cells) + " |")
cells = []
for _, rep in reports:
    fam = {r["family"]: r["mre_pct"] for r in rep["summary"] if r["method"] == "scaledl-tc" and r["family"] != "all"}
    fam_sum = {r["family"]: r["mre_pct"] for r in rep["summary"] if r["method"] == "sum" and r["family"] != "all"}
    if not fam:
        cells.append("–")
        continue
    worst = max(fam, key=fam.get)
    worse = [f for f in fam if f in fam_sum and fam[f] > fam_sum[f] + 0.05]  # beyond rounding
    cells.append(f"worst {worst} {fam[worst]:.1f}; worse than sum: {', '.join(worse) if worse else 'none'}")
print("| scaledl-tc per family | " + " | ".join(cells) + " |")
