#!/usr/bin/env python3
"""Predicts the H200 test set (datasets/h200/hf-e2e.csv: Hugging Face eager runs timed
the NeuSight way on a GPU that no training data of the bundle comes from) with a
bundle, once from the spec sheet and once from the measured probe record, and
writes the errors (docs/unseen-gpu.md, "An H200 test set").

    python3 scripts/reproduce/eval_h200.py [--bundle models/bundles/default] [--scaledl build/tools/scaledl] \
        [--out docs/results/unseen-gpu/h200] [--no-anchors]

Also (unless --no-anchors) the anchored predictions: each run in turn is the one
run measured on the H200 (`predict --anchor`), the other 23 are predicted.

--calibrate-ops DIR: every prediction calibrated (`predict --calibrate`) with the
operator set of NeuSight's layout in DIR (datasets/h200/neusight-ops: NeuSight's
operator benchmarks timed on the H200), imported into a temporary store first.
"""
import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICES = [("spec sheet", "models/devices/h200-sxm.json"), ("probe record", "datasets/h200/probe.json")]


CALIBRATE = []  # ["--calibrate", STORE] with --calibrate-ops


def predict(scaledl, bundle, rows, spec, anchor=None):
    """Predictions of `rows` on `spec`; with `anchor` (a row with label_ms), anchored on it (predict --anchor)."""
    with tempfile.TemporaryDirectory() as d:
        extra = list(CALIBRATE)
        if anchor is not None:
            ap = os.path.join(d, "anchor.csv")
            with open(ap, "w") as f:
                f.write("model,batch,seq,mode,measured_ms\n")
                f.write(f"{os.path.join(ROOT, 'datasets/neusight/model_configs', anchor['model'] + '.json')},"
                        f"{anchor['batch']},{anchor['seq']},{anchor['mode']},{anchor['label_ms']}\n")
            extra += ["--anchor", ap]
        p = os.path.join(d, "in.csv")
        with open(p, "w") as f:
            f.write("model,batch,seq,mode\n")
            for r in rows:
                f.write(f"{os.path.join(ROOT, 'datasets/neusight/model_configs', r['model'] + '.json')},"
                        f"{r['batch']},{r['seq']},{r['mode']}\n")
        out = subprocess.run([scaledl, "predict", "--bundle", bundle, "--csv", p, "--device-spec",
                              os.path.join(ROOT, spec)] + extra, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"eval_h200: predict failed: {out.stderr.strip()}")
        return list(csv.DictReader(io.StringIO(out.stdout)))


