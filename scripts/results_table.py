#!/usr/bin/env python3
"""Markdown table of MRE % (mean ± sd over seeds) per method and protocol from
`scaledl eval` reports:  python3 scripts/results_table.py docs/results/cpu-v2/{id,ood-size,ood-family,cross-device}
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
