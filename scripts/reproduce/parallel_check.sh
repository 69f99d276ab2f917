#!/usr/bin/env bash
# The cluster checks of issue #14 on committed data only, into docs/results/parallel/:
#   1. vTrain's A100 all-reduce tables (datasets/vtrain-allreduce/a100) -> store -> fit of B, gamma
#   2. the parallel composition (predict --gpus/--tp/--pp) of the default bundle, with that fit, against
#      vTrain's 720 single-node A100 runs and NeuSight's three 4-GPU GPT-2 large cases, and (--shipped)
#      what `predict --gpus` prints with the A100 fabric preset, nothing fitted on the runs
#   3. a speedup curve of GPT-2 large on A100s (scaledl scale) with its plot
#   scripts/reproduce/parallel_check.sh            (~25 s on the 2-core VM)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SCALEDL_BIN:-build/tools/scaledl}
OUT=docs/results/parallel
WORK=out/parallel
mkdir -p "$OUT" "$WORK"
rm -f "$WORK/ar.sqlite"*
"$BIN" import nccl-tests datasets/vtrain-allreduce/a100/AR_GPU* --db "$WORK/ar.sqlite" --campaign vtrain-a100 \
  > "$OUT/import.txt"
"$BIN" comm fit --db "$WORK/ar.sqlite" --out "$OUT/comm-a100.json" > "$OUT/comm-fit.txt"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
"$BIN" eval parallel --runs datasets/vtrain/single_node_train.csv \
  --test-runs datasets/parallel/neusight-a100-4gpu.csv --bundle models/bundles/default \
  --device-spec models/devices/a100-sxm4-40gb.json --comm "$OUT/comm-a100.json" --seeds 5 --shipped --out "$OUT" \
  > "$OUT/eval.txt"
# Protocol vtrain-shipped-crosswidth: the shipped path with Megatron-LM's host cost per node
# fitted on the runs of one width (the extrapolation rows of report.json), scored on the other
# width's runs; the plain shipped path above takes the default (73 us, fitted on all these runs).
for pair in "1024 2048" "2048 1024"; do
  set -- $pair
  d=$(python3 -c "import json; r = json.load(open('$OUT/report.json')); \
print(1e3 * [e['host_node_ms'] for e in r['extrapolation'] if e['split'] == 'fit on hidden $1, test on hidden $2'][0])")
  mkdir -p "$WORK/crosswidth-$2"
  "$BIN" eval parallel --runs datasets/vtrain/single_node_train.csv --bundle models/bundles/default \
    --device-spec models/devices/a100-sxm4-40gb.json --comm "$OUT/comm-a100.json" --seeds 1 --shipped \
    --shipped-host-node-us "$d" --out "$WORK/crosswidth-$2" > "$WORK/crosswidth-$2/eval.txt"
  echo "hidden $2: host cost per node fitted on hidden $1: $d us" >> "$WORK/crosswidth-d.txt.new"
done
mv "$WORK/crosswidth-d.txt.new" "$WORK/crosswidth-d.txt"
python3 - "$WORK" > "$OUT/crosswidth.txt" <<'PY'
import csv, sys
work = sys.argv[1]
rows = []
for h in ("1024", "2048"):
    for r in csv.DictReader(open(f"{work}/crosswidth-{h}/shipped.csv")):
        if r["label"].startswith(f"gpt h{h} "):
            rows.append((r["scheme"], float(r["shipped_ms"]) / float(r["measured_ms"]) - 1))
print(open(f"{work}/crosswidth-d.txt").read().strip())
print("protocol vtrain-shipped-crosswidth: predict --gpus with the host cost fitted on the other width")
for scheme in ["all"] + sorted({s for s, _ in rows}):
    e = [x for s, x in rows if scheme == "all" or s == scheme]
    print(f"{scheme:10s} {len(e):4d} runs  MRE {100 * sum(map(abs, e)) / len(e):5.1f} %  bias {100 * sum(e) / len(e):+5.1f} %")
PY
"$BIN" scale models/gpt2-large.json --bundle models/bundles/default \
  --device-spec models/devices/a100-sxm4-40gb.json --comm "$OUT/comm-a100.json" --gpus 1..64 \
  --batch 64 --seq 1024 --dtype fp16 --framework megatron --recompute --samples 1000000 --price-per-gpu-hour 2 \
  --target-epoch-s 3600 --plot "$OUT/scale-gpt2-large" > "$OUT/scale-gpt2-large.txt"
echo "wrote $OUT"