def mre(xs):
    return f"{100 * statistics.mean(abs(x) for x in xs):.1f} ({100 * statistics.mean(xs):+.0f})" if xs else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default=os.path.join(ROOT, "models/bundles/default"))
    ap.add_argument("--scaledl", default=os.path.join(ROOT, "build/tools/scaledl"))
    ap.add_argument("--labels", default=os.path.join(ROOT, "datasets/h200/hf-e2e.csv"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/results/unseen-gpu/h200"))
    ap.add_argument("--no-anchors", dest="anchors", action="store_false",
                    help="skip the anchored rows (each run in turn measured, the others predicted: 48 predict calls)")
    ap.add_argument("--calibrate-ops", help="NeuSight-layout operator set of the H200 to calibrate with")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    if a.calibrate_ops:
        store = os.path.join(tmp.name, "ops.sqlite")
        out = subprocess.run([a.scaledl, "import", "neusight", "--root", a.calibrate_ops, "--db", store],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"eval_h200: import failed: {out.stderr.strip()}")
        CALIBRATE.extend(["--calibrate", store])
    spec_of = dict(DEVICES)
    rows = [r for r in csv.DictReader(open(a.labels)) if r["status"] == "ok"]
    os.makedirs(a.out, exist_ok=True)
    per = []  # (device, row, pred)
    for dev, spec in DEVICES:
        preds = predict(a.scaledl, a.bundle, rows, spec)
        assert len(preds) == len(rows)
        per += [(dev, r, p) for r, p in zip(rows, preds)]
    with open(os.path.join(a.out, "predictions.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["device", "model", "mode", "batch", "seq", "measured_ms", "sum_ms", "scaledl_tc_ms", "lo80_ms",
                    "hi80_ms", "lo95_ms", "hi95_ms", "out_of_domain"])
        for dev, r, p in per:
            w.writerow([dev, r["model"], r["mode"], r["batch"], r["seq"], r["label_ms"], p["t_sum_ms"], p["t_iter_ms"],
                        p["lo80_ms"], p["hi80_ms"], p["lo95_ms"], p["hi95_ms"], p["out_of_domain"]])
    lines = [f"# H200 test set: {len(rows)} Hugging Face eager runs (datasets/h200), bundle `{os.path.relpath(a.bundle, ROOT)}`",
             "", "Made by `python3 scripts/reproduce/eval_h200.py" +
             (f" --calibrate-ops {os.path.relpath(a.calibrate_ops, ROOT)}" if a.calibrate_ops else "") +
             "`. MRE % (signed bias % in brackets); "
             "coverage = share of measured times inside the interval.", "",
             "| device record | method | all | inference | fwd-bwd | 80 % coverage | 95 % coverage |",
             "|---|---|---|---|---|---|---|"]
    for dev, _ in DEVICES:
        sub = [(r, p) for d, r, p in per if d == dev]
        for meth, key in [("sum", "t_sum_ms"), ("scaledl-tc", "t_iter_ms")]:
            err = {m: [float(p[key]) / float(r["label_ms"]) - 1 for r, p in sub if m in ("all", r["mode"])]
                   for m in ("all", "inference", "fwd-bwd")}
            cov = ["", ""]
            if key == "t_iter_ms":
                for i, lv in enumerate(("80", "95")):
                    inside = [float(p[f"lo{lv}_ms"]) <= float(r["label_ms"]) <= float(p[f"hi{lv}_ms"]) for r, p in sub]
                    cov[i] = f"{100 * sum(inside) / len(inside):.0f} %"
            lines.append(f"| {dev} | {meth} | {mre(err['all'])} | {mre(err['inference'])} | {mre(err['fwd-bwd'])} "
                         f"| {cov[0]} | {cov[1]} |")
        if a.anchors:
            # Each run in turn is the one measured run (predict --anchor); the other 23 are scored.
            err = {m: [] for m in ("all", "inference", "fwd-bwd")}
            inside = {"80": [], "95": []}
            for k, anchor in enumerate(rows):
                preds = predict(a.scaledl, a.bundle, rows, spec_of[dev], anchor)
                for j, (r, p) in enumerate(zip(rows, preds)):
                    if j == k:
                        continue
                    e = float(p["t_iter_ms"]) / float(r["label_ms"]) - 1
                    for m in ("all", r["mode"]):
                        err[m].append(e)
                    for lv in ("80", "95"):
                        inside[lv].append(float(p[f"lo{lv}_ms"]) <= float(r["label_ms"]) <= float(p[f"hi{lv}_ms"]))
            cov = [f"{100 * sum(v) / len(v):.0f} %" for v in inside.values()]
            lines.append(f"| {dev} | scaledl-tc, 1 anchor run | {mre(err['all'])} | {mre(err['inference'])} | "
                         f"{mre(err['fwd-bwd'])} | {cov[0]} | {cov[1]} |")
    lines += ["", "Per run (APE % in brackets):", "",
              "| model | mode | batch | seq | measured ms | sum, spec | scaledl-tc, spec | sum, probe | scaledl-tc, probe |",
              "|---|---|---|---|---|---|---|---|---|"]
    n = len(rows)
    for i, r in enumerate(rows):
        cells = []
        for k in (0, 1):
            p = per[k * n + i][2]
            for key in ("t_sum_ms", "t_iter_ms"):
                v = float(p[key])
                cells.append(f"{v:.1f} ({100 * abs(v / float(r['label_ms']) - 1):.0f})")
        lines.append(f"| {r['model']} | {r['mode']} | {r['batch']} | {r['seq']} | {float(r['label_ms']):.1f} | "
                     f"{cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |")
    with open(os.path.join(a.out, "tables.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:14]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
