#!/usr/bin/env python3
"""MRE per held-out GPU and operator type: plain leave-one-GPU-out (base.csv) against the
geometric mean of the bags' predictions (minus_*.csv: the same protocol on stores without one
more GPU). Usage: device_bagging.py OUTDIR (written by scripts/studies/device_bagging.sh)."""
import csv, glob, math, os, sys

def load(f):
    d = {}
    for r in csv.DictReader(open(f)):
        k = (r['device'], r['type'], r['dims'], r['dtype'], r['direction'])
        d[k] = (float(r['measured_ms']), float(r['predicted_ms']))
    return d

def mre(rows):
    return 100 * sum(abs(p - m) / m for m, p in rows) / len(rows) if rows else float('nan')

out = sys.argv[1]
base = load(os.path.join(out, 'base.csv'))
bags = [load(f) for f in glob.glob(os.path.join(out, 'minus_*.csv'))]
bag = {}
for k, (m, _) in base.items():
    ps = [b[k][1] for b in bags if k in b]
    bag[k] = (m, math.exp(sum(math.log(x) for x in ps) / len(ps)))
devs = sorted({k[0] for k in base})
types = sorted({k[1] for k in base})
print('MRE % plain / bagged')
print('| type | ' + ' | '.join(d.split(':', 1)[-1] for d in devs) + ' | all |')
print('|---' * (len(devs) + 2) + '|')
for t in ['all'] + types:
    cells, lb, lg = [], [], []
    for d in devs:
        rb = [v for k, v in base.items() if k[0] == d and t in ('all', k[1])]
        rg = [v for k, v in bag.items() if k[0] == d and t in ('all', k[1])]
        cells.append(f'{mre(rb):.1f} / {mre(rg):.1f}')
        lb += rb
        lg += rg
    print(f'| {t} | ' + ' | '.join(cells) + f' | {mre(lb):.1f} / {mre(lg):.1f} |')
