#!/usr/bin/env python3
"""In-model node times of this dataset's runs against the layer models' predictions, summed
per layer kind and model_type: where the cross-device error of docs/results/cpu-deepseek
comes from. The layer models are trained on cpu-v2 (isolated rows + its runs' in-model node
times, no model run of this machine), the machine is known by its probe record.

    scaledl train layers --db datasets/cpu-v2/cpu-v2.sqlite --db datasets/cpu-v2/cpu-v2-rest.sqlite \\
        --in-model-db datasets/cpu-v2/cpu-v2.sqlite --in-model-db datasets/cpu-v2/cpu-v2-rest.sqlite \\
        --out /tmp/cpuL --folds 0 --methods xgboost --nthread 1
    python3 datasets/cpu-deepseek/by_kind.py /tmp/cpuL [SCALEDL]      (repository root; ~40 s)
"""
import json, os, sqlite3, subprocess, sys, tempfile
from collections import defaultdict

layers = sys.argv[1]
B = sys.argv[2] if len(sys.argv) > 2 else "build/tools/scaledl"
here = os.path.dirname(os.path.abspath(__file__))
db = os.path.join(here, "cpu-deepseek.sqlite")
plan = json.load(open(os.path.join(here, "models.json")))["configs"]
rows = list(sqlite3.connect(db).execute("select model, settings, node_times, iter_median_ms, device from models order by id"))
meas = defaultdict(lambda: defaultdict(float))
pred = defaultdict(lambda: defaultdict(float))
tot = defaultdict(lambda: [0.0, 0.0])
tmp = tempfile.mkdtemp()
for i, (cfg, (model, settings, node_times, iter_ms, dev)) in enumerate(zip(plan, rows)):
    o, s = cfg["overrides"], cfg["settings"]
    mj, sj = json.loads(model), json.loads(settings)
    assert (mj["hidden"], mj["num_layers"], sj["batch"], sj["seq_len"]) == \
        (o["hidden_size"], o["num_hidden_layers"], s["batch"], s["seq_len"]), f"run {i} is not plan entry {i}"
    config = json.load(open(os.path.join(here, cfg["model"])))
    config.update(o)
    path = os.path.join(tmp, f"c{i}.json")
    json.dump(config, open(path, "w"))
    args = ["--batch", str(s["batch"]), "--seq", str(s["seq_len"])]
    p = json.loads(subprocess.run([B, "predict", "--layers", layers, "--db", db, "--device", dev, path, "--json", "--raw"]
                                  + args, capture_output=True, text=True, check=True).stdout)
    g = json.loads(subprocess.run([B, "inspect", path, "--json"] + args, capture_output=True, text=True, check=True).stdout)
    kind = {n["name"]: f"{n['type']}.{n['dir']}" for n in g["layers"]}
    t = os.path.basename(cfg["model"])[:-5]
    for k, v in p["by_type_ms"].items():
        pred[t][k.split(" ")[0]] += v
    for n, ms in json.loads(node_times):
        meas[t][kind[n]] += ms
    tot[t][0] += iter_ms
    tot[t][1] += p["t_sum_ms"]
for t in meas:
    m0, p0 = tot[t]
    print(f"\n{t}: measured iterations {m0:.0f} ms, predicted layer sum {p0:.0f} ms ({100 * (p0 / m0 - 1):+.0f} %)")
    print("| kind | measured in-model ms | predicted ms | |\n|---|---|---|---|")
    for k in sorted(set(meas[t]) | set(pred[t]), key=lambda k: -meas[t].get(k, 0))[:12]:
        m, q = meas[t].get(k, 0), pred[t].get(k, 0)
        print(f"| {k} | {m:.1f} | {q:.1f} | {100 * (q / m - 1):+.0f} % |" if m else f"| {k} | 0 | {q:.1f} | |")
